package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/scratch"
	"github.com/aml-go/aml/providers/workspace/persist"
)

const workspaceUsage = `usage: aml workspace prune [flags] [STORE...]
       aml workspace check STORE [ID...] [--read-data]    (see aml workspace check -h)
       aml workspace recover STORE ID [--yes]              (see aml workspace recover -h)
       aml workspace unlock STORE ID [--force]             (see aml workspace unlock -h)
       aml workspace verify s3://BUCKET[/PREFIX] [flags]   (see aml workspace verify -h)

Removes what aml processes that were killed (SIGKILL, a crash, a power
loss) left behind and nothing else:

  - file stagings and agent state directories (aml-agent-*, aml-acp-*) in
    the temporary directory ($TMPDIR, and /tmp);
  - workspace materializations with their snapshots (aml-workspace-*) in
    the temporary directory, or in --temporary-directory;
  - for each STORE, the directory of a filesystem_workspace() or the
    s3://BUCKET[/PREFIX] of an s3_workspace() (with --endpoint, --region,
    --profile and --force-path-style): in every workspace no live run
    holds, the revisions a killed save uploaded but never published, stale
    pending markers, temporary uploads older than --older-than, and the
    incomplete multipart uploads of killed saves. A workspace a live run
    holds is skipped and named. Nothing is deleted from a workspace whose
    index is missing or damaged: that is reported (see aml workspace check).

With --kill-orphans it also ends the processes (scripts, agents and their
descendants) that killed aml processes of this machine started and that
still run; without it, it lists them ("orphan ...").

What a live aml process of this machine uses is never removed, nor what a
process of another machine (a shared directory) made. aml does the same
sweep by itself: a process sweeps the stagings once, and acquiring a
workspace sweeps that workspace. Prune is for directories nothing acquires
again.

Output: one "removed PATH" line per removed directory or store object
("removed STORE: WORKSPACE: OBJECT"), one "busy ..." line per skipped
workspace, one "orphan PID ..." or "killed PID ..." line per leftover
process, then "pruned N items (SIZE)". With --json, one JSON object:
{"removed": [...], "bytes": N, "busy": [...], "orphans": [{"pid", "owner"}],
"killed": [{"pid", "owner"}]}.

Exit status: 0 when the sweep completed (also with busy workspaces), 1
when something could not be removed or a STORE could not be read, 2 for
usage errors.

Flags:
`

// cmdWorkspace runs "aml workspace SUBCOMMAND".
func cmdWorkspace(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, workspaceUsage)
		return exitUsage
	}
	switch args[0] {
	case "prune":
		return cmdWorkspacePrune(args[1:], stdout, stderr)
	case "verify":
		return cmdWorkspaceVerify(args[1:], stdout, stderr)
	case "check":
		return cmdWorkspaceCheck(args[1:], stdout, stderr)
	case "recover":
		return cmdWorkspaceRecover(args[1:], stdin, stdout, stderr)
	case "unlock":
		return cmdWorkspaceUnlock(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		return cmdWorkspacePrune([]string{"-h"}, stdout, stdout)
	}
	fmt.Fprintf(stderr, "aml workspace: unknown subcommand %q (the subcommands are prune, check, recover, unlock and verify)\n\n%s", args[0], workspaceUsage)
	return exitUsage
}

// pruneReport is the --json output of aml workspace prune.
type pruneReport struct {
	Removed []string `json:"removed"`
	Bytes   int64    `json:"bytes"`
	Busy    []string `json:"busy"`
	// Orphans are the leftover processes found (and not killed).
	Orphans []procscope.Orphan `json:"orphans"`
	// Killed are the leftover processes killed (--kill-orphans).
	Killed []procscope.Orphan `json:"killed"`
	Errors []string           `json:"errors,omitempty"`
}

func cmdWorkspacePrune(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("workspace prune", workspaceUsage, stderr)
	temp := fs.String("temporary-directory", "", "where materializations are made: the temporary_directory= of filesystem_workspace() (default the temporary directory)")
	olderThan := fs.Duration("older-than", persist.DefaultTemporaryAge, "remove temporary uploads in a store once they are this old (a temporary upload names no owner; its age tells it from one in progress)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of lines")
	killOrphans := fs.Bool("kill-orphans", false, "also SIGKILL the processes that killed aml processes started and that still run")
	var sf storeFlags
	sf.register(fs)
	stores, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if *olderThan <= 0 {
		fmt.Fprintf(stderr, "aml workspace prune: --older-than must be positive, got %v\n", *olderThan)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := pruneReport{Removed: []string{}, Busy: []string{}, Orphans: []procscope.Orphan{}, Killed: []procscope.Orphan{}}
	// Leftover processes first: they may still hold a workspace.
	if *killOrphans {
		rep.Killed = append(rep.Killed, procscope.KillOrphans()...)
	} else {
		rep.Orphans = append(rep.Orphans, procscope.Orphans()...)
	}
	fail := func(err error) {
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	for _, dir := range scratch.Parents() {
		res, err := scratch.Sweep(dir)
		rep.Removed = append(rep.Removed, res.Removed...)
		rep.Bytes += res.Bytes
		fail(err)
	}
	sw, err := persist.SweepTemporaryDirectory(*temp)
	rep.Removed = append(rep.Removed, sw.Removed...)
	rep.Bytes += sw.Bytes
	fail(err)
	for _, spec := range stores {
		s, err := sf.openStore(spec)
		if err != nil {
			fail(err)
			continue
		}
		p := persist.New(s, persist.Options{StoreOptions: persist.StoreOptions{TemporaryDirectory: *temp}, TemporaryAge: *olderThan})
		sw, err := p.(persist.Sweeper).Sweep(ctx, "")
		for _, r := range sw.Removed {
			rep.Removed = append(rep.Removed, strings.TrimSuffix(spec, "/")+": "+r)
		}
		rep.Bytes += sw.Bytes
		for _, b := range sw.Busy {
			rep.Busy = append(rep.Busy, b.Error())
		}
		fail(err)
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		for _, r := range rep.Removed {
			fmt.Fprintln(stdout, "removed", r)
		}
		for _, b := range rep.Busy {
			fmt.Fprintln(stdout, "busy", b)
		}
		for _, o := range rep.Orphans {
			fmt.Fprintf(stdout, "orphan %d: started by aml pid %d, which is gone; still running (--kill-orphans ends it)\n", o.PID, o.Owner)
		}
		for _, o := range rep.Killed {
			fmt.Fprintf(stdout, "killed %d: started by aml pid %d, which is gone\n", o.PID, o.Owner)
		}
		fmt.Fprintf(stdout, "pruned %d items (%s)\n", len(rep.Removed), formatSize(rep.Bytes))
	}
	for _, e := range rep.Errors {
		fmt.Fprintln(stderr, "aml workspace prune:", e)
	}
	if len(rep.Errors) > 0 {
		return exitFailure
	}
	return exitOK
}

// formatSize renders a byte count for people.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
