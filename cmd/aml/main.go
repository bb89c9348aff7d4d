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
//	aml workspace prune    remove what killed aml processes left behind
//	aml sandbox prune      remove the containers killed aml processes left
//	aml version            print version information
//
//	aml resume RUN         continue a journaled run (after a crash, or with answers)
//	aml runs               list, show and prune journaled runs
//
// Exit codes: 0 success, 1 workflow failure, 2 usage or load error, 4 a
// journaled run waits for answers, 5 a limit exceeded, 130/143 after
// SIGINT/SIGTERM (docs/reference/cli.md has the table).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aml-go/aml/internal/tunnel"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/starlib"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitSuspended: a journaled run waits for answers (aml resume).
	exitSuspended = 4
	// exitLimit: the run exceeded one of its limits (max_agent_calls,
	// max_steps, max_depth, max_turns_per_agent).
	exitLimit    = 5
	exitSIGINT   = 130
	exitSIGTERM  = 143
	usageSummary = `usage: aml <command> [arguments]

Commands:
  init [DIR]         write a starter workflow, its golden test and editor settings
  run FILE [flags]   evaluate a workflow and print its result (--temporal: on a fleet of workers)
  worker --temporal HOST:PORT
                     run workflows and agent sessions from a Temporal task queue
  cancel RUN --temporal HOST:PORT
                     cancel a run on Temporal (terminated after --grace, 30s, if it has not ended)
  answer RUN ID=VALUE... --temporal HOST:PORT
                     answer the questions a run on Temporal waits for
  resume RUN --journal DIR
                     continue a journaled run after a crash, or answer its questions
  runs [show RUN|prune] --journal DIR
                     list, show or prune journaled runs (--temporal: runs on Temporal)
  test [PATH...]     run golden-file tests (*_test.star, .star with .golden)
  doc [NAME]         show the reference of every builtin, or of one
  check PATH...      check workflow files without running them
  graph FILE [-o OUT]
                     draw the tree a workflow builds (.mmd, .dot, .svg, .png, .html)
  report TRACE.jsonl [-o run.html]
                     the HTML run report of a trace file (aml run --report writes one too)
  fmt [-w|-d|-l] PATH...
                     format workflow files
  lsp                the language server for editors (stdio)
  workspace prune    remove what killed aml processes left behind
  workspace check STORE [ID...]
                     verify a workspace store: indexes, revisions, their digests
  workspace recover STORE ID
                     rebuild a lost or damaged workspace index from its revisions
  workspace unlock STORE ID
                     remove a writer lock whose holder is gone or stale
  workspace verify s3://BUCKET[/PREFIX]
                     check that an S3 service honours the S3 workspace's protocol
  sandbox prune      remove the Docker sandbox containers killed aml processes left
  mcp-relay          the stdio relay to an ACP agent's tool bridge (started by aml itself)
  version            print version information

Run 'aml help COMMAND' (or 'aml COMMAND -h') for the help of one command.
`
)

func main() {
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
	case "worker":
		return cmdWorker(args[1:], stdout, stderr)
	case "cancel":
		return cmdCancel(args[1:], stdout, stderr)
	case "answer":
		return cmdAnswer(args[1:], stdout, stderr)
	case "resume":
		return cmdResume(args[1:], stdout, stderr)
	case "runs":
		return cmdRuns(args[1:], stdout, stderr)
	case "test":
		return cmdTest(args[1:], stdout, stderr)
	case "init":
		return cmdInit(args[1:], stdout, stderr)
	case "doc":
		return cmdDoc(args[1:], stdout, stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "graph":
		return cmdGraph(args[1:], stdout, stderr)
	case "report":
		return cmdReport(args[1:], stdout, stderr)
	case "fmt":
		return cmdFmt(args[1:], stdout, stderr)
	case "lsp":
		return cmdLSP(args[1:], stdin, stdout, stderr)
	case "workspace":
		return cmdWorkspace(args[1:], stdin, stdout, stderr)
	case "sandbox":
		return cmdSandbox(args[1:], stdout, stderr)
	case "mcp-relay":
		return cmdMCPRelay(stdin, stdout, stderr)
	case "sandbox-tunnel":
		return cmdSandboxTunnel(args[1:], stdin, stdout, stderr)
	case "model-relay":
		return cmdModelRelay(args[1:], stderr)
	case "version", "--version", "-v":
		return cmdVersion(stdout)
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" {
			return cmdHelp(args[1:], stdout, stderr)
		}
		fmt.Fprint(stdout, usageSummary)
		return exitOK
	}
	if s := starlib.NearestName(args[0], commandNames); s != "" {
		fmt.Fprintf(stderr, "aml: unknown command %q (did you mean %s?); run 'aml help' for the commands\n", args[0], s)
		return exitUsage
	}
	fmt.Fprintf(stderr, "aml: unknown command %q; run 'aml help' for the commands\n", args[0])
	return exitUsage
}

// commandNames are the commands Main knows, for "did you mean".
var commandNames = []string{"run", "worker", "cancel", "answer", "resume", "runs", "test", "init", "doc", "check",
	"graph", "report", "fmt", "lsp", "workspace", "sandbox", "mcp-relay", "version", "help"}

// cmdHelp prints the help of one command on stdout: "aml help run" is
// "aml run -h".
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "usage: aml help [COMMAND]\n\n%s", usageSummary)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun([]string{"-h"}, stdout, stdout)
	case "worker":
		return cmdWorker([]string{"-h"}, stdout, stdout)
	case "cancel":
		return cmdCancel([]string{"-h"}, stdout, stdout)
	case "answer":
		return cmdAnswer([]string{"-h"}, stdout, stdout)
	case "resume":
		return cmdResume([]string{"-h"}, stdout, stdout)
	case "runs":
		return cmdRuns([]string{"-h"}, stdout, stdout)
	case "test":
		return cmdTest([]string{"-h"}, stdout, stdout)
	case "init":
		return cmdInit([]string{"-h"}, stdout, stdout)
	case "doc":
		return cmdDoc([]string{"-h"}, stdout, stdout)
	case "check":
		return cmdCheck([]string{"-h"}, stdout, stdout)
	case "graph":
		return cmdGraph([]string{"-h"}, stdout, stdout)
	case "report":
		return cmdReport([]string{"-h"}, stdout, stdout)
	case "fmt":
		return cmdFmt([]string{"-h"}, stdout, stdout)
	case "lsp":
		return cmdLSP([]string{"-h"}, nil, stdout, stdout)
	case "workspace":
		return cmdWorkspace([]string{"-h"}, nil, stdout, stdout)
	case "sandbox":
		return cmdSandbox([]string{"-h"}, stdout, stdout)
	case "version":
		fmt.Fprintln(stdout, "usage: aml version\n\nPrints the version of aml, the platform and the Go version it was built with.")
		return exitOK
	case "mcp-relay":
		fmt.Fprintln(stdout, "usage: aml mcp-relay\n\nServes the tool bridge of an ACP agent session over stdio; aml starts it itself (the bridge URL and secret come from the environment), never by hand.")
		return exitOK
	case "sandbox-tunnel":
		fmt.Fprintln(stdout, sandboxTunnelUsage)
		return exitOK
	case "help":
		fmt.Fprint(stdout, usageSummary)
		return exitOK
	}
	fmt.Fprintf(stderr, "aml help: unknown command %q\n\n%s", args[0], usageSummary)
	return exitUsage
}

// relayCommand is how an ACP agent starts this executable as the stdio
// relay to the tool bridge.
func relayCommand() []string {
	self := os.Args[0]
	if !strings.ContainsRune(self, filepath.Separator) {
		if p, err := exec.LookPath(self); err == nil {
			self = p
		}
	}
	if abs, err := filepath.Abs(self); err == nil {
		self = abs
	}
	return []string{self, "mcp-relay"}
}

// cmdMCPRelay serves the tool bridge named by the environment over stdio.
func cmdMCPRelay(stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := acp.RunRelay(ctx, io.NopCloser(stdin), nopWriteCloser{stdout}, acp.RelayOptions{Version: amlVersion()}); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	return exitOK
}

const sandboxTunnelUsage = `usage: aml sandbox-tunnel DIR

Carries unix socket connections between a remote sandbox and the aml
process that started it over its standard streams: it listens in DIR on
the socket names aml sends, so that an agent's tool relay in the sandbox
reaches the tool bridge on the host. aml starts it itself in Daytona and
Modal sandboxes, never by hand.`

// cmdModelRelay runs an agent in a sandbox with a loopback port carried
// to AML's model gateway (acp.RunModelRelay).
func cmdModelRelay(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("model-relay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "")
	port := fs.Int("port", 0, "")
	if err := fs.Parse(args); err != nil || *socket == "" || *port <= 0 || *port > 65535 || fs.NArg() == 0 {
		fmt.Fprintln(stderr, acp.ModelRelayUsage)
		return exitUsage
	}
	return acp.RunModelRelay(*socket, *port, fs.Arg(0), fs.Args()[1:], stderr)
}

// cmdSandboxTunnel runs the guest end of a remote sandbox's tunnel.
func cmdSandboxTunnel(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, sandboxTunnelUsage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := tunnel.Guest(ctx, args[0], stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "aml sandbox-tunnel: %v\n", err)
		return exitFailure
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
