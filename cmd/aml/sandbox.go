package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/docker/docker/client"

	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

const sandboxUsage = `usage: aml sandbox prune [--kill-orphans] [--json]

Removes the Docker sandbox containers that aml processes of this machine
left when they were killed outright (SIGKILL, OOM, power loss): the
containers labelled aml.owner and aml.lease whose aml process no longer
exists. Containers of runs still going are listed as busy, and those
another machine's aml made are left alone. The Docker engine is the one
DOCKER_HOST names, else the local socket; when none answers, only the
processes are handled.

It also lists the processes such aml processes started (scripts, agents,
and what they started, setsid descendants included: every process that
carries a dead aml's owner mark, AML_OWNER); --kill-orphans ends them
with SIGKILL. A run that ends, or is interrupted, removes its own
containers and processes, and an ordinary run prints one line when it
finds leftovers; this command is for the ones a killed run could not.

With --json, one JSON object: removed, busy and foreign containers
({id, name, run, owner}), orphans (found, not killed) and killed
processes ({pid, owner}), and error when something failed.

Flags:
`

func cmdSandbox(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, sandboxUsage)
		return exitUsage
	}
	switch args[0] {
	case "prune":
		return cmdSandboxPrune(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		return cmdSandboxPrune([]string{"-h"}, stdout, stdout)
	}
	fmt.Fprintf(stderr, "aml sandbox: unknown subcommand %q (the one subcommand is prune)\n\n%s", args[0], sandboxUsage)
	return exitUsage
}

func cmdSandboxPrune(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox prune", sandboxUsage, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of lines")
	killOrphans := fs.Bool("kill-orphans", false, "also SIGKILL the processes that killed aml processes started and that still run")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "aml sandbox prune: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Processes first: a leftover process may be what holds a container
	// busy.
	orphans, killed := []procscope.Orphan{}, []procscope.Orphan{}
	if *killOrphans {
		killed = append(killed, procscope.KillOrphans()...)
	} else {
		orphans = append(orphans, procscope.Orphans()...)
	}
	res, err := docker.Prune(ctx, nil)
	if *asJSON {
		out := struct {
			docker.PruneResult
			Orphans []procscope.Orphan `json:"orphans"`
			Killed  []procscope.Orphan `json:"killed"`
			Error   string             `json:"error,omitempty"`
		}{PruneResult: res, Orphans: orphans, Killed: killed}
		if err != nil {
			out.Error = err.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		for _, l := range res.Removed {
			fmt.Fprintf(stdout, "removed %s (run %s; its aml process is gone)\n", l.Name, l.Run)
		}
		for _, l := range res.Busy {
			fmt.Fprintf(stdout, "busy %s (run %s; its aml process is running)\n", l.Name, l.Run)
		}
		for _, l := range res.Foreign {
			fmt.Fprintf(stdout, "kept %s (run %s; made by an aml process of another machine)\n", l.Name, l.Run)
		}
		for _, o := range orphans {
			fmt.Fprintf(stdout, "orphan process %d (its aml process %d is gone; --kill-orphans ends it)\n", o.PID, o.Owner)
		}
		for _, o := range killed {
			fmt.Fprintf(stdout, "killed process %d (its aml process %d is gone)\n", o.PID, o.Owner)
		}
	}
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			// Without an engine there are no containers to remove;
			// the processes were handled.
			fmt.Fprintf(stderr, "aml sandbox prune: no containers checked: %v\n", err)
			return exitOK
		}
		fmt.Fprintf(stderr, "aml sandbox prune: %v\n", err)
		return exitFailure
	}
	return exitOK
}
