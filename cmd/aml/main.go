// Command aml runs AML workflows written in Starlark.
//
//	aml run FILE [flags]   evaluate a workflow and print its result
//	aml test [PATH...]     run golden-file tests of workflows
//	aml doc [NAME]         reference for the predeclared builtins
//	aml version            print version information
//
// Exit codes: 0 success, 1 workflow failure, 2 usage or load error,
// 130/143 after SIGINT/SIGTERM.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/aml-go/aml/providers/agent/acp"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitSIGINT   = 130
	exitSIGTERM  = 143
	usageSummary = `usage: aml <command> [arguments]

Commands:
  run FILE [flags]   evaluate a workflow and print its result
  test [PATH...]     run golden-file tests (*_test.star, .star with .golden)
  doc [NAME]         show the reference of every builtin, or of one
  version            print version information

Run 'aml run -h' for the flags of run, 'aml test -h' for those of test.
`
)

func main() {
	acp.Version = amlVersion()
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Main runs the CLI with args (without the program name) and returns the
// exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageSummary)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "test":
		return cmdTest(args[1:], stdout, stderr)
	case "doc":
		return cmdDoc(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		return cmdVersion(stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usageSummary)
		return exitOK
	}
	fmt.Fprintf(stderr, "aml: unknown command %q\n\n%s", args[0], usageSummary)
	return exitUsage
}
