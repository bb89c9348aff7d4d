package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// journal records resource events in order.
type journal struct {
	mu  sync.Mutex
	log []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.log = append(j.log, s)
	j.mu.Unlock()
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.log, " ")
}

// dirWorkspace materializes every workspace into a fresh temp directory
// and enforces one writer per id.
type dirWorkspace struct {
	t       *testing.T
	j       *journal
	mu      sync.Mutex
	held    map[string]bool
	saveErr error
}

func (w *dirWorkspace) Name() string { return "dir" }

func (w *dirWorkspace) Acquire(_ context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		w.held = map[string]bool{}
	}
	if req.Lock && w.held[req.ID] {
		return nil, &eval.WorkspaceConflictError{WorkspaceID: req.ID}
	}
	w.held[req.ID] = true
	w.j.add("ws.acquire")
	return &dirLease{w: w, id: req.ID, dir: w.t.TempDir()}, nil
}

type dirLease struct {
	w    *dirWorkspace
	id   string
	dir  string
	once sync.Once
}

func (l *dirLease) ID() string        { return "lease-" + l.id }
func (l *dirLease) Directory() string { return l.dir }
func (l *dirLease) Save(_ context.Context, req eval.WorkspaceSaveRequest) error {
	l.w.j.add("ws.save:" + req.Outcome)
	return l.w.saveErr
}
func (l *dirLease) Release(context.Context) error {
	l.once.Do(func() {
		l.w.mu.Lock()
		delete(l.w.held, l.id)
		l.w.mu.Unlock()
		l.w.j.add("ws.release")
	})
	return nil
}

// memSandbox is a sandbox whose runtime records commands and keeps files
// in memory.
type memSandbox struct {
	j          *journal
	releaseErr error
	releases   int
	mu         sync.Mutex
	files      map[string]string
}

func (s *memSandbox) Name() string { return "mem" }

func (s *memSandbox) Acquire(_ context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	s.j.add(fmt.Sprintf("sb.acquire:%s:%s:%s", req.Access, req.Root, req.Cwd))
	return &memLease{s: s, access: req.Access, root: req.Root, cwd: req.Cwd}, nil
}

type memLease struct {
	s         *memSandbox
	access    eval.Access
	root, cwd string
}

func (l *memLease) ID() string                   { return "mem-1" }
func (l *memLease) Runtime() eval.SandboxRuntime { return l }
func (l *memLease) Release(context.Context) error {
	l.s.mu.Lock()
	l.s.releases++
	l.s.mu.Unlock()
	l.s.j.add("sb.release")
	return l.s.releaseErr
}
func (l *memLease) Access() eval.Access { return l.access }
func (l *memLease) Root() string        { return l.root }
func (l *memLease) Cwd() string         { return l.cwd }
func (l *memLease) Exec(_ context.Context, cmd string, args []string, o eval.ExecOptions) (*eval.ExecResult, error) {
	l.s.j.add("exec:" + o.Cwd)
	return &eval.ExecResult{Stdout: []byte(cmd + " " + strings.Join(args, " ") + " in " + o.Cwd)}, nil
}
func (l *memLease) Spawn(context.Context, string, []string, eval.ExecOptions) (eval.SandboxProcess, error) {
	return nil, errors.New("no spawn")
}
func (l *memLease) ReadFile(_ context.Context, p string) ([]byte, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	v, ok := l.s.files[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return []byte(v), nil
}
func (l *memLease) Stat(_ context.Context, p string) (eval.FileInfo, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	v, ok := l.s.files[p]
	if !ok {
		return eval.FileInfo{}, os.ErrNotExist
	}
	return eval.FileInfo{Kind: "file", Size: int64(len(v)), ModTime: time.Unix(1, 0)}, nil
}
func (l *memLease) WriteFile(_ context.Context, p string, data []byte) error {
	if l.access == eval.ReadOnly {
		return eval.ErrReadOnly
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.files == nil {
		l.s.files = map[string]string{}
	}
	l.s.files[p] = string(data)
	return nil
}
func (l *memLease) CreateFileStaging(context.Context) (eval.FileStaging, error) {
	return nil, errors.New("no staging")
}

func TestScriptOnTheHost(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt, _ := eval.New(eval.Options{Cwd: dir, Host: host(t)})
	ctx := context.Background()
	got, err := rt.Evaluate(ctx, &eval.Script{Command: "echo", Args: []string{"a b", "$HOME"}})
	if err != nil || got != "a b $HOME\n" {
		t.Fatalf("literal argv: %q, %v", got, err)
	}
	got, err = rt.Evaluate(ctx, &eval.Script{Shell: "sh", Cwd: "sub", Children: []any{"echo $((1+2)) ", "&& basename \"$PWD\""}})
	if err != nil || got != "3\nsub\n" {
		t.Fatalf("shell source: %q, %v", got, err)
	}
	_, err = rt.Evaluate(ctx, &eval.Script{Shell: "sh", Position: pos(4), Children: []any{"echo oops >&2; exit 3"}})
	if err == nil || !strings.Contains(err.Error(), "t.star:4:1: script() sh exited with code 3: oops") {
		t.Fatalf("exit code: %v", err)
	}
	_, err = rt.Evaluate(ctx, &eval.Script{Command: "sleep", Args: []string{"5"}, TimeoutMS: 50})
	if err == nil || !strings.Contains(err.Error(), "timed out after timeout_ms=50") {
		t.Fatalf("timeout: %v", err)
	}
	_, err = rt.Evaluate(ctx, &eval.Script{Shell: "sh", Children: []any{"  "}})
	if err == nil || !strings.Contains(err.Error(), "needs non-empty source") {
		t.Fatalf("empty source: %v", err)
	}
	_, err = rt.Evaluate(ctx, &eval.Script{Command: "true", Cwd: "../x"})
	if err == nil || !strings.Contains(err.Error(), "leaves its root") {
		t.Fatalf("cwd traversal: %v", err)
	}
}

func TestWorkspaceFileAndLifecycleOrder(t *testing.T) {
	j := &journal{}
	ws := &dirWorkspace{t: t, j: j}
	sb := &memSandbox{j: j}
	agent, _ := deterministic.New(deterministic.Options{SupportsSandbox: true, Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		j.add("agent")
		return &eval.AgentResponse{Text: req.Prompt}, nil
	}})
	rt, _ := eval.New(eval.Options{AgentProvider: agent, WorkspaceProvider: ws, SandboxProvider: sb})
	got, err := rt.Evaluate(context.Background(), &eval.Workspace{ID: "w", Save: eval.DefaultSavePolicy(), Children: []any{
		&eval.File{Path: "notes/a.txt", Children: []any{"hello"}},
		&eval.Component{Name: "Peek", Fn: func(cc *eval.ComponentContext) (any, error) {
			// The file is in the workspace materialization before later
			// siblings run.
			return &eval.Include{Path: "notes/a.txt", NoTitle: true}, nil
		}},
		&eval.Sandbox{Access: eval.ReadWrite, Children: []any{
			&eval.Agent{Children: []any{"in sandbox"}},
			&eval.File{Path: "b.txt", Children: []any{"guest"}},
			&eval.Sandbox{Root: "sub", Children: []any{&eval.Script{Command: "ls"}}},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got != "helloin sandboxls  in sub" {
		t.Fatalf("result %q", got)
	}
	want := "ws.acquire sb.acquire:read-write:.:. agent exec:sub sb.release ws.save:success ws.release"
	if j.String() != want {
		t.Fatalf("order:\n%s\nwant:\n%s", j, want)
	}
	if sb.files["b.txt"] != "guest" {
		t.Fatalf("sandbox files %v", sb.files)
	}
}

// TestNarrowedReadOnlyViewRefusesCommands checks a command cannot run in
// a read-only view of a read-write lease, which could not enforce it.
func TestNarrowedReadOnlyViewRefusesCommands(t *testing.T) {
	sb := &memSandbox{j: &journal{}}
	rt, _ := eval.New(eval.Options{SandboxProvider: sb})
	_, err := rt.Evaluate(context.Background(), &eval.Sandbox{Access: eval.ReadWrite, Children: []any{
		&eval.Sandbox{Access: eval.ReadOnly, Children: []any{&eval.Script{Command: "ls", Position: pos(3)}}},
	}})
	if err == nil || !strings.Contains(err.Error(), "t.star:3:1: script() cannot run in a read-only sandbox() nested in a read-write one") {
		t.Fatalf("error %v", err)
	}
	if sb.releases != 1 {
		t.Fatalf("released %d times", sb.releases)
	}
}

func TestResourceFailuresReleaseOnceAndKeepBothErrors(t *testing.T) {
	j := &journal{}
	ws := &dirWorkspace{t: t, j: j}
	sb := &memSandbox{j: j, releaseErr: errors.New("release failed")}
	boom := &eval.Component{Name: "Boom", Fn: func(*eval.ComponentContext) (any, error) { return nil, errors.New("body failed") }}
	rt, _ := eval.New(eval.Options{WorkspaceProvider: ws, SandboxProvider: sb})
	_, err := rt.Evaluate(context.Background(), &eval.Workspace{ID: "w", Save: &eval.SavePolicy{On: "always", Retention: 1}, Children: []any{
		&eval.Sandbox{Children: []any{boom}},
	}})
	if err == nil || !strings.Contains(err.Error(), "body failed") || !strings.Contains(err.Error(), "release failed") {
		t.Fatalf("error %v (want the body failure joined with the release failure)", err)
	}
	if sb.releases != 1 {
		t.Fatalf("sandbox released %d times", sb.releases)
	}
	if want := "ws.acquire sb.acquire:read-only:.:. sb.release ws.save:failure ws.release"; j.String() != want {
		t.Fatalf("order %s, want %s", j, want)
	}

	// save on success only: a failure skips it.
	j2 := &journal{}
	rt, _ = eval.New(eval.Options{WorkspaceProvider: &dirWorkspace{t: t, j: j2}})
	_, _ = rt.Evaluate(context.Background(), &eval.Workspace{ID: "w", Save: eval.DefaultSavePolicy(), Children: []any{boom}})
	if j2.String() != "ws.acquire ws.release" {
		t.Fatalf("failed run with save on success: %s", j2)
	}
}

func TestResourcePlacementErrors(t *testing.T) {
	ws := &dirWorkspace{t: t, j: &journal{}}
	sb := &memSandbox{j: &journal{}}
	cases := []struct {
		v    any
		want string
	}{
		{&eval.File{Path: "a", Position: pos(1)}, "t.star:1:1: file() requires an enclosing workspace() or sandbox()"},
		{&eval.Sandbox{Children: []any{&eval.Workspace{Position: pos(2)}}}, "t.star:2:1: workspace() cannot be inside sandbox()"},
		{&eval.Workspace{Children: []any{&eval.Workspace{Position: pos(3)}}}, "t.star:3:1: a workspace() cannot contain another workspace()"},
		{&eval.Sandbox{Children: []any{&eval.Sandbox{Access: eval.ReadWrite, Position: pos(4)}}}, "t.star:4:1: a nested sandbox() cannot widen read-only access to read-write"},
		{&eval.Sandbox{Children: []any{&eval.File{Path: "a", Position: pos(5)}}}, "t.star:5:1: file() cannot write through a read-only sandbox()"},
		{&eval.Sandbox{Children: []any{&eval.Sandbox{Provider: sb, Position: pos(6)}}}, "t.star:6:1: a nested sandbox() cannot select another provider"},
		{&eval.Workspace{Children: []any{&eval.File{Path: "../x", Position: pos(7)}}}, "t.star:7:1: file(path=...): path \"../x\" leaves its root"},
		{&eval.Workspace{Children: []any{&eval.File{Path: "/etc/x", Position: pos(8)}}}, "is absolute"},
		{&eval.Workspace{Children: []any{&eval.File{Path: `a\b`, Position: pos(9)}}}, "backslash"},
		{&eval.Sandbox{Children: []any{&eval.Agent{Position: pos(10), Children: []any{"x"}}}}, "cannot run inside sandbox()"},
	}
	for _, c := range cases {
		rt, _ := eval.New(eval.Options{WorkspaceProvider: ws, SandboxProvider: sb, AgentProvider: echo(t, nil)})
		_, err := rt.Evaluate(context.Background(), c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: error %v, want %q", c.v, err, c.want)
		}
	}
	// A second workspace in one evaluation, through evaluate().
	rt, _ := eval.New(eval.Options{WorkspaceProvider: ws})
	_, err := rt.Evaluate(context.Background(), []any{&eval.Workspace{ID: "a"}, &eval.Workspace{ID: "b", Position: pos(11)}})
	if err == nil || !strings.Contains(err.Error(), "t.star:11:1: only one workspace() may run per evaluation") {
		t.Fatalf("second workspace: %v", err)
	}
}

// TestComponentEvaluateInheritsResourceScopes checks that evaluate() and
// evaluate_all() in a component body run inside the component's
// enclosing workspace() and sandbox(): file() writes there and
// include(path=) reads it back, while the placement rules still hold.
func TestComponentEvaluateInheritsResourceScopes(t *testing.T) {
	writeAndRead := &eval.Component{Name: "WriteAndRead", Fn: func(cc *eval.ComponentContext) (any, error) {
		if _, err := cc.Evaluate(&eval.File{Path: "notes/a.txt", Children: []any{"hello"}}); err != nil {
			return nil, err
		}
		if _, err := cc.EvaluateAll([]any{&eval.File{Path: "b.txt", Children: []any{"all"}}}, pos(2)); err != nil {
			return nil, err
		}
		one, err := cc.Evaluate(&eval.Include{Path: "notes/a.txt", NoTitle: true})
		if err != nil {
			return nil, err
		}
		all, err := cc.EvaluateAll([]any{&eval.Include{Path: "b.txt", NoTitle: true}}, pos(3))
		if err != nil {
			return nil, err
		}
		return one + " " + all[0], nil
	}}
	t.Run("workspace", func(t *testing.T) {
		rt, _ := eval.New(eval.Options{WorkspaceProvider: &dirWorkspace{t: t, j: &journal{}}})
		got, err := rt.Evaluate(context.Background(), &eval.Workspace{ID: "w", Children: []any{writeAndRead}})
		if err != nil || got != "hello all" {
			t.Fatalf("result %q, %v; want \"hello all\"", got, err)
		}
	})
	t.Run("sandbox", func(t *testing.T) {
		sb := &memSandbox{j: &journal{}}
		rt, _ := eval.New(eval.Options{SandboxProvider: sb})
		got, err := rt.Evaluate(context.Background(), &eval.Sandbox{Access: eval.ReadWrite, Children: []any{writeAndRead}})
		if err != nil || got != "hello all" {
			t.Fatalf("result %q, %v; want \"hello all\"", got, err)
		}
		if sb.files["notes/a.txt"] != "hello" || sb.files["b.txt"] != "all" {
			t.Fatalf("sandbox files %v", sb.files)
		}
	})
	evaluating := func(v any) *eval.Component {
		return &eval.Component{Name: "Nested", Fn: func(cc *eval.ComponentContext) (any, error) { return cc.Evaluate(v) }}
	}
	refused := []struct {
		name string
		v    any
		want string
	}{
		{"file outside any scope", evaluating(&eval.File{Path: "a", Position: pos(1)}),
			"t.star:1:1: file() requires an enclosing workspace() or sandbox()"},
		{"file in a read-only sandbox", &eval.Sandbox{Children: []any{evaluating(&eval.File{Path: "a", Position: pos(2)})}},
			"t.star:2:1: file() cannot write through a read-only sandbox()"},
		{"second workspace", &eval.Workspace{Children: []any{evaluating(&eval.Workspace{Position: pos(3)})}},
			"t.star:3:1: a workspace() cannot contain another workspace()"},
		{"workspace in a sandbox", &eval.Sandbox{Children: []any{evaluating(&eval.Workspace{Position: pos(4)})}},
			"t.star:4:1: workspace() cannot be inside sandbox()"},
		{"widened sandbox", &eval.Sandbox{Children: []any{evaluating(&eval.Sandbox{Access: eval.ReadWrite, Position: pos(5)})}},
			"t.star:5:1: a nested sandbox() cannot widen read-only access to read-write"},
	}
	for _, c := range refused {
		j := &journal{}
		rt, _ := eval.New(eval.Options{WorkspaceProvider: &dirWorkspace{t: t, j: j}, SandboxProvider: &memSandbox{j: j}})
		_, err := rt.Evaluate(context.Background(), c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// TestParallelBranchesInheritResourceScopes checks that a parallel()
// branch runs inside the enclosing workspace(): file() in a branch, and
// file() a component in a branch returns, write into it.
func TestParallelBranchesInheritResourceScopes(t *testing.T) {
	second := &eval.Component{Name: "Second", Fn: func(*eval.ComponentContext) (any, error) {
		return &eval.File{Path: "b.txt", Children: []any{"second"}}, nil
	}}
	rt, _ := eval.New(eval.Options{WorkspaceProvider: &dirWorkspace{t: t, j: &journal{}}})
	got, err := rt.Evaluate(context.Background(), &eval.Workspace{ID: "w", Children: []any{
		&eval.Parallel{Branches: []any{&eval.File{Path: "a.txt", Children: []any{"first"}}, second}},
		&eval.Include{Path: "a.txt", NoTitle: true},
		" ",
		&eval.Include{Path: "b.txt", NoTitle: true},
	}})
	if err != nil || got != "first second" {
		t.Fatalf("result %q, %v; want \"first second\"", got, err)
	}
}

func TestFileRefusesSymlinkEscapes(t *testing.T) {
	outside := t.TempDir()
	// Direct check through a workspace whose directory already holds an
	// escaping link.
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	fixed := &fixedWorkspace{dir: dir}
	rt, _ := eval.New(eval.Options{WorkspaceProvider: fixed})
	_, err := rt.Evaluate(context.Background(), &eval.Workspace{Children: []any{&eval.File{Path: "a/b.txt", Children: []any{"x"}}}})
	if err == nil || !strings.Contains(err.Error(), "resolves outside its root") {
		t.Fatalf("escape through a symlinked directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "b.txt")); !os.IsNotExist(err) {
		t.Fatal("the file was written outside the workspace")
	}
	// A dangling link is refused too, and nothing is created at its target.
	if err := os.Symlink(filepath.Join(outside, "missing"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Workspace{Children: []any{&eval.File{Path: "dangling", Children: []any{"x"}}}})
	if err == nil || !strings.Contains(err.Error(), "dangling") {
		t.Fatalf("write through a dangling link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "missing")); !os.IsNotExist(err) {
		t.Fatal("the dangling link's target was created")
	}
}

// fixedWorkspace materializes into an existing directory.
type fixedWorkspace struct{ dir string }

func (w *fixedWorkspace) Name() string { return "fixed" }
func (w *fixedWorkspace) Acquire(context.Context, *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	return &dirLease{w: &dirWorkspace{j: &journal{}}, dir: w.dir}, nil
}

// host is the local sandbox provider as the host runtime of script().
func host(t testing.TB) eval.SandboxProvider {
	t.Helper()
	p, err := local.New(local.Options{})
	if err != nil {
		t.Skipf("skipping: no local host runtime on this machine (%v)", err)
	}
	return p
}

// TestScriptWithoutHost: the evaluator runs no process itself; without a
// host runtime a host script fails and says what to configure.
func TestScriptWithoutHost(t *testing.T) {
	rt, _ := eval.New(eval.Options{})
	_, err := rt.Evaluate(context.Background(), &eval.Script{Command: "echo", Position: pos(2)})
	if err == nil || !strings.Contains(err.Error(), "t.star:2:1: script() cannot run on the host: no host runtime is configured") {
		t.Fatalf("error = %v", err)
	}
}
