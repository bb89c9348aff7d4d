// Command aml runs AML workflows written in Starlark.
//
//	aml init [DIR]         write a starter workflow, its golden test and editor settings
//	aml run FILE [flags]   evaluate a workflow and print its result
//	aml test [PATH...]     run golden-file tests of workflows
//	aml doc [NAME]         reference for the predeclared builtins
//	aml check PATH...      check workflow files without running them
//	aml graph FILE         draw the tree a workflow builds (Mermaid, DOT, SVG, PNG, HTML)
//	aml report TRACE       the HTML run report of a trace file
//	aml fmt [-w] PATH...   format workflow files
//	aml lsp                the language server (stdio)
//	aml workspace prune    remove what killed aml processes left behind (also check, recover, unlock, verify)
//	aml sandbox prune      remove the containers killed aml processes left
//	aml version            print version information
//
//	aml resume RUN         continue a journaled run (after a crash, or with answers)
//	aml runs               list, show and prune journaled runs
//
//	aml worker             run workflows and agent sessions from a Temporal task queue
//	aml cancel RUN         cancel a run on Temporal
//	aml answer RUN ID=V... answer the questions a run on Temporal waits for
//
//	aml mcp-relay          the stdio relay to an ACP agent's tool bridge (aml starts it)
//
// The commands are one table (commands in internal/cli/main.go), from which aml help
// and docs/reference/cli.md are made.
//
// Exit codes: 0 success, 1 workflow failure, 2 usage or load error, 4 a
// journaled run waits for answers, 5 a limit exceeded, 130/143 after
// SIGINT/SIGTERM (docs/reference/cli.md has the table).
package main

import (
	"os"

	"github.com/aml-go/aml/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=..." (the
// release build sets it to the tag).
var version = ""

func main() {
	os.Exit(cli.Run(cli.Build{Version: version}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
