package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

const sandboxUsage = `usage: aml sandbox prune [--kill-orphans] [--json]

Removes the Docker sandbox containers that aml processes of this machine
left when they were killed outright (SIGKILL, OOM, power loss): the
containers labelled aml.owner and aml.lease whose aml process no longer
exists. Containers of runs still going are listed as busy, and those
another machine's aml made are left alone. The Docker engine is the one
DOCKER_HOST names, else the local socket; when none answers, only the
processes are handled.

With DAYTONA_API_KEY set (and DAYTONA_API_URL and
DAYTONA_ORGANIZATION_ID where needed), the Daytona sandboxes such aml
processes left are destroyed the same way, and so are the Modal ones (of
the app aml) with MODAL_TOKEN_ID and MODAL_TOKEN_SECRET set or a
~/.modal.toml, and so are the Kubernetes Sandboxes and SandboxClaims
(labelled aml.owner, in every namespace the kubeconfig may list, else
in its context's) with KUBECONFIG set, a ~/.kube/config, or aml running
in a pod (a cluster that does not answer is reported, not failed);
sandboxes of live runs are busy, and other machines' are kept.

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
	if !linked.Linked() {
		fmt.Fprintf(stderr, "aml sandbox prune: %v\n", errNotLinked("aml sandbox prune"))
		return exitFailure
	}
	res, err := linked.PruneContainers(ctx)
	if errors.Is(err, services.ErrNoEngine) {
		// Without an engine there are no containers to remove; the
		// processes and remote sandboxes are handled.
		fmt.Fprintf(stderr, "aml sandbox prune: no containers checked: %v\n", err)
		err = nil
	}
	remotes, rerr := linked.PruneRemote(ctx)
	// A service configured but unreachable (a kubeconfig of a cluster
	// that is down) is said, as a missing Docker engine is, not failed.
	var unchecked, failed []error
	if joined, ok := rerr.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if errors.Is(e, services.ErrNotChecked) {
				unchecked = append(unchecked, e)
			} else {
				failed = append(failed, e)
			}
		}
	} else if rerr != nil {
		failed = append(failed, rerr)
	}
	for _, e := range unchecked {
		fmt.Fprintf(stderr, "aml sandbox prune: %v\n", e)
	}
	err = errors.Join(append([]error{err}, failed...)...)
	if *asJSON {
		out := struct {
			services.ContainerPrune
			Remote  map[string]remote.PruneResult `json:"remote"`
			Orphans []procscope.Orphan            `json:"orphans"`
			Killed  []procscope.Orphan            `json:"killed"`
			Error   string                        `json:"error,omitempty"`
		}{ContainerPrune: res, Remote: remotes, Orphans: orphans, Killed: killed}
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
		for _, name := range slices.Sorted(maps.Keys(remotes)) {
			r := remotes[name]
			for _, l := range r.Removed {
				fmt.Fprintf(stdout, "removed %s sandbox %s (run %s; its aml process is gone)\n", name, l.ID, l.Run)
			}
			for _, l := range r.Busy {
				fmt.Fprintf(stdout, "busy %s sandbox %s (run %s; its aml process is running)\n", name, l.ID, l.Run)
			}
			for _, l := range r.Foreign {
				fmt.Fprintf(stdout, "kept %s sandbox %s (run %s; made by an aml process of another machine)\n", name, l.ID, l.Run)
			}
		}
		for _, o := range orphans {
			fmt.Fprintf(stdout, "orphan process %d (its aml process %d is gone; --kill-orphans ends it)\n", o.PID, o.Owner)
		}
		for _, o := range killed {
			fmt.Fprintf(stdout, "killed process %d (its aml process %d is gone)\n", o.PID, o.Owner)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "aml sandbox prune: %v\n", err)
		return exitFailure
	}
	return exitOK
}
