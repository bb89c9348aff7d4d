package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/aml-go/aml/starlib/golden"
)

const testUsage = `usage: aml test [PATH...] [-update] [-run REGEXP]

Runs golden-file tests of workflows. Each PATH (default ".") is a directory,
walked recursively, or a .star file. A test is every *_test.star file and
every .star file with a sibling .golden file; its golden file is NAME.golden
beside NAME.star, and its name is its path relative to PATH without .star.

Each test evaluates the file's main in test mode and compares a record of
the run with the golden file:
  - every agent provider is replaced by a deterministic twin of the same
    name that echoes the prompt; providers made with deterministic_agent()
    in the file are kept (their respond= is the fixture), and agents with no
    provider get a deterministic echo provider;
  - env() sees only "# env: KEY=VALUE" lines of the file's leading comment
    block ("# test: no-default-agent" there gives agents no default
    provider); the process environment and .env files are not read;
  - sandbox and workspace providers are deterministic twins that run and
    store nothing ("# test: local-providers" keeps local_sandbox() and
    local_workspace(), whose commands run on this machine);
  - include(src=), skill() and relative provider paths resolve from the
    test file's directory.

The golden file records the result, print() output, every agent request
(provider, model, name, prompt, system, follow-ups, permissions, tools, MCP
servers, skills, output schema) with the provider's response, sorted by
source position and then prompt, and the error if the run failed. Paths are
relative to the test file's directory; agent staging directories read
$STAGING. A workflow that fails passes when its golden records the error;
such a test is marked "[expects an error]", and when -update writes an
error into a golden that recorded none, "[updated, now records an error:
the run fails]".

Output: one "ok   PATH (12ms)" or "FAIL PATH" line per test, a unified diff
under a mismatch, then "N passed, N failed", where "N passed" counts the
goldens that expect an error: "5 passed (2 expecting an error), 0 failed".

Exit status: 0 when every test passed, 1 when a test failed or no test was
found, 2 for usage errors (bad flag, bad -run expression, unreadable PATH).

Flags:
`

func cmdTest(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", testUsage, stderr)
	update := fs.Bool("update", false, "rewrite the golden files with the records of this run")
	run := fs.String("run", "", "run only the tests whose name matches this regular expression")
	paths, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan arrival, 2)
	defer listen(sigs)()

	var sum golden.Summary
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, err = golden.Run(golden.Options{
			Extensions: extensions(),
			Context:    ctx,
			Paths:      paths,
			Update:     *update,
			Run:        *run,
			Out:        stdout,
		})
	}()
	select {
	case <-done:
	case first := <-sigs:
		sig := first.sig
		// As aml run: the first signal cancels the tests and allows
		// cleanupDeadline for their cleanup; a second one exits at once.
		code, name := exitSIGINT, "SIGINT"
		if sig == syscall.SIGTERM {
			code, name = exitSIGTERM, "SIGTERM"
		}
		fmt.Fprintf(stderr, "aml test: received %s: cancelling (up to %s for cleanup; send it again to exit now)\n", name, cleanupDeadline)
		cancel(fmt.Errorf("aml test interrupted by %s", name))
		deadline := time.After(cleanupDeadline)
		for {
			select {
			case <-done:
				return code
			case again := <-sigs:
				if repeatedSignal(first, again) {
					continue
				}
				fmt.Fprintln(stderr, "aml test: second signal: exiting without waiting for cleanup")
				return code
			case <-deadline:
				fmt.Fprintf(stderr, "aml test: cleanup did not finish within %s; exiting\n", cleanupDeadline)
				return code
			}
		}
	}
	switch {
	case errors.Is(err, golden.ErrNoTests):
		fmt.Fprintf(stderr, "aml test: %v\n", err)
		return exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "aml test: %v\n", err)
		return exitUsage
	case sum.Failed > 0:
		return exitFailure
	}
	return exitOK
}
