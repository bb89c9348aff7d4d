package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/starlib/golden"
)

const initUsage = `usage: aml init [DIR]

Writes a starter project into DIR (default the current directory, made
when missing): main.star, a workflow that runs without credentials (a
component that looks at one agent's answer before it decides, a
parallel() fan-out, a deterministic agent standing in for a model);
main.golden, its golden test, recorded by running it; and editor
settings (.vscode/extensions.json recommends the AML extension,
.vscode/settings.json points it at aml). Then it prints the next
commands: run, test, check.

A file that already exists is never overwritten: aml init refuses and
writes nothing.

Exit status: 0 on success, 2 for usage errors and existing files, 1 when
a file cannot be written.
`

// starterWorkflow is the workflow aml init writes.
const starterWorkflow = `# A starter AML workflow. It runs without credentials: a deterministic
# agent stands in for a model. Try:
#
#   aml run main.star           run it
#   aml run main.star --trace   see the tree of spans it ran
#   aml test                    compare it with main.golden
#
# For a real model, see docs/agents.md of AML for Go: replace the
# provider below by opencode_agent(...) or codex_agent(...).

def _respond(req):
    # A stand-in for a model: it sizes a change, answers for a review
    # lane, or sums up the findings it was given.
    if req.name == "size":
        return "large" if len(req.prompt) > 80 else "small"
    if req.name:
        return "%s: nothing blocking" % req.name
    return "Verdict: approve\n" + "\n".join([line for line in req.prompt.splitlines() if ": nothing" in line])

configure(agent_provider = deterministic_agent(respond = _respond))

def _review(change):
    # A component looks at a result before it decides what to return.
    size = evaluate(agent("Classify the size of: ", change, name = "size"))
    lanes = ["correctness", "security"]
    if "large" in size:
        lanes.append("design")
    return agent(
        "Write the verdict from these findings.",
        parallel([block(agent("Review for ", lane, ": ", change, name = lane)) for lane in lanes]),
    )

Review = component(_review)

def main():
    return Review(env("CHANGE", "add a retry loop around the upload client"))
`

// initFiles are the files aml init writes besides main.star and its
// golden file, by path relative to DIR.
var initFiles = []struct{ path, text string }{
	{".vscode/extensions.json", "{\n  \"recommendations\": [\"aml-go.aml\"]\n}\n"},
	{".vscode/settings.json", "{\n  \"aml.path\": \"aml\",\n  \"[starlark]\": {\n    \"editor.formatOnSave\": true\n  }\n}\n"},
}

func cmdInit(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("init", initUsage, stderr)
	pos, code, ok := parseArgs(flags, args)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "aml init: want at most one directory, got %d arguments\n", len(pos))
		flags.Usage()
		return exitUsage
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	files := []string{"main.star", "main.golden"}
	for _, f := range initFiles {
		files = append(files, f.path)
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if _, err := os.Lstat(p); err == nil {
			fmt.Fprintf(stderr, "aml init: %s exists; aml init writes only new files (move it away, or choose another directory)\n", p)
			return exitUsage
		} else if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "aml init: %v\n", err)
			return exitFailure
		}
	}
	write := func(rel, text string) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return durable.WriteFile(p, []byte(text), 0o644)
	}
	if err := write("main.star", starterWorkflow); err != nil {
		fmt.Fprintf(stderr, "aml init: %v\n", err)
		return exitFailure
	}
	for _, f := range initFiles {
		if err := write(f.path, f.text); err != nil {
			fmt.Fprintf(stderr, "aml init: %v\n", err)
			return exitFailure
		}
	}
	// The golden file is what aml test -update records: the workflow's
	// own run, not a copy kept here.
	test := golden.Test{Name: "main", Path: filepath.ToSlash(filepath.Join(dir, "main")),
		File: filepath.Join(dir, "main.star"), Golden: filepath.Join(dir, "main.golden"), Extensions: extensions()}
	if res := golden.Check(context.Background(), test, true, time.Minute); !res.OK || res.RecordsError {
		fmt.Fprintf(stderr, "aml init: recording main.golden: %s\n", res.Detail)
		return exitFailure
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "created %s\n", filepath.Join(dir, filepath.FromSlash(f)))
	}
	main := filepath.Join(dir, "main.star")
	fmt.Fprintf(stdout, "\nnext:\n  aml run %s\n  aml test %s\n  aml check %s\n", shellWord(main), shellWord(dir), shellWord(dir))
	return exitOK
}
