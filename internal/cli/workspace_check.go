package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/aml-go/aml/internal/services"
	wsfs "github.com/aml-go/aml/providers/workspace/filesystem"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// storeFlags are the flags that name how to reach an S3 store; every
// workspace command that takes a STORE has them.
type storeFlags struct {
	endpoint, region, profile string
	pathStyle                 bool
}

// register adds the S3 flags to fs.
func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoint, "endpoint", "", "URL of an S3-compatible service (for s3:// stores)")
	fs.StringVar(&f.region, "region", "", "AWS region (default the configuration's, else us-east-1)")
	fs.StringVar(&f.profile, "profile", "", "shared-configuration profile of the credentials")
	fs.BoolVar(&f.pathStyle, "force-path-style", false, "path-style addressing (most S3-compatible services need it; implied by --endpoint)")
}

// s3Options are the S3 options of bucket and prefix with these flags.
func (f *storeFlags) s3Options(bucket, prefix string) services.S3 {
	return services.S3{Bucket: bucket, Prefix: prefix, Endpoint: f.endpoint, Region: f.region, Profile: f.profile, ForcePathStyle: f.pathStyle || f.endpoint != ""}
}

// openStore opens STORE: s3://BUCKET[/PREFIX] (the prefix of
// s3_workspace(), aml/workspaces by default) or the directory of a
// filesystem_workspace(), which must exist.
func (f *storeFlags) openStore(spec string) (persist.Storage, error) {
	if rest, ok := strings.CutPrefix(spec, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if !linked.Linked() {
			return nil, errNotLinked("an s3:// store")
		}
		return linked.OpenS3(f.s3Options(bucket, strings.Trim(prefix, "/")))
	}
	info, err := os.Stat(spec)
	if err != nil || !info.IsDir() {
		return nil, fmt.Errorf("store %s: not a directory nor s3://BUCKET[/PREFIX] (give the directory= of a filesystem_workspace(), or the bucket and prefix of an s3_workspace())", spec)
	}
	return wsfs.NewStorage(spec)
}

const workspaceCheckUsage = `usage: aml workspace check STORE [ID...] [--read-data] [--json] [flags]

Verifies the workspaces of STORE (the directory of a filesystem_workspace(), or
s3://BUCKET[/PREFIX] of an s3_workspace()), or only the workspaces ID...: every
index parses and validates, every revision it names is stored, every revision's
archive or manifest has the size and digest the index pins, and every file a
folder manifest lists is stored with its size. --read-data reads every object
back and compares its digest too. It writes nothing and takes no lock.

Output: one line per problem ("PROBLEM KIND OBJECT: DETAIL"), notes that are not
damage ("note ..."), then one summary line per workspace. With --json, one
object: {"workspaces": [{"id", "index", "current", "revisions", "objects",
"bytes", "problems": [{"kind", "object", "revision", "detail"}], "notes"}],
"ok": bool}.

Exit status: 0 when every workspace is sound, 1 when a problem was found or
the store could not be read, 2 for usage errors.

Flags:
`

func cmdWorkspaceCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("workspace check", workspaceCheckUsage, stderr)
	var sf storeFlags
	sf.register(fs)
	readData := fs.Bool("read-data", false, "read every object back and compare its digest")
	asJSON := fs.Bool("json", false, "print one JSON object instead of lines")
	rest, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(rest) < 1 {
		fmt.Fprintln(stderr, "aml workspace check: want a STORE (a directory or s3://BUCKET[/PREFIX])")
		fs.Usage()
		return exitUsage
	}
	st, err := sf.openStore(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "aml workspace check: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := persist.Check(ctx, st, rest[1:], persist.CheckOptions{ReadData: *readData})
	sound := err == nil
	for _, c := range res {
		sound = sound && c.OK()
	}
	if *asJSON {
		if res == nil {
			res = []persist.WorkspaceCheck{}
		}
		out := struct {
			Workspaces []persist.WorkspaceCheck `json:"workspaces"`
			OK         bool                     `json:"ok"`
			Error      string                   `json:"error,omitempty"`
		}{Workspaces: res, OK: sound}
		if err != nil {
			out.Error = err.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		for _, c := range res {
			for _, p := range c.Problems {
				fmt.Fprintf(stdout, "PROBLEM %s %s: %s\n", p.Kind, p.Object, p.Detail)
			}
			for _, n := range c.Notes {
				fmt.Fprintf(stdout, "note %s: %s\n", c.ID, n)
			}
			state := "sound"
			if !c.OK() {
				state = fmt.Sprintf("%d problem(s)", len(c.Problems))
			}
			fmt.Fprintf(stdout, "workspace %s: %s (index %s, %d revision(s), %d object(s), %s %s)\n", c.ID, state, c.Index, c.Revisions, c.Objects, formatSize(c.Bytes), map[bool]string{true: "read", false: "listed"}[*readData])
		}
		if len(res) == 0 && err == nil {
			fmt.Fprintln(stdout, "no workspaces in the store")
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "aml workspace check: %v\n", err)
		return exitFailure
	}
	if !sound {
		fmt.Fprintln(stderr, "aml workspace check: the store is damaged: see the problems above (aml workspace recover STORE ID rebuilds a lost index)")
		return exitFailure
	}
	return exitOK
}

const workspaceRecoverUsage = `usage: aml workspace recover STORE ID [--yes] [--json] [flags]

Rebuilds the missing or damaged index of workspace ID in STORE (a directory or
s3://BUCKET[/PREFIX]) from the revisions stored: it takes the workspace's
writer lock, reads every published revision in full (one no save in progress
announces), keeps the sound ones (an archive that extracts, a folder revision
whose manifest parses and whose files are all stored), pins them by digest and
size, and orders them by the store's modification times: the newest is
current. It prints the plan and asks before it writes the index; --yes writes
without asking (needed when stdin is not a terminal). A workspace whose index
is sound is refused.

Exit status: 0 when the index was written, 1 when nothing was written (declined,
nothing to rebuild from, a live writer holds the workspace), 2 for usage
errors.

Flags:
`

func cmdWorkspaceRecover(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("workspace recover", workspaceRecoverUsage, stderr)
	var sf storeFlags
	sf.register(fs)
	yes := fs.Bool("yes", false, "write the rebuilt index without asking")
	asJSON := fs.Bool("json", false, "print the recovery as one JSON object")
	temp := fs.String("temporary-directory", "", "where archives are extracted to be checked (default the temporary directory)")
	rest, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 2 {
		fmt.Fprintln(stderr, "aml workspace recover: want a STORE and one workspace ID")
		fs.Usage()
		return exitUsage
	}
	interactive := false
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		interactive = true
	}
	if !*yes && !interactive {
		fmt.Fprintln(stderr, "aml workspace recover: stdin is not a terminal to confirm on: pass --yes to write the rebuilt index")
		return exitUsage
	}
	st, err := sf.openStore(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "aml workspace recover: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id := rest[1]
	confirm := func(rec *persist.Recovery) bool {
		if !*asJSON || !*yes {
			printRecovery(stderr, id, rec)
		}
		if *yes {
			return true
		}
		fmt.Fprint(stderr, "write this index? [y/N] ")
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		answer := strings.ToLower(strings.TrimSpace(line))
		return answer == "y" || answer == "yes"
	}
	rec, err := persist.Recover(ctx, st, id, *temp, confirm)
	if *asJSON && rec != nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rec)
	}
	if err != nil {
		if rec != nil && rec.Index == nil && len(rec.Skipped) > 0 && !*asJSON {
			printRecovery(stderr, id, rec)
		}
		fmt.Fprintf(stderr, "aml workspace recover: %v\n", err)
		return exitFailure
	}
	if !rec.Written {
		fmt.Fprintln(stderr, "aml workspace recover: declined: nothing was written")
		return exitFailure
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "workspace %s: index rebuilt with %d revision(s), current %s\n", id, len(rec.Index.Revisions), rec.Index.Current)
	}
	return exitOK
}

// printRecovery prints a recovery plan.
func printRecovery(w io.Writer, id string, rec *persist.Recovery) {
	if rec.Index != nil {
		fmt.Fprintf(w, "workspace %s: the rebuilt index lists %d revision(s), newest first:\n", id, len(rec.Index.Revisions))
		for _, r := range rec.Index.Revisions {
			mark := ""
			if r.ID == rec.Index.Current {
				mark = "  (current)"
			}
			fmt.Fprintf(w, "  %s  %s  %s  %s%s\n", r.ID, r.Format, r.CreatedAt, formatSize(r.Size), mark)
		}
	}
	for _, s := range rec.Skipped {
		fmt.Fprintf(w, "  left out %s: %s\n", s.ID, s.Reason)
	}
}

const workspaceUnlockUsage = `usage: aml workspace unlock STORE ID [--force] [flags]

Removes the writer lock of workspace ID in STORE (a directory or
s3://BUCKET[/PREFIX]) when its holder is gone (a run of this machine that was
killed) or stale (not refreshed for 20 minutes); the next run would take such a
lock over anyway, but a run on another machine cannot tell that a holder is
gone. A lock whose holder is alive and refreshes it is refused, naming the
holder, unless --force: then the holder's next save fails (its lock is lost)
rather than publishing.

Exit status: 0 when a lock was removed, 1 when there is none or it was
refused, 2 for usage errors.

Flags:
`

func cmdWorkspaceUnlock(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("workspace unlock", workspaceUnlockUsage, stderr)
	var sf storeFlags
	sf.register(fs)
	force := fs.Bool("force", false, "remove the lock even when its holder is alive")
	rest, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 2 {
		fmt.Fprintln(stderr, "aml workspace unlock: want a STORE and one workspace ID")
		fs.Usage()
		return exitUsage
	}
	st, err := sf.openStore(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "aml workspace unlock: %v\n", err)
		return exitUsage
	}
	u, ok := st.(persist.Unlocker)
	if !ok {
		fmt.Fprintf(stderr, "aml workspace unlock: the %s store cannot remove locks\n", st.Name())
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	holder, err := u.Unlock(ctx, rest[1], *force)
	if err != nil {
		fmt.Fprintf(stderr, "aml workspace unlock: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "removed the writer lock of workspace %s, held by %s\n", rest[1], holder)
	return exitOK
}
