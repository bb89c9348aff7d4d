package deterministic_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

func newSandbox(t *testing.T, opts deterministic.SandboxOptions) *deterministic.Sandbox {
	t.Helper()
	s, err := deterministic.NewSandbox(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func acquire(t *testing.T, s *deterministic.Sandbox, access eval.Access, root, cwd string) eval.SandboxLease {
	t.Helper()
	l, err := s.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: access, Root: root, Cwd: cwd, EvaluationID: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSandboxAcquireRecordsCopies(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{})
	if s.Name() != deterministic.DefaultSandboxName {
		t.Fatalf("name %q", s.Name())
	}
	ws := &eval.WorkspaceMaterialization{WorkspaceID: "w", Directory: "/tmp/w"}
	req := &eval.SandboxAcquireRequest{Access: eval.ReadOnly, Root: "src", Cwd: "pkg", EvaluationID: "ev", Workspace: ws}
	l, err := s.Acquire(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID() != "deterministic-sandbox-1" {
		t.Fatalf("id %q", l.ID())
	}
	rt := l.Runtime()
	if rt.Access() != eval.ReadOnly || rt.Root() != "src" || rt.Cwd() != "pkg" {
		t.Fatalf("runtime %q %q %q", rt.Access(), rt.Root(), rt.Cwd())
	}
	ws.Directory = "mutated"
	req.Root = "mutated"
	got := s.Acquisitions()
	if len(got) != 1 || got[0].Root != "src" || got[0].Workspace == ws || got[0].Workspace.Directory != "/tmp/w" {
		t.Fatalf("acquisitions %+v", got)
	}
	got[0].Workspace.Directory = "again"
	if s.Acquisitions()[0].Workspace.Directory != "/tmp/w" {
		t.Fatal("Acquisitions shares the recorded workspace")
	}
	l2 := acquire(t, s, eval.ReadWrite, ".", ".")
	if l2.ID() != "deterministic-sandbox-2" {
		t.Fatalf("id %q", l2.ID())
	}
}

func TestSandboxAcquireRejects(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{Name: "fake"})
	for _, req := range []*eval.SandboxAcquireRequest{
		nil,
		{Access: "write", Root: ".", Cwd: "."},
		{Access: eval.ReadOnly, Root: "../up", Cwd: "."},
		{Access: eval.ReadOnly, Root: ".", Cwd: "/abs"},
		{Access: eval.ReadOnly, Root: `a\b`, Cwd: "."},
	} {
		if _, err := s.Acquire(context.Background(), req); err == nil {
			t.Errorf("%+v accepted", req)
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if _, err := s.Acquire(ctx, &eval.SandboxAcquireRequest{Access: eval.ReadOnly, Root: ".", Cwd: "."}); !errors.Is(err, cause) {
		t.Fatalf("pre-cancelled: %v", err)
	}
	if n := len(s.Acquisitions()); n != 0 {
		t.Fatalf("%d rejected acquisitions recorded", n)
	}
	for _, bad := range []string{" x", "x\x00"} {
		if _, err := deterministic.NewSandbox(deterministic.SandboxOptions{Name: bad}); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

func TestSandboxExec(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{})
	l := acquire(t, s, eval.ReadOnly, ".", "work")
	rt := l.Runtime()
	res, err := rt.Exec(context.Background(), "echo", []string{"a b", "c"}, eval.ExecOptions{})
	if err != nil || string(res.Stdout) != "echo a b c" || res.ExitCode != 0 || len(res.Stderr) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := rt.Exec(context.Background(), "ls", nil, eval.ExecOptions{Cwd: "other/./dir"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Exec(context.Background(), "ls", nil, eval.ExecOptions{Cwd: "../x"}); err == nil {
		t.Fatal("escaping cwd accepted")
	}
	if _, err := rt.Exec(context.Background(), "", nil, eval.ExecOptions{}); err == nil {
		t.Fatal("empty command accepted")
	}
	want := []deterministic.Command{
		{LeaseID: l.ID(), Command: "echo", Args: []string{"a b", "c"}, Cwd: "work"},
		{LeaseID: l.ID(), Command: "ls", Cwd: "other/dir"},
	}
	got := s.Commands()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("commands %+v", got)
	}
	got[0].Args[0] = "mutated"
	if s.Commands()[0].Args[0] != "a b" {
		t.Fatal("Commands shares arguments")
	}
}

func TestSandboxExecFunc(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{Exec: func(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
		switch command {
		case "fail":
			return &eval.ExecResult{Stderr: []byte("boom"), ExitCode: 3}, nil
		case "broken":
			return nil, errors.New("cannot start")
		case "sleep":
			<-ctx.Done()
			return nil, ctx.Err()
		case "env":
			return &eval.ExecResult{Stdout: []byte(opts.Env["K"] + "@" + opts.Cwd)}, nil
		}
		return nil, nil
	}})
	rt := acquire(t, s, eval.ReadWrite, ".", ".").Runtime()
	ctx := context.Background()
	if res, err := rt.Exec(ctx, "fail", nil, eval.ExecOptions{}); err != nil || res.ExitCode != 3 || string(res.Stderr) != "boom" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := rt.Exec(ctx, "broken", nil, eval.ExecOptions{}); err == nil || err.Error() != "cannot start" {
		t.Fatalf("%v", err)
	}
	if _, err := rt.Exec(ctx, "nil", nil, eval.ExecOptions{}); err == nil {
		t.Fatal("a nil result must be an error")
	}
	if _, err := rt.Exec(ctx, "sleep", nil, eval.ExecOptions{Timeout: 10 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v", err)
	}
	if res, err := rt.Exec(ctx, "env", nil, eval.ExecOptions{Env: map[string]string{"K": "v"}, Cwd: "d"}); err != nil || string(res.Stdout) != "v@d" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestSandboxFiles(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{})
	ctx := context.Background()
	ro := acquire(t, s, eval.ReadOnly, ".", ".").Runtime()
	if err := ro.WriteFile(ctx, "a.txt", []byte("x")); !errors.Is(err, eval.ErrReadOnly) {
		t.Fatalf("read-only write: %v", err)
	}
	if _, err := ro.ReadFile(ctx, "a.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing read: %v", err)
	}

	l := acquire(t, s, eval.ReadWrite, "sub", ".")
	rt := l.Runtime()
	data := []byte("hello")
	if err := rt.WriteFile(ctx, "dir/a.txt", data); err != nil {
		t.Fatal(err)
	}
	data[0] = 'j'
	if err := rt.WriteFile(ctx, "./dir/a.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, err := rt.ReadFile(ctx, "dir/a.txt"); err != nil || string(got) != "hi" {
		t.Fatalf("%q %v", got, err)
	}
	if fi, err := rt.Stat(ctx, "dir/a.txt"); err != nil || fi.Kind != "file" || fi.Size != 2 || !fi.ModTime.IsZero() {
		t.Fatalf("%+v %v", fi, err)
	}
	for _, dir := range []string{"dir", ".", ""} {
		if fi, err := rt.Stat(ctx, dir); err != nil || fi.Kind != "directory" {
			t.Fatalf("stat %q: %+v %v", dir, fi, err)
		}
	}
	if _, err := rt.Stat(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v", err)
	}
	if _, err := rt.ReadFile(ctx, "dir"); err == nil {
		t.Fatal("read of a directory succeeded")
	}
	if err := rt.WriteFile(ctx, "dir", nil); err == nil {
		t.Fatal("write onto a directory succeeded")
	}
	if err := rt.WriteFile(ctx, "dir/a.txt/b", nil); err == nil {
		t.Fatal("write below a file succeeded")
	}
	for _, bad := range []string{"/etc/passwd", "../x", "a/../../x", `a\b`, "C:/x", "a\x00b"} {
		if _, err := rt.ReadFile(ctx, bad); err == nil {
			t.Errorf("ReadFile(%q) succeeded", bad)
		}
		if err := rt.WriteFile(ctx, bad, nil); err == nil {
			t.Errorf("WriteFile(%q) succeeded", bad)
		}
		if _, err := rt.Stat(ctx, bad); err == nil {
			t.Errorf("Stat(%q) succeeded", bad)
		}
	}
	writes := s.Writes()
	if len(writes) != 2 || writes[0].Path != "dir/a.txt" || string(writes[0].Content) != "hello" || string(writes[1].Content) != "hi" || writes[1].LeaseID != l.ID() {
		t.Fatalf("writes %+v", writes)
	}
	if files := s.Files(l.ID()); len(files) != 1 || files["dir/a.txt"] != "hi" {
		t.Fatalf("files %v", files)
	}
	if s.Files("unknown") != nil {
		t.Fatal("files of an unknown lease")
	}

	// Leases do not share files.
	other := acquire(t, s, eval.ReadWrite, "sub", ".").Runtime()
	if _, err := other.ReadFile(ctx, "dir/a.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("leases share files: %v", err)
	}
}

func TestSandboxStaging(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{})
	ctx := context.Background()
	l := acquire(t, s, eval.ReadOnly, ".", ".")
	st, err := l.Runtime().CreateFileStaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Root() != "/deterministic-staging/1" {
		t.Fatalf("root %q", st.Root())
	}
	if err := st.WriteFile(ctx, "skills/s/SKILL.md", []byte("s")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../x", "/x", ".", ""} {
		if err := st.WriteFile(ctx, bad, nil); err == nil {
			t.Errorf("staging WriteFile(%q) succeeded", bad)
		}
	}
	st2, _ := l.Runtime().CreateFileStaging(ctx)
	if st2.Root() != "/deterministic-staging/2" {
		t.Fatalf("root %q", st2.Root())
	}
	if err := st.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteFile(ctx, "x", nil); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("write after release: %v", err)
	}
	w := s.Writes()
	if len(w) != 1 || w[0].Path != "/deterministic-staging/1/skills/s/SKILL.md" || w[0].LeaseID != l.ID() {
		t.Fatalf("writes %+v", w)
	}
	if s.Files(l.ID()) != nil {
		t.Fatal("staging writes reported as lease files")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st2.WriteFile(ctx, "x", nil); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("lease release kept the staging: %v", err)
	}
}

func TestSandboxSpawn(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{Exec: func(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
		switch command {
		case "cat":
			in, err := io.ReadAll(opts.Stdin)
			if err != nil {
				return nil, err
			}
			return &eval.ExecResult{Stdout: in, Stderr: []byte("e"), ExitCode: 2}, nil
		case "block":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return deterministic.EchoCommand()(ctx, command, args, opts)
	}})
	ctx := context.Background()
	l := acquire(t, s, eval.ReadOnly, ".", ".")
	rt := l.Runtime()

	p, err := rt.Spawn(ctx, "echo", []string{"x"}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != l.ID()+"-proc-1" {
		t.Fatalf("id %q", p.ID())
	}
	out, _ := io.ReadAll(p.Stdout())
	if string(out) != "echo x" {
		t.Fatalf("stdout %q", out)
	}
	for range 2 {
		if code, err := p.Wait(); code != 0 || err != nil {
			t.Fatalf("wait %d %v", code, err)
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}

	p, _ = rt.Spawn(ctx, "cat", nil, eval.ExecOptions{})
	if _, err := io.WriteString(p.Stdin(), "piped"); err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	out, _ = io.ReadAll(p.Stdout())
	errOut, _ := io.ReadAll(p.Stderr())
	if code, err := p.Wait(); string(out) != "piped" || string(errOut) != "e" || code != 2 || err != nil {
		t.Fatalf("%q %q %d %v", out, errOut, code, err)
	}

	p, _ = rt.Spawn(ctx, "cat", nil, eval.ExecOptions{Stdin: strings.NewReader("given")})
	if _, err := p.Stdin().Write([]byte("x")); err == nil {
		t.Fatal("stdin write succeeded with ExecOptions.Stdin set")
	}
	out, _ = io.ReadAll(p.Stdout())
	if string(out) != "given" {
		t.Fatalf("stdout %q", out)
	}

	p, _ = rt.Spawn(ctx, "block", nil, eval.ExecOptions{})
	p.Kill()
	p.Kill()
	if code, err := p.Wait(); code != -1 || err == nil {
		t.Fatalf("killed: %d %v", code, err)
	}

	sctx, cancel := context.WithCancelCause(ctx)
	p, _ = rt.Spawn(sctx, "block", nil, eval.ExecOptions{})
	cause := errors.New("evaluation cancelled")
	cancel(cause)
	if _, err := p.Wait(); !errors.Is(err, cause) {
		t.Fatalf("cancelled: %v", err)
	}

	// Release kills running processes.
	p, _ = rt.Spawn(ctx, "block", nil, eval.ExecOptions{})
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != -1 || err == nil {
		t.Fatalf("after release: %d %v", code, err)
	}
	if _, err := rt.Spawn(ctx, "echo", nil, eval.ExecOptions{}); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("spawn after release: %v", err)
	}
	cmds := s.Commands()
	if len(cmds) != 6 || cmds[1].Command != "cat" {
		t.Fatalf("commands %+v", cmds)
	}
}

func TestSandboxRelease(t *testing.T) {
	var mu sync.Mutex
	var hooked []string
	s := newSandbox(t, deterministic.SandboxOptions{Release: func(_ context.Context, id string) error {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, id)
		if id == "deterministic-sandbox-2" {
			return errors.New("cleanup failed")
		}
		return nil
	}})
	ctx := context.Background()
	a := acquire(t, s, eval.ReadWrite, ".", ".")
	b := acquire(t, s, eval.ReadWrite, ".", ".")
	for range 2 {
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx); err == nil || err.Error() != "cleanup failed" {
			t.Fatalf("release error %v", err)
		}
	}
	if !slices.Equal(s.Releases(), []string{a.ID(), b.ID()}) || !slices.Equal(hooked, []string{a.ID(), b.ID()}) {
		t.Fatalf("releases %v hooked %v", s.Releases(), hooked)
	}
	rt := a.Runtime()
	if _, err := rt.Exec(ctx, "x", nil, eval.ExecOptions{}); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("exec: %v", err)
	}
	if _, err := rt.ReadFile(ctx, "x"); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("read: %v", err)
	}
	if err := rt.WriteFile(ctx, "x", nil); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("write: %v", err)
	}
	if _, err := rt.Stat(ctx, "x"); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("stat: %v", err)
	}
	if _, err := rt.CreateFileStaging(ctx); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("staging: %v", err)
	}
}

func TestSandboxConcurrent(t *testing.T) {
	s := newSandbox(t, deterministic.SandboxOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			l, err := s.Acquire(ctx, &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: "."})
			if err != nil {
				t.Error(err)
				return
			}
			rt := l.Runtime()
			var inner sync.WaitGroup
			for j := range 4 {
				inner.Go(func() {
					name := fmt.Sprintf("f%d/%d", i, j)
					if err := rt.WriteFile(ctx, name, []byte(name)); err != nil {
						t.Error(err)
					}
					if got, err := rt.ReadFile(ctx, name); err != nil || !bytes.Equal(got, []byte(name)) {
						t.Error(got, err)
					}
					if _, err := rt.Exec(ctx, "x", nil, eval.ExecOptions{}); err != nil {
						t.Error(err)
					}
					p, err := rt.Spawn(ctx, "y", nil, eval.ExecOptions{})
					if err != nil {
						t.Error(err)
						return
					}
					io.ReadAll(p.Stdout())
					p.Wait()
					st, err := rt.CreateFileStaging(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					st.WriteFile(ctx, "a", nil)
				})
			}
			inner.Wait()
			l.Release(ctx)
			l.Release(ctx)
		})
	}
	wg.Wait()
	if len(s.Acquisitions()) != 16 || len(s.Releases()) != 16 || len(s.Commands()) != 128 || len(s.Writes()) != 128 {
		t.Fatalf("%d %d %d %d", len(s.Acquisitions()), len(s.Releases()), len(s.Commands()), len(s.Writes()))
	}
}
