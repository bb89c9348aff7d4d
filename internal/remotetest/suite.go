package remotetest

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
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// Harness is one remote sandbox service under the core's cases (Run):
// the Docker containers of this package, or a real service.
type Harness struct {
	// Service is the service the providers use.
	Service remote.Service
	// GuestRoot is the providers' guest root ("workspace", "/workspace").
	GuestRoot string
	// Home is the directory a relative guest root is below.
	Home string
	// Left returns the ids of the sandboxes the cases made that still
	// exist.
	Left func(t testing.TB) []string
	// Timeout bounds one case's wait for a sandbox's command or end
	// (default one minute).
	Timeout time.Duration
}

// Run runs the cases every remote.Service must pass under the core: the
// conformance suite, the mirror, the root subtree, read-only refusal,
// commands (literal argv with hostile strings, bounds, timeouts,
// cancellation, stdin), setup, cancelled acquisitions, prune and a
// sandbox that dies mid-run. Each case checks that it left no sandbox.
func Run(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = time.Minute
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"Conformance", conformance}, {"Mirror", mirrorCase}, {"RootSubtree", rootSubtree}, {"ReadOnly", readOnly},
		{"Commands", commands}, {"Setup", setup}, {"CancelledAcquisition", cancelledAcquisition}, {"Prune", prune},
		{"SandboxDiesMidRun", sandboxDiesMidRun},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f(t, h)
			if left := h.Left(t); len(left) > 0 {
				t.Errorf("sandboxes left behind: %v", left)
			}
		})
	}
}

// guest is the absolute guest path of rel below the guest root.
func (h Harness) guest(rel string) string {
	root := h.GuestRoot
	if !path.IsAbs(root) {
		root = path.Join(h.Home, root)
	}
	return path.Join(root, rel)
}

// provider is a provider over the harness's service.
func (h Harness) provider(t *testing.T, opts remote.Options) *remote.Provider {
	t.Helper()
	opts.Service = h.Service
	if opts.GuestRoot == "" {
		opts.GuestRoot = h.GuestRoot
	}
	p, err := remote.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Request is a request for the whole of dir.
func Request(dir string, access eval.Access) *eval.SandboxAcquireRequest {
	return &eval.SandboxAcquireRequest{Access: access, Root: ".", Cwd: ".", EvaluationID: "remote-test",
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}}
}

// Write writes files below dir ("a/b.txt": content).
func Write(t testing.TB, dir string, files map[string]string) {
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

// Listing lists dir as "path=content" (files), "path/" (directories) and
// "path->target" (links), sorted.
func Listing(t testing.TB, dir string) []string {
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

func conformance(t *testing.T, h Harness) {
	providertest.RunSandbox(t, h.provider(t, remote.Options{}), providertest.SandboxOptions{Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}, Exercise: true})
}

// mirrorCase: a read-write lease is hydrated with the root subtree, a
// script adds, changes and deletes files, directories and links, and the
// release mirrors exactly that into the source; what the transfer never
// carries (a FIFO, also one in a deleted directory) stays. A link the
// sandbox replaced with a directory holding copies of what the link led
// to gets those copies.
func mirrorCase(t *testing.T, h Harness) {
	p := h.provider(t, remote.Options{})
	dir := t.TempDir()
	Write(t, dir, map[string]string{"keep.txt": "same", "change.txt": "old", "gone/inner.txt": "x", "gone2/inner.txt": "y", "sub/deep/file.txt": "deep"})
	if err := os.Symlink("keep.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "ldir")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "gone2", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := p.Acquire(ctx, Request(dir, eval.ReadWrite))
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
	if got := strings.TrimSpace(string(res.Stdout)); got != h.guest("") {
		t.Errorf("the script ran in %s, want the guest root %s", got, h.guest(""))
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"added/", "added/dir/", "added/dir/a.txt=a", "change.txt=new", "gone2/", "keep.txt=same", "ldir/", "ldir/deep/", "ldir/deep/file.txt=deep", "link->change.txt", "newlink->added/dir/a.txt", "sub/", "sub/deep/", "sub/deep/file.txt=deep"}
	got := Listing(t, dir)
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

// rootSubtree: root= transfers only that subtree, cwd= is below it, and
// the mirror touches nothing outside it.
func rootSubtree(t *testing.T, h Harness) {
	p := h.provider(t, remote.Options{})
	dir := t.TempDir()
	Write(t, dir, map[string]string{"outside.txt": "o", "pkg/a.txt": "a", "pkg/cmd/main.txt": "m"})
	ctx := context.Background()
	req := Request(dir, eval.ReadWrite)
	req.Root, req.Cwd = "pkg", "cmd"
	lease, err := p.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", `pwd; ls ..; cat main.txt; printf b > ../b.txt`}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if got, want := string(res.Stdout), h.guest("cmd")+"\na.txt\ncmd\nm"; got != want {
		t.Errorf("in the sandbox: %q, want %q", got, want)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Listing(t, dir), " "); got != "outside.txt=o pkg/ pkg/a.txt=a pkg/b.txt=b pkg/cmd/ pkg/cmd/main.txt=m" {
		t.Errorf("after the release: %s", got)
	}
}

// readOnly: commands are refused, reads work, and the release changes
// nothing in the source.
func readOnly(t *testing.T, h Harness) {
	p := h.provider(t, remote.Options{})
	dir := t.TempDir()
	Write(t, dir, map[string]string{"a.txt": "a"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, Request(dir, eval.ReadOnly))
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
	if got := strings.Join(Listing(t, dir), " "); got != "a.txt=a" {
		t.Errorf("after a read-only release: %s", got)
	}
}

// hostile are arguments a shell would take apart, each of which must
// reach the process as it is.
var hostile = []string{"it's $(x)", "`id`", "a b\tc", "line\nbreak", `back\slash "quoted"`, "$HOME", "*", "-n", "--", ";", "|&", "'", "", "é ünïcode ✓", "trailing\n\n"}

// commands: literal argv (hostile strings), environment, output bounds,
// timeouts, cancellation and a spawned process with stdin.
func commands(t *testing.T, h Harness) {
	p := h.provider(t, remote.Options{MaxOutputBytes: 1000})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, Request(t.TempDir(), eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	rt := lease.Runtime()
	res, err := rt.Exec(ctx, "sh", []string{"-c", `echo "$1" >&2; echo "$A"; exit 4`, "sh", "it's $(x)"}, eval.ExecOptions{Env: map[string]string{"A": "b c"}})
	if err != nil || res.ExitCode != 4 || string(res.Stdout) != "b c\n" || string(res.Stderr) != "it's $(x)\n" {
		t.Errorf("literal argv, env, streams, exit code: %+v %v", res, err)
	}
	// Each argument comes back NUL-terminated, byte for byte.
	res, err = rt.Exec(ctx, "sh", append([]string{"-c", `for a; do printf '%s\0' "$a"; done`, "sh"}, hostile...), eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("hostile argv: %v %+v", err, res)
	}
	if got, want := string(res.Stdout), strings.Join(hostile, "\x00")+"\x00"; got != want {
		t.Errorf("hostile argv came back as %q, want %q", got, want)
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
	// The killed commands are gone from the sandbox.
	res, err = rt.Exec(ctx, "sh", []string{"-c", "ps -o args | grep -c '^sleep 60' || true"}, eval.ExecOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("sleeps left running after the timeout and the cancellation: %q %v", res.Stdout, err)
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

// setup: setup runs after hydration in the cwd; a failing one fails the
// acquisition and leaves no sandbox.
func setup(t *testing.T, h Harness) {
	p := h.provider(t, remote.Options{Setup: "test -f a.txt && printf ready > setup.txt"})
	dir := t.TempDir()
	Write(t, dir, map[string]string{"a.txt": "a"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, Request(dir, eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "setup.txt")); string(data) != "ready" {
		t.Errorf("setup.txt = %q", data)
	}
	bad := h.provider(t, remote.Options{Setup: "echo broken >&2; exit 3"})
	if _, err := bad.Acquire(ctx, Request(dir, eval.ReadWrite)); err == nil || !strings.Contains(err.Error(), "setup failed with exit code 3: broken") {
		t.Errorf("failing setup: %v", err)
	}
}

// cancelledAcquisition: cancelling at any moment of an acquisition
// (creation, readiness, hydration, setup) leaves no sandbox and no host
// staging, and changes nothing in the source.
func cancelledAcquisition(t *testing.T, h Harness) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p := h.provider(t, remote.Options{Setup: "sleep 2"})
	dir := t.TempDir()
	Write(t, dir, map[string]string{"a.txt": "a"})
	for _, after := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		lease, err := p.Acquire(ctx, Request(dir, eval.ReadWrite))
		if err == nil {
			_ = lease.Release(context.Background())
			cancel()
			continue
		}
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %v: %v, want context.Canceled", after, err)
		}
		if left := h.Left(t); len(left) > 0 {
			t.Errorf("cancelled after %v: sandboxes left: %v (%v)", after, left, err)
		}
	}
	if got := strings.Join(Listing(t, dir), " "); got != "a.txt=a" {
		t.Errorf("the source after cancelled acquisitions: %s", got)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("host stagings left: %v", left)
	}
}

// prune: a sandbox whose aml process is gone is destroyed, one of a live
// process is busy, one of another machine is left alone, and one without
// the provider's labels is not touched.
func prune(t *testing.T, h Harness) {
	ctx := context.Background()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id: owners cannot be judged")
	}
	dead := fmt.Sprintf("aml-%d-%s-x", cmd.Process.Pid, procscope.MachineTag())
	var made []string
	create := func(owner string) string {
		labels := map[string]string{remote.LabelLease: "l", remote.LabelRun: "r"}
		if owner != "" {
			labels[remote.LabelOwner] = owner
		}
		m, err := h.Service.Create(ctx, remote.CreateRequest{Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, m.ID())
		return m.ID()
	}
	defer func() {
		for _, id := range made {
			_ = h.Service.Destroy(ctx, id)
		}
	}()
	gone, busy, foreign, unlabelled := create(dead), create(procscope.Marker()), create("aml-1-ffffffff-x"), create("")
	res, err := remote.Prune(ctx, h.Service)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(l []remote.Leftover) map[string]bool {
		s := map[string]bool{}
		for _, x := range l {
			s[x.ID] = true
		}
		return s
	}
	// Sandboxes of other tests may be there too: only these four are
	// judged.
	removed, busyIDs, foreignIDs := ids(res.Removed), ids(res.Busy), ids(res.Foreign)
	if !removed[gone] || removed[busy] || removed[foreign] || removed[unlabelled] || !busyIDs[busy] || !foreignIDs[foreign] {
		t.Errorf("removed %v busy %v foreign %v; want %s, %s, %s", res.Removed, res.Busy, res.Foreign, gone, busy, foreign)
	}
	left := map[string]bool{}
	for _, id := range h.Left(t) {
		left[id] = true
	}
	if left[gone] || !left[busy] || !left[foreign] || !left[unlabelled] {
		t.Errorf("after prune: %v", left)
	}
}

// sandboxDiesMidRun: a sandbox destroyed from outside fails the command
// that ran in it, and the release says that its changes are lost, leaving
// the source as it was.
func sandboxDiesMidRun(t *testing.T, h Harness) {
	p := h.provider(t, remote.Options{})
	dir := t.TempDir()
	Write(t, dir, map[string]string{"a.txt": "a"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, Request(dir, eval.ReadWrite))
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
	for deadline := time.Now().Add(h.Timeout); ; time.Sleep(50 * time.Millisecond) {
		res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", "ps -o args | grep -cx 'sleep 60' || true"}, eval.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start within %v: %q", h.Timeout, res.Stdout)
		}
	}
	for _, id := range h.Left(t) {
		if err := h.Service.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil && strings.Contains(err.Error(), "the command succeeded") {
			t.Errorf("the command in a destroyed sandbox did not fail: %v", err)
		}
	case <-time.After(h.Timeout):
		t.Fatal("the command in a destroyed sandbox never ended")
	}
	err = lease.Release(ctx)
	if err == nil || !strings.Contains(err.Error(), "its changes since it was hydrated are not in the workspace") {
		t.Errorf("release of a dead sandbox: %v", err)
	}
	if got := strings.Join(Listing(t, dir), " "); got != "a.txt=a" {
		t.Errorf("the source after a dead sandbox: %s", got)
	}
}
