// Package cli is the aml command: its command table, flags, output and
// exit codes. Package main in cmd/aml is a few lines around Main; the
// command's user documentation is that package's doc and
// docs/reference/cli.md.
//
// Exit codes: 0 success, 1 workflow failure, 2 usage or load error, 4 a
// journaled run waits for answers, 5 a limit exceeded, 130/143 after
// SIGINT/SIGTERM.
package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

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
	exitLimit   = 5
	exitSIGINT  = 130
	exitSIGTERM = 143
)

// Run is the entry of the aml and aml-full executables: it records
// what b links (the version for aml version, the services) and runs
// Main. Call it once, from main, before anything else.
func Run(b Build, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	version, linked = b.Version, b.Services
	return Main(args, stdin, stdout, stderr)
}

// Main runs the CLI with args (without the program name) and returns the
// exit code; tests call it in-process.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageSummary)
		return exitUsage
	}
	if c := lookupCommand(args[0]); c != nil {
		if !linked.Linked() {
			if why, required := needsCompanion(c.name, args[1:]); why != "" {
				return runCompanion(c, why, required, args, stdin, stdout, stderr)
			}
		}
		return c.run(args[1:], stdin, stdout, stderr)
	}
	if s := starlib.NearestName(args[0], commandNames()); s != "" {
		fmt.Fprintf(stderr, "aml: unknown command %q (did you mean %s?); run 'aml help' for the commands\n", args[0], s)
		return exitUsage
	}
	fmt.Fprintf(stderr, "aml: unknown command %q; run 'aml help' for the commands\n", args[0])
	return exitUsage
}

// command is one command of aml: what Main runs for it, its lines in the
// list aml help prints and what aml help NAME prints.
type command struct {
	name string
	// aliases are other words Main runs the command for; aml help NAME
	// knows only the name.
	aliases []string
	// lines are the command's lines in the list of aml help, in order;
	// none for a command the list leaves out.
	lines []helpLine
	// hidden: never offered as "did you mean" for a mistyped command.
	hidden bool
	// help writes what aml help NAME prints on w and returns the exit
	// code; nil for a command aml help does not know.
	help func(c *command, w io.Writer) int
	run  func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// helpLine is one line of the command list of aml help: the command's
// name, sub, args, then summary.
type helpLine struct {
	sub     string // the subcommand the line is about, or ""
	args    string // what the command takes
	summary string
}

// synopsis is what the line shows before its summary.
func (l helpLine) synopsis(name string) string {
	s := name
	for _, w := range []string{l.sub, l.args} {
		if w != "" {
			s += " " + w
		}
	}
	return s
}

// commands are the commands of aml, in the order aml help lists them.
// init fills it: the help command refers to the table.
var commands []*command

// usageSummary is what aml help prints: the list of commands.
var usageSummary string

func init() {
	commands = []*command{
		{name: "init", lines: []helpLine{{args: "[DIR]", summary: "write a starter workflow, its golden test and editor settings"}},
			help: flagHelp, run: ignoreStdin(cmdInit)},
		{name: "run", lines: []helpLine{{args: "FILE [flags]", summary: "evaluate a workflow and print its result (--temporal: on a fleet of workers)"}},
			help: flagHelp, run: ignoreStdin(cmdRun)},
		{name: "worker", lines: []helpLine{{args: "--temporal HOST:PORT", summary: "run workflows and agent sessions from a Temporal task queue"}},
			help: flagHelp, run: ignoreStdin(cmdWorker)},
		{name: "cancel", lines: []helpLine{{args: "RUN --temporal HOST:PORT", summary: "cancel a run on Temporal (terminated after --grace, 30s, if it has not ended)"}},
			help: flagHelp, run: ignoreStdin(cmdCancel)},
		{name: "answer", lines: []helpLine{{args: "RUN ID=VALUE... --temporal HOST:PORT", summary: "answer the questions a run on Temporal waits for"}},
			help: flagHelp, run: ignoreStdin(cmdAnswer)},
		{name: "resume", lines: []helpLine{{args: "RUN --journal DIR", summary: "continue a journaled run after a crash, or answer its questions"}},
			help: flagHelp, run: ignoreStdin(cmdResume)},
		{name: "runs", lines: []helpLine{{args: "[show RUN|prune] --journal DIR", summary: "list, show or prune journaled runs (--temporal: runs on Temporal)"}},
			help: flagHelp, run: ignoreStdin(cmdRuns)},
		{name: "test", lines: []helpLine{{args: "[PATH...]", summary: "run golden-file tests (*_test.star, .star with .golden)"}},
			help: flagHelp, run: ignoreStdin(cmdTest)},
		{name: "doc", lines: []helpLine{{args: "[NAME]", summary: "show the reference of every builtin, or of one"}},
			help: flagHelp, run: ignoreStdin(cmdDoc)},
		{name: "check", lines: []helpLine{{args: "PATH...", summary: "check workflow files without running them"}},
			help: flagHelp, run: ignoreStdin(cmdCheck)},
		{name: "graph", lines: []helpLine{{args: "FILE [-o OUT]", summary: "draw the tree a workflow builds (.mmd, .dot, .svg, .png, .html)"}},
			help: flagHelp, run: ignoreStdin(cmdGraph)},
		{name: "report", lines: []helpLine{{args: "TRACE.jsonl [-o run.html]", summary: "the HTML run report of a trace file (aml run --report writes one too)"}},
			help: flagHelp, run: ignoreStdin(cmdReport)},
		{name: "fmt", lines: []helpLine{{args: "[-w|-d|-l] PATH...", summary: "format workflow files"}},
			help: flagHelp, run: ignoreStdin(cmdFmt)},
		{name: "lsp", lines: []helpLine{{summary: "the language server for editors (stdio)"}},
			help: flagHelp, run: cmdLSP},
		{name: "workspace", lines: []helpLine{
			{sub: "prune", summary: "remove what killed aml processes left behind"},
			{sub: "check", args: "STORE [ID...]", summary: "verify a workspace store: indexes, revisions, their digests"},
			{sub: "recover", args: "STORE ID", summary: "rebuild a lost or damaged workspace index from its revisions"},
			{sub: "unlock", args: "STORE ID", summary: "remove a writer lock whose holder is gone or stale"},
			{sub: "verify", args: "s3://BUCKET[/PREFIX]", summary: "check that an S3 service honours the S3 workspace's protocol"},
		}, help: flagHelp, run: cmdWorkspace},
		{name: "sandbox", lines: []helpLine{{sub: "prune", summary: "remove the Docker sandbox containers killed aml processes left"}},
			help: flagHelp, run: ignoreStdin(cmdSandbox)},
		{name: "mcp-relay", lines: []helpLine{{summary: "the stdio relay to an ACP agent's tool bridge (started by aml itself)"}},
			help: textHelp("usage: aml mcp-relay\n\nServes the tool bridge of an ACP agent session over stdio; aml starts it itself (the bridge URL and secret come from the environment), never by hand."),
			run: func(_ []string, stdin io.Reader, stdout, stderr io.Writer) int {
				return cmdMCPRelay(stdin, stdout, stderr)
			}},
		{name: "version", aliases: []string{"--version", "-v"}, lines: []helpLine{{summary: "print version information"}},
			help: textHelp("usage: aml version\n\nPrints the version of aml, the platform and the Go version it was built with."),
			run:  func(_ []string, _ io.Reader, stdout, _ io.Writer) int { return cmdVersion(stdout) }},
		{name: "help", help: func(_ *command, w io.Writer) int {
			fmt.Fprint(w, usageSummary)
			return exitOK
		}, run: cmdHelp},
		// aml -h and aml --help print the list of commands whatever
		// follows, unlike aml help COMMAND.
		{name: "--help", aliases: []string{"-h"}, hidden: true, run: func(_ []string, _ io.Reader, stdout, _ io.Writer) int {
			fmt.Fprint(stdout, usageSummary)
			return exitOK
		}},
		{name: "sandbox-tunnel", hidden: true, help: textHelp(sandboxTunnelUsage), run: cmdSandboxTunnel},
		{name: "model-relay", hidden: true, run: func(args []string, _ io.Reader, _, stderr io.Writer) int { return cmdModelRelay(args, stderr) }},
	}
	usageSummary = usageText()
}

// usageText writes the list of commands from the table.
func usageText() string {
	var b strings.Builder
	b.WriteString("usage: aml <command> [arguments]\n\nCommands:\n")
	for _, c := range commands {
		for _, l := range c.lines {
			if s := l.synopsis(c.name); len(s) < 18 {
				fmt.Fprintf(&b, "  %-19s%s\n", s, l.summary)
			} else {
				fmt.Fprintf(&b, "  %s\n%21s%s\n", s, "", l.summary)
			}
		}
	}
	b.WriteString("\nRun 'aml help COMMAND' (or 'aml COMMAND -h') for the help of one command.\n")
	return b.String()
}

// lookupCommand is the command Main runs for word, or nil.
func lookupCommand(word string) *command {
	for _, c := range commands {
		if c.name == word || slices.Contains(c.aliases, word) {
			return c
		}
	}
	return nil
}

// commandNames are the commands "did you mean" offers.
func commandNames() []string {
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return names
}

// ignoreStdin adapts the entry function of a command that reads no input.
func ignoreStdin(run func(args []string, stdout, stderr io.Writer) int) func([]string, io.Reader, io.Writer, io.Writer) int {
	return func(args []string, _ io.Reader, stdout, stderr io.Writer) int { return run(args, stdout, stderr) }
}

// flagHelp is the help of a command that prints its own for -h.
func flagHelp(c *command, w io.Writer) int {
	return c.run([]string{"-h"}, nil, w, w)
}

// textHelp is a help of fixed text.
func textHelp(text string) func(*command, io.Writer) int {
	return func(_ *command, w io.Writer) int {
		fmt.Fprintln(w, text)
		return exitOK
	}
}

// cmdHelp prints the list of commands, or the help of one on stdout:
// "aml help run" is "aml run -h".
func cmdHelp(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usageSummary)
		return exitOK
	}
	if len(args) != 1 {
		fmt.Fprintf(stderr, "usage: aml help [COMMAND]\n\n%s", usageSummary)
		return exitUsage
	}
	for _, c := range commands {
		if c.name == args[0] && c.help != nil {
			return c.help(c, stdout)
		}
	}
	fmt.Fprintf(stderr, "aml help: unknown command %q\n\n%s", args[0], usageSummary)
	return exitUsage
}
