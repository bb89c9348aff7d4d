//go:build unix

package hostexec_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
	"github.com/aml-go/aml/internal/hostexec/hostexectest"
)

// options returns the Options of a Host over the directory dir.
func options(dir string, access eval.Access, root, cwd string) hostexec.Options {
	return hostexec.Options{Dir: dir, Root: root, Cwd: cwd, Access: access}
}

// open opens a Host released at the end of the test.
func open(t testing.TB, opts hostexec.Options) *hostexec.Host {
	t.Helper()
	h, err := hostexec.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = h.Release(context.Background()) })
	return h
}

// rwRuntime opens a read-write Host over a fresh directory with the
// given subdirectories and returns the directory and the runtime.
func rwRuntime(t *testing.T, dirs ...string) (string, *hostexec.Runtime) {
	t.Helper()
	ws := t.TempDir()
	for _, d := range dirs {
		hostexectest.Mkdir(t, filepath.Join(ws, d))
	}
	return ws, open(t, options(ws, eval.ReadWrite, ".", ".")).Runtime()
}

func TestOpen(t *testing.T) {
	if err := hostexec.Supported(); err != nil {
		t.Fatalf("Supported on a Unix host: %v", err)
	}
	base := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(base, "ws", "repo", "src"))
	hostexectest.Symlink(t, "repo", filepath.Join(base, "ws", "link"))
	t.Chdir(base) // a relative Dir is resolved against the working directory
	h := open(t, options("ws", eval.ReadOnly, "link", "src"))
	rt := h.Runtime()
	if rt.Access() != eval.ReadOnly || rt.Root() != "link" || rt.Cwd() != "src" {
		t.Fatalf("runtime reports (%q, %q, %q)", rt.Access(), rt.Root(), rt.Cwd())
	}
	if fi, err := rt.Stat(context.Background(), "src"); err != nil || fi.Kind != "directory" {
		t.Fatalf("Stat(src) = %+v, %v", fi, err)
	}
	if h.Runtime() != rt {
		t.Fatal("Runtime returned another runtime")
	}
	res, err := h.Run(context.Background(), "pwd", nil, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(res.Stdout)), filepath.Join(base, "ws", "repo", "src"); got != want {
		t.Fatalf("pwd = %q, want %q", got, want)
	}
}

func TestOpenErrors(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "a", "b"))
	hostexectest.WriteHost(t, filepath.Join(ws, "file"), "x")
	hostexectest.Symlink(t, outside, filepath.Join(ws, "escape"))
	hostexectest.Symlink(t, "..", filepath.Join(ws, "a", "up"))
	cancelled, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("caller gave up")
	cancel(cause)

	for _, tc := range []struct {
		name string
		ctx  context.Context
		opts hostexec.Options
		want string
	}{
		{"no directory", nil, options("", eval.ReadWrite, ".", "."), "requires a host directory"},
		{"missing directory", nil, options(filepath.Join(ws, "missing"), eval.ReadWrite, ".", "."), "must be a directory"},
		{"directory is a file", nil, options(filepath.Join(ws, "file"), eval.ReadWrite, ".", "."), "must be a directory"},
		{"missing root", nil, options(ws, eval.ReadWrite, "nope", "."), `root "nope" must be a directory`},
		{"root symlink escapes", nil, options(ws, eval.ReadWrite, "escape", "."), `root "escape" resolves outside its configured boundary`},
		{"cwd escapes root", nil, options(ws, eval.ReadWrite, "a", "up"), `cwd "up" resolves outside its configured boundary`},
		{"missing cwd", nil, options(ws, eval.ReadWrite, "a", "nope"), `cwd "nope" must be a directory`},
		{"absolute root", nil, options(ws, eval.ReadWrite, ws, "."), "must be relative"},
		{"parent root", nil, options(ws, eval.ReadWrite, "a/..", "."), `".." segment`},
		{"backslash cwd", nil, options(ws, eval.ReadWrite, ".", `a\b`), "forward slashes"},
		{"bad access", nil, options(ws, "rw", ".", "."), `access "rw"`},
		{"negative output bound", nil, hostexec.Options{Dir: ws, Access: eval.ReadWrite, MaxOutputBytes: -1}, "MaxOutputBytes must be positive"},
		{"cancelled", cancelled, options(ws, eval.ReadWrite, ".", "."), "caller gave up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			h, err := hostexec.Open(ctx, tc.opts)
			if h != nil {
				_ = h.Release(context.Background())
			}
			hostexectest.WantErr(t, err, tc.want)
			if tc.ctx != nil && !errors.Is(err, cause) {
				t.Fatalf("error %v does not wrap the cancellation cause", err)
			}
		})
	}
}

// TestRun: Run is for the owner's trusted commands, so it runs under
// read-only access, in the cwd Open resolved or a logical directory
// below the root, with Exec's bounds, and not after Release.
func TestRun(t *testing.T) {
	ws := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "src"))
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "docs"))
	h, err := hostexec.Open(context.Background(), hostexec.Options{Dir: ws, Root: "repo", Cwd: "src", Access: eval.ReadOnly, MaxOutputBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Runtime().Exec(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, hostexec.ErrReadOnlyExec) || !errors.Is(err, eval.ErrReadOnly) {
		t.Fatalf("read-only Exec err = %v", err)
	}
	for cwd, want := range map[string]string{"": filepath.Join(ws, "repo", "src"), "docs": filepath.Join(ws, "repo", "docs")} {
		res, err := h.Run(ctx, "pwd", []string{"-P"}, eval.ExecOptions{Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != want {
			t.Errorf("cwd %q: pwd = %q, want %q", cwd, got, want)
		}
	}
	_, err = h.Run(ctx, "pwd", nil, eval.ExecOptions{Cwd: "../x"})
	hostexectest.WantErr(t, err, `".." segment`)
	_, err = h.Run(ctx, "head", []string{"-c", "1025", "/dev/zero"}, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "output exceeded 1024 bytes")
	res, err := h.Run(ctx, "sh", []string{"-c", "exit 3"}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("Run after release: %v", err)
	}
}

func TestExecLiteralArgv(t *testing.T) {
	t.Setenv("HOME", "/should/not/expand")
	_, rt := rwRuntime(t)
	args := []string{"%s|\n", "two words", "$HOME", "*", "; echo injected", "`id`", "", "'quoted'"}
	res := hostexectest.Exec(t, rt, eval.ExecOptions{}, "printf", args...)
	want := "two words|\n$HOME|\n*|\n; echo injected|\n`id`|\n|\n'quoted'|\n"
	if string(res.Stdout) != want || res.ExitCode != 0 || len(res.Stderr) != 0 {
		t.Fatalf("got stdout %q stderr %q exit %d, want %q", res.Stdout, res.Stderr, res.ExitCode, want)
	}
}

func TestExecCwd(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "src"))
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "docs"))
	hostexectest.WriteHost(t, filepath.Join(ws, "repo", "file"), "x")
	hostexectest.Symlink(t, outside, filepath.Join(ws, "repo", "escape"))
	hostexectest.Symlink(t, "..", filepath.Join(ws, "repo", "up"))
	hostexectest.Symlink(t, "docs", filepath.Join(ws, "repo", "docslink"))
	h := open(t, options(ws, eval.ReadWrite, "repo", "src"))
	rt := h.Runtime()

	for cwd, want := range map[string]string{
		"":         filepath.Join(ws, "repo", "src"), // the runtime's cwd
		".":        filepath.Join(ws, "repo"),        // relative to the root
		"docs":     filepath.Join(ws, "repo", "docs"),
		"docslink": filepath.Join(ws, "repo", "docs"),
		"./src/":   filepath.Join(ws, "repo", "src"),
	} {
		res := hostexectest.Exec(t, rt, eval.ExecOptions{Cwd: cwd}, "pwd", "-P")
		if got := strings.TrimSpace(string(res.Stdout)); got != want {
			t.Errorf("cwd %q: pwd = %q, want %q", cwd, got, want)
		}
	}
	for cwd, want := range map[string]string{
		"missing": "must be a directory",
		"file":    "must be a directory",
		"escape":  "resolves outside its configured boundary",
		"up":      "resolves outside its configured boundary",
		"../repo": `".." segment`,
		"/tmp":    "must be relative",
		`a\b`:     "forward slashes",
	} {
		_, err := rt.Exec(context.Background(), "pwd", nil, eval.ExecOptions{Cwd: cwd})
		hostexectest.WantErr(t, err, want)
	}
}

func TestExecEnv(t *testing.T) {
	t.Setenv("AML_LOCAL_HOST_VAR", "from-host")
	t.Setenv("AML_LOCAL_OVERRIDDEN", "host")
	_, rt := rwRuntime(t)
	res := hostexectest.Exec(t, rt, eval.ExecOptions{Env: map[string]string{
		"AML_LOCAL_ADDED":      "a b $HOME",
		"AML_LOCAL_OVERRIDDEN": "option",
	}}, "sh", "-c", `printf '%s|%s|%s' "$AML_LOCAL_HOST_VAR" "$AML_LOCAL_ADDED" "$AML_LOCAL_OVERRIDDEN"`)
	if got, want := string(res.Stdout), "from-host|a b $HOME|option"; got != want {
		t.Fatalf("env = %q, want %q", got, want)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00"}} {
		_, err := rt.Exec(context.Background(), "true", nil, eval.ExecOptions{Env: bad})
		hostexectest.WantErr(t, err, "environment variable")
	}
}

func TestExecStdin(t *testing.T) {
	_, rt := rwRuntime(t)
	res := hostexectest.Exec(t, rt, eval.ExecOptions{Stdin: strings.NewReader("line one\nline two\n")}, "cat")
	if string(res.Stdout) != "line one\nline two\n" {
		t.Fatalf("stdout = %q", res.Stdout)
	}
	// No Stdin: the command reads an empty, closed input.
	res = hostexectest.Exec(t, rt, eval.ExecOptions{Timeout: time.Minute}, "cat")
	if len(res.Stdout) != 0 || res.ExitCode != 0 {
		t.Fatalf("cat without stdin: %q exit %d", res.Stdout, res.ExitCode)
	}
	// An *os.File is handed to the process directly.
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res = hostexectest.Exec(t, rt, eval.ExecOptions{Stdin: f}, "wc", "-c")
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("wc -c < /dev/null = %q", res.Stdout)
	}
	// A command that ignores a large stdin still completes.
	res = hostexectest.Exec(t, rt, eval.ExecOptions{Stdin: bytes.NewReader(make([]byte, 1<<20))}, "true")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
}

func TestExecExitCodes(t *testing.T) {
	_, rt := rwRuntime(t)
	res := hostexectest.Exec(t, rt, eval.ExecOptions{}, "sh", "-c", "echo out; echo err >&2; exit 7")
	if res.ExitCode != 7 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = hostexectest.Exec(t, rt, eval.ExecOptions{}, "sh", "-c", "kill -TERM $$")
	if res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Fatalf("signalled exit code = %d", res.ExitCode)
	}
	_, err := rt.Exec(context.Background(), "aml-local-no-such-command", nil, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "aml-local-no-such-command")
	_, err = rt.Exec(context.Background(), "", nil, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "must be non-empty")
	_, err = rt.Exec(context.Background(), "true", []string{"a\x00"}, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "NUL")
	_, err = rt.Exec(context.Background(), "true", nil, eval.ExecOptions{Timeout: -time.Second})
	hostexectest.WantErr(t, err, "negative timeout")
}

func TestExecCancelledBeforeStart(t *testing.T) {
	ws, rt := rwRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := rt.Exec(ctx, "touch", []string{"created"}, eval.ExecOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "created")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the command ran: %v", err)
	}
}

func TestExecOutputBound(t *testing.T) {
	ws := t.TempDir()
	h := open(t, hostexec.Options{Dir: ws, Root: ".", Cwd: ".", Access: eval.ReadWrite, MaxOutputBytes: 1024})
	rt := h.Runtime()
	res := hostexectest.Exec(t, rt, eval.ExecOptions{}, "head", "-c", "1024", "/dev/zero")
	if len(res.Stdout) != 1024 {
		t.Fatalf("exactly the bound: got %d bytes", len(res.Stdout))
	}
	_, err := rt.Exec(context.Background(), "head", []string{"-c", "1025", "/dev/zero"}, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "output exceeded 1024 bytes")
	// The bound is shared by stdout and stderr.
	_, err = rt.Exec(context.Background(), "sh", []string{"-c", "head -c 600 /dev/zero; head -c 600 /dev/zero >&2"}, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "output exceeded 1024 bytes")
	// An endless writer is stopped.
	_, err = rt.Exec(context.Background(), "yes", nil, eval.ExecOptions{})
	hostexectest.WantErr(t, err, "output exceeded 1024 bytes")
}

func TestExecTimeout(t *testing.T) {
	_, rt := rwRuntime(t)
	start := time.Now()
	_, err := rt.Exec(context.Background(), "sleep", []string{"300"}, eval.ExecOptions{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	hostexectest.WantErr(t, err, "timed out after 100ms")
	// The command sleeps for 300 s: only a timeout that does not kill it
	// exceeds this bound.
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("timeout took %s", d)
	}
	// A command that finishes in time is unaffected.
	res := hostexectest.Exec(t, rt, eval.ExecOptions{Timeout: time.Minute}, "echo", "hi")
	if string(res.Stdout) != "hi\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

func TestExecConcurrent(t *testing.T) {
	_, rt := rwRuntime(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			want := strings.Repeat("x", i*1000)
			res, err := rt.Exec(context.Background(), "printf", []string{"%s", want}, eval.ExecOptions{})
			if err != nil {
				errs <- err
				return
			}
			if string(res.Stdout) != want {
				errs <- errors.New("wrong output")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestReadOnlyAccess(t *testing.T) {
	ws := t.TempDir()
	hostexectest.WriteHost(t, filepath.Join(ws, "notes.txt"), "hello")
	h := open(t, options(ws, eval.ReadOnly, ".", "."))
	rt := h.Runtime()
	ctx := context.Background()

	_, err := rt.Exec(ctx, "touch", []string{"x"}, eval.ExecOptions{})
	if !errors.Is(err, eval.ErrReadOnly) {
		t.Fatalf("Exec err = %v, want eval.ErrReadOnly", err)
	}
	const msg = `local sandbox cannot enforce read-only access for host processes; use access = "read-write" or a provider that can`
	if err.Error() != msg {
		t.Fatalf("Exec err = %q", err)
	}
	_, err = rt.Spawn(ctx, "cat", nil, eval.ExecOptions{})
	if !errors.Is(err, eval.ErrReadOnly) || err.Error() != msg {
		t.Fatalf("Spawn err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a command ran under read-only access")
	}

	err = rt.WriteFile(ctx, "notes.txt", []byte("changed"))
	if !errors.Is(err, eval.ErrReadOnly) {
		t.Fatalf("WriteFile err = %v, want eval.ErrReadOnly", err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "notes.txt")); got != "hello" {
		t.Fatalf("file changed to %q", got)
	}

	// Reads and staging stay available.
	if b, err := rt.ReadFile(ctx, "notes.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if fi, err := rt.Stat(ctx, "notes.txt"); err != nil || fi.Kind != "file" || fi.Size != 5 {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	st, err := rt.CreateFileStaging(ctx)
	if err != nil {
		t.Fatalf("CreateFileStaging: %v", err)
	}
	if err := st.WriteFile(ctx, "skill/SKILL.md", []byte("# skill")); err != nil {
		t.Fatalf("staging WriteFile: %v", err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(st.Root(), "skill", "SKILL.md")); got != "# skill" {
		t.Fatalf("staged %q", got)
	}
}

func TestReadFileAndStat(t *testing.T) {
	ws, rt := rwRuntime(t, "dir")
	hostexectest.WriteHost(t, filepath.Join(ws, "dir", "a.txt"), "alpha")
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(ws, "dir", "a.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	b, err := rt.ReadFile(ctx, "dir/a.txt")
	if err != nil || string(b) != "alpha" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	empty := filepath.Join(ws, "empty")
	hostexectest.WriteHost(t, empty, "")
	if b, err := rt.ReadFile(ctx, "empty"); err != nil || len(b) != 0 {
		t.Fatalf("ReadFile(empty) = %q, %v", b, err)
	}
	fi, err := rt.Stat(ctx, "dir/a.txt")
	if err != nil || fi.Kind != "file" || fi.Size != 5 || !fi.ModTime.Equal(mtime) {
		t.Fatalf("Stat file = %+v, %v", fi, err)
	}
	if fi, err := rt.Stat(ctx, "dir"); err != nil || fi.Kind != "directory" {
		t.Fatalf("Stat dir = %+v, %v", fi, err)
	}
	if fi, err := rt.Stat(ctx, "."); err != nil || fi.Kind != "directory" {
		t.Fatalf("Stat root = %+v, %v", fi, err)
	}
	if fi, err := rt.Stat(ctx, "fifo"); err != nil || fi.Kind != "other" {
		t.Fatalf("Stat fifo = %+v, %v", fi, err)
	}
	_, err = rt.Stat(ctx, "missing")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat missing err = %v", err)
	}
	_, err = rt.ReadFile(ctx, "missing")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile missing err = %v", err)
	}
	_, err = rt.ReadFile(ctx, "dir")
	hostexectest.WantErr(t, err, "not a regular file")
	done := make(chan error, 1)
	go func() { _, err := rt.ReadFile(ctx, "fifo"); done <- err }()
	select {
	case err := <-done:
		hostexectest.WantErr(t, err, "not a regular file")
	case <-time.After(time.Minute):
		t.Fatal("ReadFile blocked on a FIFO")
	}
	for p, want := range map[string]string{"/etc/passwd": "must be relative", "../x": `".." segment`, `dir\a.txt`: "forward slashes", "dir/../../x": `".." segment`} {
		_, err := rt.ReadFile(ctx, p)
		hostexectest.WantErr(t, err, want)
		_, err = rt.Stat(ctx, p)
		hostexectest.WantErr(t, err, want)
		err = rt.WriteFile(ctx, p, nil)
		hostexectest.WantErr(t, err, want)
	}
}

func TestFilesBelowRoot(t *testing.T) {
	ws := t.TempDir()
	hostexectest.WriteHost(t, filepath.Join(ws, "top.txt"), "top")
	hostexectest.WriteHost(t, filepath.Join(ws, "repo", "in.txt"), "in")
	h := open(t, options(ws, eval.ReadWrite, "repo", "."))
	rt := h.Runtime()
	if b, err := rt.ReadFile(context.Background(), "in.txt"); err != nil || string(b) != "in" {
		t.Fatalf("ReadFile(in.txt) = %q, %v", b, err)
	}
	if _, err := rt.ReadFile(context.Background(), "top.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file above the root was found: %v", err)
	}
	if err := rt.WriteFile(context.Background(), "new.txt", []byte("n")); err != nil {
		t.Fatal(err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "repo", "new.txt")); got != "n" {
		t.Fatalf("wrote %q", got)
	}
}

func TestWriteFile(t *testing.T) {
	ws, rt := rwRuntime(t, "dir")
	ctx := context.Background()
	if err := rt.WriteFile(ctx, "a/b/c.txt", []byte("a much longer first content")); err != nil {
		t.Fatalf("WriteFile creating parents: %v", err)
	}
	if err := rt.WriteFile(ctx, "a/b/c.txt", []byte("short")); err != nil {
		t.Fatalf("WriteFile replacing: %v", err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "a", "b", "c.txt")); got != "short" {
		t.Fatalf("content = %q, want a whole replacement", got)
	}
	if err := rt.WriteFile(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "empty")); got != "" {
		t.Fatalf("empty = %q", got)
	}

	// An existing file keeps its permission bits.
	script := filepath.Join(ws, "run.sh")
	hostexectest.WriteHost(t, script, "#!/bin/sh\n")
	if err := os.Chmod(script, 0o751); err != nil {
		t.Fatal(err)
	}
	if err := rt.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\necho new\n")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(script); fi.Mode().Perm() != 0o751 {
		t.Fatalf("mode = %v, want 0751", fi.Mode().Perm())
	}

	// Non-file destinations.
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostexectest.WriteHost(t, filepath.Join(ws, "plain"), "p")
	for p, want := range map[string]string{
		"dir":         "not a regular file",
		".":           "not a regular file",
		"fifo":        "not a regular file",
		"plain/child": "not a directory",
		"":            "not a regular file",
	} {
		err := rt.WriteFile(ctx, p, []byte("x"))
		hostexectest.WantErr(t, err, want)
	}
	if fi, err := os.Stat(filepath.Join(ws, "dir")); err != nil || !fi.IsDir() {
		t.Fatal("the directory was replaced")
	}

	// No temporary file is left behind.
	entries, err := os.ReadDir(filepath.Join(ws, "a", "b"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("a/b holds %v (%v)", entries, err)
	}
	entries, _ = os.ReadDir(ws)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".aml-write-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

func TestWriteFileIsAtomic(t *testing.T) {
	_, rt := rwRuntime(t)
	ctx := context.Background()
	const size = 256 << 10
	contents := [][]byte{bytes.Repeat([]byte("a"), size), bytes.Repeat([]byte("b"), size)}
	if err := rt.WriteFile(ctx, "big", contents[0]); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := rt.ReadFile(ctx, "big")
			if err != nil {
				bad = err
				return
			}
			if !bytes.Equal(b, contents[0]) && !bytes.Equal(b, contents[1]) {
				bad = errors.New("a reader saw a partially written file")
				return
			}
		}
	})
	for i := range 200 {
		if err := rt.WriteFile(ctx, "big", contents[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
}

// TestSymlinkTricks covers the usual escapes: a link to a host file, a
// relative link climbing out, a dangling link, a symlinked ancestor
// directory, and writing through a link that stays inside.
func TestSymlinkTricks(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	hostexectest.WriteHost(t, filepath.Join(outside, "secret"), "host secret")
	hostexectest.WriteHost(t, filepath.Join(ws, "repo", "inside.txt"), "inside")
	hostexectest.Mkdir(t, filepath.Join(ws, "repo", "sub"))
	repo := filepath.Join(ws, "repo")
	hostexectest.Symlink(t, filepath.Join(outside, "secret"), filepath.Join(repo, "abs-escape"))
	hostexectest.Symlink(t, "../../"+filepath.Base(outside)+"/secret", filepath.Join(repo, "rel-escape"))
	hostexectest.Symlink(t, "../top.txt", filepath.Join(repo, "up-escape")) // inside the workspace, outside the root
	hostexectest.WriteHost(t, filepath.Join(ws, "top.txt"), "above the root")
	hostexectest.Symlink(t, filepath.Join(outside, "planted"), filepath.Join(repo, "dangling-out"))
	hostexectest.Symlink(t, "not-yet", filepath.Join(repo, "dangling-in"))
	hostexectest.Symlink(t, "inside.txt", filepath.Join(repo, "link-in"))
	hostexectest.Symlink(t, outside, filepath.Join(repo, "dir-escape"))
	hostexectest.Symlink(t, "sub", filepath.Join(repo, "dir-in"))
	hostexectest.Symlink(t, "loop", filepath.Join(repo, "loop"))

	h := open(t, options(ws, eval.ReadWrite, "repo", "."))
	rt := h.Runtime()
	ctx := context.Background()

	for _, p := range []string{"abs-escape", "rel-escape", "up-escape", "dir-escape/secret", "dangling-out", "dir-escape"} {
		_, err := rt.ReadFile(ctx, p)
		hostexectest.WantErr(t, err, "resolves outside its configured boundary")
		_, err = rt.Stat(ctx, p)
		hostexectest.WantErr(t, err, "resolves outside its configured boundary")
	}
	for p, want := range map[string]string{
		"abs-escape":             "resolves outside its configured boundary",
		"rel-escape":             "resolves outside its configured boundary",
		"up-escape":              "resolves outside its configured boundary",
		"dangling-out":           "resolves outside its configured boundary",
		"dir-escape/new.txt":     "resolves outside its configured boundary",
		"dir-escape/deep/new.go": "resolves outside its configured boundary",
		"dangling-in":            "destination is a symbolic link",
		"link-in":                "destination is a symbolic link",
		"loop":                   "too many levels of symbolic links",
	} {
		err := rt.WriteFile(ctx, p, []byte("pwned"))
		hostexectest.WantErr(t, err, want)
	}
	// Nothing outside changed or appeared, and the inside target is intact.
	if got := hostexectest.ReadHost(t, filepath.Join(outside, "secret")); got != "host secret" {
		t.Fatalf("host file changed to %q", got)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "top.txt")); got != "above the root" {
		t.Fatalf("file above the root changed to %q", got)
	}
	for _, name := range []string{"planted", "new.txt", "deep"} {
		if _, err := os.Lstat(filepath.Join(outside, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was created outside the root", name)
		}
	}
	if _, err := os.Lstat(filepath.Join(repo, "not-yet")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a dangling link was written through")
	}
	if got := hostexectest.ReadHost(t, filepath.Join(repo, "inside.txt")); got != "inside" {
		t.Fatalf("link target changed to %q", got)
	}

	// Links that stay inside the root resolve.
	if b, err := rt.ReadFile(ctx, "link-in"); err != nil || string(b) != "inside" {
		t.Fatalf("ReadFile(link-in) = %q, %v", b, err)
	}
	if err := rt.WriteFile(ctx, "dir-in/through.txt", []byte("ok")); err != nil {
		t.Fatalf("write below an inside directory link: %v", err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(repo, "sub", "through.txt")); got != "ok" {
		t.Fatalf("got %q", got)
	}

	// A link created by a command after acquisition is checked as well.
	if _, err := rt.Exec(ctx, "ln", []string{"-s", outside, "later"}, eval.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := rt.ReadFile(ctx, "later/secret")
	hostexectest.WantErr(t, err, "resolves outside its configured boundary")
	err = rt.WriteFile(ctx, "later/x", []byte("x"))
	hostexectest.WantErr(t, err, "resolves outside its configured boundary")
	_, err = rt.Exec(ctx, "pwd", nil, eval.ExecOptions{Cwd: "later"})
	hostexectest.WantErr(t, err, "resolves outside its configured boundary")
}

func TestFileStaging(t *testing.T) {
	ws, rt := rwRuntime(t)
	ctx := context.Background()
	outside := t.TempDir()
	st, err := rt.CreateFileStaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := rt.CreateFileStaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Root() == st2.Root() {
		t.Fatal("stagings share a directory")
	}
	if !filepath.IsAbs(st.Root()) || strings.HasPrefix(st.Root(), ws+"/") {
		t.Fatalf("staging %q is not a separate absolute directory", st.Root())
	}
	if fi, err := os.Stat(st.Root()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("staging directory is not private: %v %v", fi.Mode(), err)
	}
	if err := st.WriteFile(ctx, "a/b.txt", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteFile(ctx, "a/b.txt", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(st.Root(), "a", "b.txt")); got != "2" {
		t.Fatalf("staged %q", got)
	}
	hostexectest.Symlink(t, outside, filepath.Join(st.Root(), "out"))
	hostexectest.Symlink(t, filepath.Join(outside, "f"), filepath.Join(st.Root(), "dangling"))
	for p, want := range map[string]string{
		"../x":       `".." segment`,
		"/etc/x":     "must be relative",
		`a\b`:        "forward slashes",
		"out/x":      "resolves outside its configured boundary",
		"dangling":   "resolves outside its configured boundary",
		"a":          "not a regular file",
		"a/b.txt/no": "not a directory",
	} {
		hostexectest.WantErr(t, st.WriteFile(ctx, p, []byte("x")), want)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("staging wrote outside: %v", entries)
	}

	// Release is repeat-safe and removes the directory.
	for range 3 {
		if err := st.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(st.Root()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("released staging still exists")
	}
	if err := st.WriteFile(ctx, "x", nil); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("write after release: %v", err)
	}
	// The Host's release removes the stagings it still owns.
	if _, err := os.Stat(st2.Root()); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseRemovesStagings(t *testing.T) {
	ws := t.TempDir()
	h, err := hostexec.Open(context.Background(), options(ws, eval.ReadOnly, ".", "."))
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.Runtime().CreateFileStaging(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hostexectest.WriteHost(t, filepath.Join(ws, "kept"), "workspace files are not touched")
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Root()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("staging survived the Host")
	}
	if err := st.Release(context.Background()); err != nil {
		t.Fatalf("staging release after the Host's: %v", err)
	}
	if got := hostexectest.ReadHost(t, filepath.Join(ws, "kept")); got != "workspace files are not touched" {
		t.Fatal("release changed the workspace")
	}
}

func TestReleaseIdempotentAndConcurrent(t *testing.T) {
	ws := t.TempDir()
	h, err := hostexec.Open(context.Background(), options(ws, eval.ReadWrite, ".", "."))
	if err != nil {
		t.Fatal(err)
	}
	rt := h.Runtime()
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() { errs[i] = h.Release(context.Background()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := rt.Exec(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("Exec after release: %v", err)
	}
	if _, err := rt.Spawn(ctx, "true", nil, eval.ExecOptions{}); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("Spawn after release: %v", err)
	}
	if _, err := rt.ReadFile(ctx, "x"); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("ReadFile after release: %v", err)
	}
	if _, err := rt.Stat(ctx, "."); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("Stat after release: %v", err)
	}
	if err := rt.WriteFile(ctx, "x", nil); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("WriteFile after release: %v", err)
	}
	if _, err := rt.CreateFileStaging(ctx); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("CreateFileStaging after release: %v", err)
	}
}

func TestSpawnStreaming(t *testing.T) {
	_, rt := rwRuntime(t)
	proc, err := rt.Spawn(context.Background(), "sh", []string{"-c", `while read -r line; do echo "got $line"; done; echo bye >&2; exit 5`}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if proc.ID() == "" {
		t.Fatal("empty process id")
	}
	stdout := bufio.NewReader(proc.Stdout())
	for _, line := range []string{"one", "two words"} {
		if _, err := io.WriteString(proc.Stdin(), line+"\n"); err != nil {
			t.Fatal(err)
		}
		got, err := stdout.ReadString('\n')
		if err != nil || got != "got "+line+"\n" {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	if err := proc.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	stderr, err := io.ReadAll(proc.Stderr())
	if err != nil || string(stderr) != "bye\n" {
		t.Fatalf("stderr %q, %v", stderr, err)
	}
	for range 2 {
		code, err := proc.Wait()
		if code != 5 || err != nil {
			t.Fatalf("Wait = %d, %v", code, err)
		}
	}
	if err := proc.Kill(); err != nil {
		t.Fatalf("Kill after exit: %v", err)
	}
	if code, _ := proc.Wait(); code != 5 {
		t.Fatalf("Kill after exit changed the exit code to %d", code)
	}
	_, err = rt.Spawn(context.Background(), "cat", nil, eval.ExecOptions{Stdin: strings.NewReader("x")})
	hostexectest.WantErr(t, err, "ExecOptions.Stdin must be nil")
}

func TestSpawnTimeout(t *testing.T) {
	_, rt := rwRuntime(t)
	proc, err := rt.Spawn(context.Background(), "sleep", []string{"300"}, eval.ExecOptions{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	code, err := proc.Wait()
	if code != 128+int(syscall.SIGKILL) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %d, %v", code, err)
	}
}
