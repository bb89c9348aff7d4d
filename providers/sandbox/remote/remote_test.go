package remote_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// newProvider returns a provider over container sandboxes whose home is
// /home/user and guest root the relative "workspace", as Daytona's.
func newProvider(t *testing.T, opts remote.Options) (*remote.Provider, *remotetest.Docker) {
	t.Helper()
	d := remotetest.New(t, "/home/user")
	opts.Service = d
	if opts.GuestRoot == "" {
		opts.GuestRoot = "workspace"
	}
	p, err := remote.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := d.Left(t); len(left) > 0 {
			t.Errorf("sandboxes left behind: %v", left)
		}
	})
	return p, d
}

func request(dir string, access eval.Access) *eval.SandboxAcquireRequest {
	return &eval.SandboxAcquireRequest{Access: access, Root: ".", Cwd: ".", EvaluationID: "remote-test",
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}}
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree lists dir as "path=content" (files), "path/" (directories) and
// "path->target" (links), sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+"->"+target)
		case d.IsDir():
			out = append(out, rel+"/")
		case d.Type() != 0:
			out = append(out, rel+"|"+d.Type().String())
		default:
			data, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestConformance(t *testing.T) {
	p, _ := newProvider(t, remote.Options{})
	providertest.RunSandbox(t, p, providertest.SandboxOptions{Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}, Exercise: true})
}

// TestMirror: a read-write lease is hydrated with the root subtree, a
// script adds, changes and deletes files, directories and links, and the
// release mirrors exactly that into the source; what the transfer never
// carries (a FIFO, also one in a deleted directory) stays. A link the
// sandbox replaced with a directory holding copies of what the link led
// to gets those copies.
func TestMirror(t *testing.T) {
	p, _ := newProvider(t, remote.Options{})
	dir := t.TempDir()
	write(t, dir, map[string]string{"keep.txt": "same", "change.txt": "old", "gone/inner.txt": "x", "gone2/inner.txt": "y", "sub/deep/file.txt": "deep"})
	if err := os.Symlink("keep.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "ldir")); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(dir, "fifo")); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := mkfifo(filepath.Join(dir, "gone2", "fifo")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", `set -e
test "$(cat sub/deep/file.txt)" = deep
test -L link
printf new > change.txt
rm -r gone
mkdir -p added/dir && printf a > added/dir/a.txt
ln -s added/dir/a.txt newlink
rm link && ln -s change.txt link
rm ldir && mkdir -p ldir/deep && cp sub/deep/file.txt ldir/deep/file.txt
rm -r gone2
chmod +x keep.txt
pwd`}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("script: %v %+v %s", err, res, res.Stderr)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "/home/user/workspace" {
		t.Errorf("the script ran in %s, want the guest root below the home", got)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"added/", "added/dir/", "added/dir/a.txt=a", "change.txt=new", "gone2/", "keep.txt=same", "ldir/", "ldir/deep/", "ldir/deep/file.txt=deep", "link->change.txt", "newlink->added/dir/a.txt", "sub/", "sub/deep/", "sub/deep/file.txt=deep"}
	got := tree(t, dir)
	var gotNoFifo []string
	fifo := false
	for _, e := range got {
		if strings.HasPrefix(e, "fifo|") || strings.HasPrefix(e, "gone2/fifo|") {
			fifo = fifo || strings.HasPrefix(e, "fifo|")
			continue
		}
		gotNoFifo = append(gotNoFifo, e)
	}
	if strings.Join(gotNoFifo, "\n") != strings.Join(want, "\n") {
		t.Errorf("mirrored tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, f := range []string{"fifo", "gone2/fifo"} {
		if info, err := os.Lstat(filepath.Join(dir, f)); err != nil || info.Mode()&os.ModeNamedPipe == 0 || !fifo {
			t.Errorf("the FIFO %s, which no transfer carries, was not left alone: %v", f, err)
		}
	}
	if info, _ := os.Stat(filepath.Join(dir, "keep.txt")); info.Mode().Perm()&0o100 == 0 {
		t.Errorf("the mode change was not mirrored: %v", info.Mode())
	}
}

// TestRootSubtree: root= transfers only that subtree, cwd= is below it,
// and the mirror touches nothing outside it.
func TestRootSubtree(t *testing.T) {
	p, _ := newProvider(t, remote.Options{})
	dir := t.TempDir()
	write(t, dir, map[string]string{"outside.txt": "o", "pkg/a.txt": "a", "pkg/cmd/main.txt": "m"})
	ctx := context.Background()
	req := request(dir, eval.ReadWrite)
	req.Root, req.Cwd = "pkg", "cmd"
	lease, err := p.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", `pwd; ls ..; cat main.txt; printf b > ../b.txt`}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if got := string(res.Stdout); got != "/home/user/workspace/cmd\na.txt\ncmd\nm" {
		t.Errorf("in the sandbox: %q", got)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tree(t, dir), " "); got != "outside.txt=o pkg/ pkg/a.txt=a pkg/b.txt=b pkg/cmd/ pkg/cmd/main.txt=m" {
		t.Errorf("after the release: %s", got)
	}
}

// TestReadOnly: commands are refused, reads work, and the release
// changes nothing in the source.
func TestReadOnly(t *testing.T) {
	p, _ := newProvider(t, remote.Options{})
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "a"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, request(dir, eval.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	rt := lease.Runtime()
	if _, err := rt.Exec(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, eval.ErrReadOnly) || !strings.Contains(err.Error(), "cannot execute under read-only access") {
		t.Errorf("Exec under read-only: %v", err)
	}
	if _, err := rt.Spawn(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, eval.ErrReadOnly) {
		t.Errorf("Spawn under read-only: %v", err)
	}
	if data, err := rt.ReadFile(ctx, "a.txt"); err != nil || string(data) != "a" {
		t.Errorf("ReadFile: %q %v", data, err)
	}
	if info, err := rt.Stat(ctx, "a.txt"); err != nil || info.Kind != "file" || info.Size != 1 {
		t.Errorf("Stat: %+v %v", info, err)
	}
	if _, err := rt.Stat(ctx, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat of a missing file: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tree(t, dir), " "); got != "a.txt=a" {
		t.Errorf("after a read-only release: %s", got)
	}
}

// TestHydrationClearsTheRoot: a guest root that already holds files,
// hidden ones too, holds exactly the workspace after hydration, and the
// root may be a mount point (it is cleared, not removed): here the
// home's volume itself.
func TestHydrationClearsTheRoot(t *testing.T) {
	stale := filepath.Join(t.TempDir(), "stale")
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"workspace", "/home/user"} {
		t.Run(strings.Trim(root, "/"), func(t *testing.T) {
			d := remotetest.New(t, "/home/user")
			d.Files = map[string]string{}
			guest := root
			if !path.IsAbs(guest) {
				guest = path.Join("/home/user", root)
			}
			for _, name := range []string{"stale", ".stale", "..stale", "sub/stale"} {
				d.Files[path.Join(guest, name)] = stale
			}
			p, err := remote.New(remote.Options{Service: d, GuestRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			write(t, dir, map[string]string{"a.txt": "a", ".hidden": "h"})
			ctx := context.Background()
			lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
			if err != nil {
				t.Fatal(err)
			}
			res, err := lease.Runtime().Exec(ctx, "ls", []string{"-A"}, eval.ExecOptions{})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("ls: %v %+v", err, res)
			}
			if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != ".hidden a.txt" {
				t.Errorf("the guest root after hydration holds %q, want the workspace alone", got)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(tree(t, dir), " "); got != ".hidden=h a.txt=a" {
				t.Errorf("after release: %s", got)
			}
		})
	}
}

// TestCommands: output bounds, timeouts, cancellation and a spawned
// process with stdin.
func TestCommands(t *testing.T) {
	p, _ := newProvider(t, remote.Options{MaxOutputBytes: 1000})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, request(t.TempDir(), eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	rt := lease.Runtime()
	res, err := rt.Exec(ctx, "sh", []string{"-c", `echo "$1" >&2; echo "$A"; exit 4`, "sh", "it's $(x)"}, eval.ExecOptions{Env: map[string]string{"A": "b c"}})
	if err != nil || res.ExitCode != 4 || string(res.Stdout) != "b c\n" || string(res.Stderr) != "it's $(x)\n" {
		t.Errorf("literal argv, env, streams, exit code: %+v %v", res, err)
	}
	if _, err := rt.Exec(ctx, "sh", []string{"-c", "head -c 5000 /dev/zero"}, eval.ExecOptions{}); err == nil || !strings.Contains(err.Error(), "output exceeded 1000 bytes") {
		t.Errorf("output bound: %v", err)
	}
	start := time.Now()
	if _, err := rt.Exec(ctx, "sleep", []string{"60"}, eval.ExecOptions{Timeout: time.Second}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(fmt.Sprint(err), "timed out after 1s") || time.Since(start) > 30*time.Second {
		t.Errorf("timeout: %v after %v", err, time.Since(start))
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(500*time.Millisecond, cancel)
	if _, err := rt.Exec(cctx, "sleep", []string{"60"}, eval.ExecOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancellation: %v", err)
	}
	proc, err := rt.Spawn(ctx, "sh", []string{"-c", "read x; echo got $x"}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); buf := make([]byte, 64); n, _ := proc.Stdout().Read(buf); out.Write(buf[:n]) }()
	go func() { buf := make([]byte, 64); _, _ = proc.Stderr().Read(buf) }()
	if _, err := proc.Stdin().Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if code, err := proc.Wait(); err != nil || code != 0 || out.String() != "got hi\n" {
		t.Errorf("spawn: %q %d %v", out.String(), code, err)
	}
}

// TestSetup: setup runs after hydration in the cwd; a failing one fails
// the acquisition and leaves no sandbox.
func TestSetup(t *testing.T) {
	p, _ := newProvider(t, remote.Options{Setup: "test -f a.txt && printf ready > setup.txt"})
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "a"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "setup.txt")); string(data) != "ready" {
		t.Errorf("setup.txt = %q", data)
	}
	bad, _ := newProvider(t, remote.Options{Setup: "echo broken >&2; exit 3"})
	if _, err := bad.Acquire(ctx, request(dir, eval.ReadWrite)); err == nil || !strings.Contains(err.Error(), "setup failed with exit code 3: broken") {
		t.Errorf("failing setup: %v", err)
	}
}

// TestCancelledAcquisition: cancelling at any moment of an acquisition
// (creation, hydration, setup) leaves no sandbox and no host staging, and
// changes nothing in the source.
func TestCancelledAcquisition(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p, d := newProvider(t, remote.Options{Setup: "sleep 2"})
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "a"})
	for _, after := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
		if err == nil {
			_ = lease.Release(context.Background())
			cancel()
			continue
		}
		cancel()
		if left := d.Left(t); len(left) > 0 {
			t.Errorf("cancelled after %v: sandboxes left: %v (%v)", after, left, err)
		}
	}
	if got := strings.Join(tree(t, dir), " "); got != "a.txt=a" {
		t.Errorf("the source after cancelled acquisitions: %s", got)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("host stagings left: %v", left)
	}
}

// TestPrune: a sandbox whose aml process is gone is destroyed, one of a
// live process is busy, one of another machine is left alone, and one
// without the provider's labels is not touched.
func TestPrune(t *testing.T) {
	d := remotetest.New(t, "/home/user")
	ctx := context.Background()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id: owners cannot be judged")
	}
	dead := fmt.Sprintf("aml-%d-%s-x", cmd.Process.Pid, procscope.MachineTag())
	create := func(owner string) string {
		labels := map[string]string{remote.LabelLease: "l", remote.LabelRun: "r"}
		if owner != "" {
			labels[remote.LabelOwner] = owner
		}
		m, err := d.Create(ctx, remote.CreateRequest{Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID()
	}
	gone, busy, foreign, unlabelled := create(dead), create(procscope.Marker()), create("aml-1-ffffffff-x"), create("")
	res, err := remote.Prune(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(l []remote.Leftover) string {
		var s []string
		for _, x := range l {
			s = append(s, x.ID)
		}
		return strings.Join(s, ",")
	}
	if ids(res.Removed) != gone || ids(res.Busy) != busy || ids(res.Foreign) != foreign {
		t.Errorf("removed %s busy %s foreign %s; want %s, %s, %s", ids(res.Removed), ids(res.Busy), ids(res.Foreign), gone, busy, foreign)
	}
	left := map[string]bool{}
	for _, id := range d.Left(t) {
		left[id] = true
	}
	if left[gone] || !left[busy] || !left[foreign] || !left[unlabelled] {
		t.Errorf("after prune: %v", left)
	}
	for id := range left {
		_ = d.Destroy(ctx, id)
	}
}

// TestSandboxDiesMidRun: a sandbox destroyed from outside fails the
// command that ran in it, and the release says that its changes are lost,
// leaving the source as it was.
func TestSandboxDiesMidRun(t *testing.T) {
	p, d := newProvider(t, remote.Options{})
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "a"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", "printf changed > a.txt"}, eval.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// It fails, or ends with a signal's status.
		res, err := lease.Runtime().Exec(ctx, "sleep", []string{"60"}, eval.ExecOptions{})
		if err == nil && res.ExitCode == 0 {
			err = fmt.Errorf("the command succeeded: %+v", res)
		}
		done <- err
	}()
	// Destroy the sandbox once the command runs in it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", "ps -o args | grep -cx 'sleep 60' || true"}, eval.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start within 30 s: %q", res.Stdout)
		}
	}
	for _, id := range d.Left(t) {
		if err := d.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil && strings.Contains(err.Error(), "the command succeeded") {
			t.Errorf("the command in a destroyed sandbox did not fail: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the command in a destroyed sandbox never ended")
	}
	err = lease.Release(ctx)
	if err == nil || !strings.Contains(err.Error(), "its changes since it was hydrated are not in the workspace") {
		t.Errorf("release of a dead sandbox: %v", err)
	}
	if got := strings.Join(tree(t, dir), " "); got != "a.txt=a" {
		t.Errorf("the source after a dead sandbox: %s", got)
	}
}
