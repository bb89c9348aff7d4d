//go:build unix

package local_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec/hostexectest"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// newProvider returns a provider or fails the test.
func newProvider(t testing.TB, opts local.Options) *local.Provider {
	t.Helper()
	p, err := local.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// request builds an acquire request over the workspace directory ws.
func request(ws string, access eval.Access, root, cwd string) *eval.SandboxAcquireRequest {
	req := &eval.SandboxAcquireRequest{Access: access, Root: root, Cwd: cwd, EvaluationID: "eval-test"}
	if ws != "" {
		req.Workspace = &eval.WorkspaceMaterialization{WorkspaceID: "ws", LeaseID: "ws-lease", Directory: ws, Cwd: ".", Provider: "test"}
	}
	return req
}

// acquire acquires a lease released at the end of the test.
func acquire(t testing.TB, p *local.Provider, req *eval.SandboxAcquireRequest) eval.SandboxLease {
	t.Helper()
	l, err := p.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func TestNewOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts local.Options
		want string
	}{
		{"negative output bound", local.Options{MaxOutputBytes: -1}, "MaxOutputBytes must be positive"},
		{"untrimmed setup", local.Options{Setup: " true"}, "setup must be a non-empty, trimmed string"},
		{"NUL in setup", local.Options{Setup: "true\x00"}, "setup must be a non-empty, trimmed string"},
		{"untrimmed workspace", local.Options{Workspace: "dir\n"}, "workspace must be a non-empty, trimmed string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := local.New(tc.opts)
			hostexectest.WantErr(t, err, tc.want)
		})
	}
	if got := newProvider(t, local.Options{}).Name(); got != "local" {
		t.Fatalf("Name = %q", got)
	}
}

func TestWorkspaceFallbackResolvedAtNew(t *testing.T) {
	base := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(base, "ws"))
	t.Chdir(base)
	p := newProvider(t, local.Options{Workspace: "ws"})
	t.Chdir(t.TempDir()) // the relative fallback must not follow the cwd
	l := acquire(t, p, request("", eval.ReadWrite, ".", "."))
	res := hostexectest.Exec(t, l.Runtime(), eval.ExecOptions{}, "pwd")
	if got, want := strings.TrimSpace(string(res.Stdout)), filepath.Join(base, "ws"); got != want {
		t.Fatalf("pwd = %q, want %q", got, want)
	}
}

func TestActiveWorkspaceWinsOverFallback(t *testing.T) {
	fallback, active := t.TempDir(), t.TempDir()
	p := newProvider(t, local.Options{Workspace: fallback})
	l := acquire(t, p, request(active, eval.ReadWrite, ".", "."))
	res := hostexectest.Exec(t, l.Runtime(), eval.ExecOptions{}, "pwd")
	if got := strings.TrimSpace(string(res.Stdout)); got != active {
		t.Fatalf("pwd = %q, want the active workspace %q", got, active)
	}
}

func TestAcquireErrors(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "a", "b"))
	hostexectest.WriteHost(t, filepath.Join(ws, "file"), "x")
	hostexectest.Symlink(t, outside, filepath.Join(ws, "escape"))
	hostexectest.Symlink(t, "../"+filepath.Base(outside), filepath.Join(ws, "relescape")) // relative, not under ws
	hostexectest.Symlink(t, "..", filepath.Join(ws, "a", "up"))                           // inside ws, outside root "a"
	hostexectest.Symlink(t, filepath.Join(ws, "missing"), filepath.Join(ws, "dangling"))
	hostexectest.Symlink(t, "b", filepath.Join(ws, "a", "inner"))

	p := newProvider(t, local.Options{})
	cancelled, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("caller gave up")
	cancel(cause)

	for _, tc := range []struct {
		name string
		p    *local.Provider
		ctx  context.Context
		req  *eval.SandboxAcquireRequest
		want string
	}{
		{"no workspace", p, nil, request("", eval.ReadWrite, ".", "."), "local sandbox requires an active workspace() or a configured workspace directory"},
		{"empty workspace directory", p, nil, &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", Workspace: &eval.WorkspaceMaterialization{}}, "requires an active workspace()"},
		{"missing workspace", p, nil, request(filepath.Join(ws, "missing"), eval.ReadWrite, ".", "."), "must be a directory"},
		{"missing fallback", newProvider(t, local.Options{Workspace: filepath.Join(ws, "gone")}), nil, request("", eval.ReadWrite, ".", "."), "must be a directory"},
		{"workspace is a file", p, nil, request(filepath.Join(ws, "file"), eval.ReadWrite, ".", "."), "must be a directory"},
		{"missing root", p, nil, request(ws, eval.ReadWrite, "nope", "."), `root "nope" must be a directory`},
		{"root is a file", p, nil, request(ws, eval.ReadWrite, "file", "."), `root "file" must be a directory`},
		{"root symlink escapes", p, nil, request(ws, eval.ReadWrite, "escape", "."), `root "escape" resolves outside its configured boundary`},
		{"root relative symlink escapes", p, nil, request(ws, eval.ReadWrite, "relescape", "."), "resolves outside its configured boundary"},
		{"root dangling symlink", p, nil, request(ws, eval.ReadWrite, "dangling", "."), "must be a directory"},
		{"missing cwd", p, nil, request(ws, eval.ReadWrite, "a", "nope"), `cwd "nope" must be a directory`},
		{"cwd escapes root", p, nil, request(ws, eval.ReadWrite, "a", "up"), `cwd "up" resolves outside its configured boundary`},
		{"cwd escapes workspace", p, nil, request(ws, eval.ReadWrite, ".", "escape"), "resolves outside its configured boundary"},
		{"absolute root", p, nil, request(ws, eval.ReadWrite, ws, "."), "must be relative"},
		{"parent root", p, nil, request(ws, eval.ReadWrite, "..", "."), `must not contain a ".." segment`},
		{"inner parent root", p, nil, request(ws, eval.ReadWrite, "a/../..", "."), `".." segment`},
		{"trailing parent root", p, nil, request(ws, eval.ReadWrite, "a/..", "."), `".." segment`},
		{"backslash root", p, nil, request(ws, eval.ReadWrite, `a\b`, "."), "forward slashes"},
		{"drive root", p, nil, request(ws, eval.ReadWrite, "C:/x", "."), "must be relative"},
		{"NUL root", p, nil, request(ws, eval.ReadWrite, "a\x00", "."), "NUL"},
		{"absolute cwd", p, nil, request(ws, eval.ReadWrite, ".", "/tmp"), "must be relative"},
		{"parent cwd", p, nil, request(ws, eval.ReadWrite, "a", "../a"), `".." segment`},
		{"bad access", p, nil, request(ws, "rw", ".", "."), `access "rw"`},
		{"empty access", p, nil, request(ws, "", ".", "."), `access ""`},
		{"cancelled", p, cancelled, request(ws, eval.ReadWrite, ".", "."), "caller gave up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			l, err := tc.p.Acquire(ctx, tc.req)
			if l != nil {
				_ = l.Release(context.Background())
			}
			hostexectest.WantErr(t, err, tc.want)
			if tc.ctx != nil && !errors.Is(err, cause) {
				t.Fatalf("error %v does not wrap the cancellation cause", err)
			}
		})
	}

	// A symlink that stays inside the boundary is fine.
	l := acquire(t, p, request(ws, eval.ReadWrite, "a/inner", "."))
	res := hostexectest.Exec(t, l.Runtime(), eval.ExecOptions{}, "pwd")
	if got := strings.TrimSpace(string(res.Stdout)); got != filepath.Join(ws, "a", "b") {
		t.Fatalf("pwd = %q", got)
	}
}

func TestLeaseShape(t *testing.T) {
	ws := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "src"))
	p := newProvider(t, local.Options{})
	idRE := regexp.MustCompile(`^local:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, access := range []eval.Access{eval.ReadOnly, eval.ReadWrite} {
		l := acquire(t, p, request(ws, access, "repo", "src"))
		if !idRE.MatchString(l.ID()) {
			t.Fatalf("lease id %q is not local:<uuid>", l.ID())
		}
		if seen[l.ID()] {
			t.Fatalf("duplicate lease id %q", l.ID())
		}
		seen[l.ID()] = true
		rt := l.Runtime()
		if rt.Access() != access || rt.Root() != "repo" || rt.Cwd() != "src" {
			t.Fatalf("runtime reports (%q, %q, %q)", rt.Access(), rt.Root(), rt.Cwd())
		}
	}
}

// TestLeaseRuntime: a lease's runtime is the host runner's (its own
// tests are in internal/hostexec): it runs commands in the acquired cwd,
// rejects them under read-only access, and its release kills what runs
// and ends it with ErrReleased.
func TestLeaseRuntime(t *testing.T) {
	ws := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "src"))
	hostexectest.WriteHost(t, filepath.Join(ws, "repo", "notes.txt"), "hello")
	p := newProvider(t, local.Options{})
	ctx := context.Background()

	ro := acquire(t, p, request(ws, eval.ReadOnly, "repo", "src"))
	_, err := ro.Runtime().Exec(ctx, "true", nil, eval.ExecOptions{})
	if !errors.Is(err, eval.ErrReadOnly) || err.Error() != `local sandbox cannot enforce read-only access for host processes; use access = "read-write" or a provider that can` {
		t.Fatalf("read-only Exec err = %v", err)
	}
	if b, err := ro.Runtime().ReadFile(ctx, "notes.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}

	l, err := p.Acquire(ctx, request(ws, eval.ReadWrite, "repo", "src"))
	if err != nil {
		t.Fatal(err)
	}
	rt := l.Runtime()
	res := hostexectest.Exec(t, rt, eval.ExecOptions{}, "pwd", "-P")
	if got, want := strings.TrimSpace(string(res.Stdout)), filepath.Join(ws, "repo", "src"); got != want {
		t.Fatalf("pwd = %q, want %q", got, want)
	}
	proc, err := rt.Spawn(ctx, "sleep", []string{"300"}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := proc.Wait(); !errors.Is(err, local.ErrReleased) {
		t.Fatalf("Wait after release: %v", err)
	}
	if _, err := rt.Exec(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, local.ErrReleased) {
		t.Fatalf("Exec after release: %v", err)
	}
}

func TestSetup(t *testing.T) {
	ws := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "src"))
	p := newProvider(t, local.Options{Setup: "printf prepared > .aml-ready && pwd -P >> ../runs"})
	for range 2 {
		l := acquire(t, p, request(ws, eval.ReadWrite, "repo", "src"))
		if got := hostexectest.ReadHost(t, filepath.Join(ws, "repo", "src", ".aml-ready")); got != "prepared" {
			t.Fatalf(".aml-ready = %q", got)
		}
		_ = l.Release(context.Background())
	}
	want := strings.Repeat(filepath.Join(ws, "repo", "src")+"\n", 2)
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "repo", "runs")); got != want {
		t.Fatalf("setup ran in %q, want twice in the cwd", got)
	}
}

func TestSetupFailure(t *testing.T) {
	ws := t.TempDir()
	p := newProvider(t, local.Options{Setup: "echo partial; echo '  boom  ' >&2; exit 3"})
	l, err := p.Acquire(context.Background(), request(ws, eval.ReadWrite, ".", "."))
	if l != nil {
		t.Fatal("a lease was returned")
	}
	hostexectest.WantErr(t, err, "setup failed with exit code 3: boom")
	if strings.Contains(err.Error(), "boom  ") {
		t.Fatalf("stderr not trimmed: %q", err)
	}

	p = newProvider(t, local.Options{Setup: "exit 4"})
	_, err = p.Acquire(context.Background(), request(ws, eval.ReadWrite, ".", "."))
	hostexectest.WantErr(t, err, "setup failed with exit code 4")

	p = newProvider(t, local.Options{Setup: "head -c 5000 /dev/zero", MaxOutputBytes: 100})
	_, err = p.Acquire(context.Background(), request(ws, eval.ReadWrite, ".", "."))
	hostexectest.WantErr(t, err, "output exceeded 100 bytes")

	// A setup past its bound is killed, with what it started, and fails
	// the acquisition saying so.
	p = newProvider(t, local.Options{Setup: "echo $$ > setup.pid; sleep 600", SetupTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err = p.Acquire(context.Background(), request(ws, eval.ReadWrite, ".", "."))
	hostexectest.WantErr(t, err, "setup did not finish within 300ms (setup_timeout_ms raises the bound)")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the setup timeout %v does not wrap the deadline", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the bounded setup took %v", took)
	}
	if _, err := local.New(local.Options{SetupTimeout: -time.Second}); err == nil {
		t.Error("a negative setup timeout was accepted")
	}

	// Setup is a host process: it cannot run under read-only access.
	p = newProvider(t, local.Options{Setup: "touch ran"})
	_, err = p.Acquire(context.Background(), request(ws, eval.ReadOnly, ".", "."))
	if !errors.Is(err, eval.ErrReadOnly) {
		t.Fatalf("read-only setup err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("setup ran under read-only access")
	}
}
