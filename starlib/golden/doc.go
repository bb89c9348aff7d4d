// Package golden runs golden-file tests of AML workflows. It implements
// `aml test` and the evaluator's own golden tests over testdata/eval.
//
//	aml test [PATH...] [-update] [-run REGEXP]
//
// # Finding tests
//
// Every PATH (default ".") is a directory, walked recursively (directories
// whose names start with "." are skipped), or a .star file. A test is every
// file named *_test.star and every other .star file with a sibling .golden
// file of the same base name; a .star file named explicitly is always a
// test. The golden file of NAME.star is NAME.golden beside it. A test's
// name is its file path relative to the PATH it was found under, with
// slashes and without ".star"; -run REGEXP keeps the tests whose name it
// matches. Output lines name a test by its path as given (PATH joined with
// the name).
//
// # Running a test
//
// A test file is loaded and its global main is evaluated as `aml run`
// would, with these differences, so that goldens are hermetic:
//
//   - Every agent provider is replaced by its deterministic twin, also
//     providers named in the script: a provider built with
//     deterministic_agent() in the file is kept as is (its respond=
//     function is the test's fixture), and any other provider is replaced
//     by a deterministic provider of the same name that echoes the initial
//     prompt and keeps the original's native skill discovery and
//     object-tool-input capabilities. Agents that name no provider and have
//     no configure(agent_provider=) default get a deterministic echo
//     provider named "deterministic".
//   - Sandbox and workspace providers other than deterministic_sandbox()
//     and deterministic_workspace() are replaced by deterministic twins of
//     the same name: sandboxed commands run nowhere (they echo their
//     command line) and no durable store is touched. Scripts outside any
//     sandbox are trusted host commands and still run. With the directive
//     "# test: local-providers", local_sandbox() and local_workspace() are
//     kept: their commands run on this machine, as scripts outside any
//     sandbox do.
//   - Relative provider paths (a local workspace's directory, a local
//     sandbox's workspace) resolve from the test file's directory, where
//     its scripts run.
//   - env() sees only the "# env: KEY=VALUE" directives of the file's
//     leading comment block, never the process environment, and no .env
//     file is read.
//   - Application files (include(src=), skill()) resolve from the test
//     file's directory.
//   - print() output is recorded in the golden instead of being logged.
//
// Leading comment lines (before the first line that is neither blank nor
// a comment) may hold directives:
//
//	# env: KEY=VALUE          a variable env() sees (repeatable)
//	# test: no-default-agent  give agents without a provider no default,
//	                          so they fail as under `aml run`
//	# test: local-providers   keep local_sandbox() and local_workspace()
//	# cassette: PATH          serve agent results and answers from a
//	                          journaled run (aml run --journal DIR): PATH
//	                          is DIR when it holds one run, else DIR/RUN,
//	                          relative to the test file
//
// A cassette turns one real run into a regression test that runs offline:
// each agent() with a recording gets its recorded result instead of its
// twin's echo (and its request is not in the golden, since no provider
// received it), an ask() its recorded answer. An agent the recorded run
// never reached fails ("has no recording in the cassette"), and one whose
// request changed (prompt, system, model, tools, schema, provider) fails
// with the divergence aml resume reports. Everything else runs as without
// a cassette. The test file must sit in the workflow's directory (effect
// identities name files relative to it), usually as a file that loads
// the workflow's main.
//
// A workflow that fails is not a failed test: its error is part of the
// record. A test fails when its record differs from the golden file (a
// unified diff is printed), when the golden file is missing, or when the
// file cannot be read or has a malformed directive. -update writes the
// record to the golden file instead of comparing.
//
// # Golden format
//
// A golden file is a header comment line followed by sections, each
// present only when non-empty:
//
//	# aml test golden: ... (header; agents sorted by source position, then prompt)
//	-- result --   the result, one "|"-prefixed line per text line
//	-- print --    print() output, one line per line printed
//	-- agents --   every request an agent provider received
//	-- effects --  every script run (environment, command line, exit code
//	               or error) and every file() written (path and content),
//	               sorted by source position
//	-- error --    the load or evaluation error, if the run failed
//
// A run that succeeded has a result section and no error section; one
// that failed, the reverse. Whether a golden records an error (the test
// is marked "[expects an error]") is read from that structure: print()
// output is written verbatim, so a printed "-- error --" line is output,
// never the error section.
//
// Each agent record starts with "FILE:LINE:COL provider=P [model=M]
// [name=N]" (the agent() call's position and the provider that ran it),
// followed by indented fields, each present only when set:
//
//	prompt, system, follow_up[i], permissions (when not the default
//	read-write, network, shell), tool[i] (name, then description and
//	input_schema), mcp_server[i] (name and transport type; transports may
//	carry secrets and are not recorded), skill[i] (name, then description
//	and the staged SKILL.md file), output_schema, and what the provider
//	returned: result (its text), structured, message[i], or error.
//
// JSON values (schemas, structured results) are canonical JSON with sorted
// keys. A one-line value is written "name: value"; any other value
// (empty, multi-line, or with surrounding whitespace) as "name:" followed
// by one "|"-prefixed line per text line. Agent records are sorted by
// source position, then prompt, then record text, not in the order the
// agents ran, because parallel branches start in any order.
//
// Paths are written relative to the test file's directory (the directory
// itself is "."), and agents' private staging directories read $STAGING.
package golden
