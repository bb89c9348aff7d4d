package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/aml-go/aml/providers/sandbox/docker"
)

const sandboxUsage = `usage: aml sandbox prune [--json]

Removes the Docker sandbox containers that aml processes of this machine
left when they were killed outright (SIGKILL, OOM, power loss): the
containers labelled aml.owner and aml.lease whose aml process no longer
exists. Containers of runs still going are listed as busy, and those
another machine's aml made are left alone. The Docker engine is the one
DOCKER_HOST names, else the local socket. A run that ends, or is
interrupted, removes its own containers; this is for the ones it could
not.

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
	res, err := docker.Prune(ctx, nil)
	if *asJSON {
		out := struct {
			docker.PruneResult
			Error string `json:"error,omitempty"`
		}{PruneResult: res}
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
	}
	if err != nil {
		fmt.Fprintf(stderr, "aml sandbox prune: %v\n", err)
		return exitFailure
	}
	return exitOK
}
