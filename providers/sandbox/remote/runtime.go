package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/scratch"
	"github.com/aml-go/aml/internal/tunnel"
)

// ErrReleased is wrapped by operations on a released lease and by the
// error of a command the release killed.
var ErrReleased = errors.New("remote sandbox lease released")

// readOnlyError wraps eval.ErrReadOnly with the provider's own text.
type readOnlyError struct{ msg string }

func (e *readOnlyError) Error() string { return e.msg }
func (e *readOnlyError) Unwrap() error { return eval.ErrReadOnly }

// runtime is the eval.SandboxRuntime of a remote sandbox.
type runtime struct {
	p                 *Provider
	b                 *box
	access            eval.Access
	rootPath, cwdPath string

	mu       sync.Mutex
	released bool
	procs    map[*process]struct{}
	stagings []*staging
	tunnel   guestTunnel
}

var _ eval.FileOpener = (*runtime)(nil)

// Access implements eval.SandboxRuntime.
func (r *runtime) Access() eval.Access { return r.access }

// Root implements eval.SandboxRuntime.
func (r *runtime) Root() string { return r.rootPath }

// Cwd implements eval.SandboxRuntime.
func (r *runtime) Cwd() string { return r.cwdPath }

// release kills every running command; later operations fail. It is
// repeat-safe.
func (r *runtime) release() {
	r.mu.Lock()
	r.released = true
	procs := make([]*process, 0, len(r.procs))
	for p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.end(fmt.Errorf("command %q: %w", p.name, ErrReleased))
	}
}

// releaseStagings removes the stagings still there, before the release
// reconciles.
func (r *runtime) releaseStagings(ctx context.Context) {
	r.mu.Lock()
	stagings := r.stagings
	r.stagings = nil
	r.mu.Unlock()
	for _, s := range stagings {
		_ = s.remove(ctx)
	}
}

func (r *runtime) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return ErrReleased
	}
	return nil
}

// guestPath maps a logical path below the root to its guest path.
func (r *runtime) guestPath(p, label string) (string, error) {
	if p == "" {
		return r.b.root, nil
	}
	switch {
	case strings.IndexByte(p, 0) >= 0, strings.Contains(p, `\`), path.IsAbs(p):
		return "", fmt.Errorf("%s sandbox %s %q must be a relative, slash-separated path", r.p.Name(), label, p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%s sandbox %s %q escapes the sandbox root", r.p.Name(), label, p)
	}
	return path.Join(r.b.root, clean), nil
}

// execDir is the guest directory of a command's cwd ("" is the lease's).
func (r *runtime) execDir(cwd string) (string, error) {
	if cwd == "" {
		return r.b.cwd, nil
	}
	return r.guestPath(cwd, "cwd")
}

func (r *runtime) readOnlyExec() error {
	return &readOnlyError{msg: fmt.Sprintf(`%s sandbox cannot execute under read-only access: the workspace is transferred, not mounted read-only; use access = "read-write"`, r.p.Name())}
}

// Exec implements eval.SandboxRuntime: one command to completion, its
// combined output bounded by the provider's MaxOutputBytes. Commands are
// refused under read-only access.
func (r *runtime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	if r.access != eval.ReadWrite {
		return nil, r.readOnlyExec()
	}
	dir, err := r.execDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	return r.run(ctx, append([]string{command}, args...), dir, &opts, opts.Timeout)
}

// run runs argv in dir to completion (setup and transfers use it under
// either access).
func (r *runtime) run(ctx context.Context, argv []string, dir string, opts *eval.ExecOptions, timeout time.Duration) (*eval.ExecResult, error) {
	var env map[string]string
	var stdin io.Reader
	internal := opts == nil
	if opts != nil {
		env, stdin = opts.Env, opts.Stdin
	}
	p, err := r.start(ctx, argv, dir, env, stdin != nil, timeout, internal)
	if err != nil {
		return nil, err
	}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(p.proc.Stdin(), stdin)
			_ = p.proc.Stdin().Close()
		}()
	}
	var stdout, stderr bytes.Buffer
	var total atomic.Int64
	bounded := func(dst *bytes.Buffer, src io.Reader) error {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if total.Add(int64(n)) > r.p.maxOutput {
					p.end(fmt.Errorf("%s sandbox command %q output exceeded %d bytes", r.p.Name(), argv[0], r.p.maxOutput))
					_, _ = io.Copy(io.Discard, src)
					return nil
				}
				dst.Write(buf[:n])
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- bounded(&stderr, p.proc.Stderr()) }()
	outErr := bounded(&stdout, p.proc.Stdout())
	errErr := <-errc
	code, err := p.Wait()
	switch {
	case err != nil:
		return nil, err
	case outErr != nil:
		return nil, fmt.Errorf("%s sandbox command %q: reading its output: %w", r.p.Name(), argv[0], outErr)
	case errErr != nil:
		return nil, fmt.Errorf("%s sandbox command %q: reading its output: %w", r.p.Name(), argv[0], errErr)
	}
	return &eval.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, nil
}

// Spawn implements eval.SandboxRuntime: a command with streaming stdin,
// stdout and stderr, which the caller must drain. Refused under read-only
// access.
func (r *runtime) Spawn(ctx context.Context, command string, args []string, opts eval.ExecOptions) (eval.SandboxProcess, error) {
	if r.access != eval.ReadWrite {
		return nil, r.readOnlyExec()
	}
	dir, err := r.execDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	return r.start(ctx, append([]string{command}, args...), dir, opts.Env, true, opts.Timeout, false)
}

// start starts argv; the context (and the timeout) bound its lifetime.
// An internal command (the provider's own: setup, transfers, stagings)
// also runs while the lease is being released.
func (r *runtime) start(ctx context.Context, argv []string, dir string, env map[string]string, stdin bool, timeout time.Duration, internal bool) (*process, error) {
	if internal {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
	} else if err := r.usable(ctx); err != nil {
		return nil, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%s sandbox: empty command", r.p.Name())
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%s sandbox environment variable %q is invalid", r.p.Name(), k)
		}
	}
	// The service's own bound is a backstop for a host that is gone: it
	// comes a grace after the provider's kill, so that a command that
	// runs too long is always reported as timed out, whichever kill
	// landed first.
	backstop := time.Duration(0)
	if timeout > 0 {
		backstop = timeout + serviceTimeoutGrace
	}
	started := time.Now()
	proc, err := r.b.m.Start(ctx, Command{Args: argv, Dir: dir, Env: env, Stdin: stdin, Timeout: backstop})
	if err != nil {
		return nil, fmt.Errorf("%s sandbox command %q: %w", r.p.Name(), argv[0], err)
	}
	p := &process{r: r, proc: proc, name: argv[0], id: r.p.Name() + "-process:" + uuid.NewString(), done: make(chan struct{})}
	r.mu.Lock()
	if r.released && !internal {
		r.mu.Unlock()
		_ = proc.Kill()
		return nil, ErrReleased
	}
	r.procs[p] = struct{}{}
	r.mu.Unlock()
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		p.timedOut = fmt.Errorf("%s sandbox command %q timed out after %v: %w", r.p.Name(), argv[0], timeout, context.DeadlineExceeded)
		p.deadline = started.Add(timeout)
		wctx, cancel = context.WithDeadlineCause(ctx, p.deadline, p.timedOut)
	}
	go func() {
		defer cancel()
		select {
		case <-wctx.Done():
			p.end(context.Cause(wctx))
		case <-p.done:
		}
	}()
	return p, nil
}

// process is one remote process.
type process struct {
	r    *runtime
	proc Process
	name string
	id   string

	endOnce  sync.Once
	causeMu  sync.Mutex
	cause    error
	waitOnce sync.Once
	code     int
	err      error
	done     chan struct{}
	// deadline and timedOut, when the command has a timeout: a command
	// that ends after its deadline without another cause timed out (the
	// service's backstop may have ended it first).
	deadline time.Time
	timedOut error
}

// serviceTimeoutGrace is how long after the provider's own kill the
// service's timeout ends a command.
const serviceTimeoutGrace = time.Second

// ID implements eval.SandboxProcess.
func (p *process) ID() string { return p.id }

// Stdin implements eval.SandboxProcess.
func (p *process) Stdin() io.WriteCloser { return p.proc.Stdin() }

// Stdout implements eval.SandboxProcess.
func (p *process) Stdout() io.Reader { return p.proc.Stdout() }

// Stderr implements eval.SandboxProcess.
func (p *process) Stderr() io.Reader { return p.proc.Stderr() }

// Kill implements eval.SandboxProcess; repeat-safe.
func (p *process) Kill() error {
	p.end(fmt.Errorf("%s sandbox command %q was killed", p.r.p.Name(), p.name))
	return nil
}

// end records cause as the command's error and kills it.
func (p *process) end(cause error) {
	p.endOnce.Do(func() {
		p.causeMu.Lock()
		p.cause = cause
		p.causeMu.Unlock()
		_ = p.proc.Kill()
	})
}

func (p *process) killed() error {
	p.causeMu.Lock()
	defer p.causeMu.Unlock()
	return p.cause
}

// Wait implements eval.SandboxProcess: the exit status, or the error the
// command was ended with; repeat-safe.
func (p *process) Wait() (int, error) {
	p.waitOnce.Do(func() {
		defer close(p.done)
		p.code, p.err = p.proc.Wait()
		if p.timedOut != nil && !time.Now().Before(p.deadline) {
			p.end(p.timedOut)
		}
		if cause := p.killed(); cause != nil {
			p.err = cause
		} else if p.err != nil {
			p.err = fmt.Errorf("%s sandbox command %q: %w", p.r.p.Name(), p.name, p.err)
		}
		p.r.mu.Lock()
		delete(p.r.procs, p)
		p.r.mu.Unlock()
	})
	return p.code, p.err
}

// shell runs a transfer or file command of the provider (under either
// access) and fails on a non-zero exit with its stderr.
func (r *runtime) shell(ctx context.Context, what, script string, args ...string) error {
	res, err := r.run(ctx, append([]string{"sh", "-c", script, "aml"}, args...), "", nil, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: exit status %d: %s", what, res.ExitCode, tail(res.Stderr, res.Stdout))
	}
	return nil
}

// ReadFile implements eval.SandboxRuntime: the file is downloaded.
func (r *runtime) ReadFile(ctx context.Context, p string) ([]byte, error) {
	rc, err := r.OpenFile(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// OpenFile implements eval.FileOpener: the download, streamed.
func (r *runtime) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := r.usable(ctx); err != nil {
		return nil, err
	}
	g, err := r.guestPath(p, "path")
	if err != nil {
		return nil, err
	}
	rc, err := r.b.m.Download(ctx, g)
	if err != nil {
		return nil, fmt.Errorf("%s sandbox read %q: %w", r.p.Name(), p, err)
	}
	return rc, nil
}

// statScript prints the kind of $1 ("file" with its size, "directory",
// "other" or "missing").
const statScript = `if [ -d "$1" ]; then echo directory; elif [ -f "$1" ]; then echo file; wc -c < "$1"; elif [ -e "$1" ]; then echo other; else echo missing; fi`

// Stat implements eval.SandboxRuntime with a command in the sandbox (the
// services' file APIs differ); the modification time is not known.
func (r *runtime) Stat(ctx context.Context, p string) (eval.FileInfo, error) {
	if err := r.usable(ctx); err != nil {
		return eval.FileInfo{}, err
	}
	g, err := r.guestPath(p, "path")
	if err != nil {
		return eval.FileInfo{}, err
	}
	res, err := r.run(ctx, []string{"sh", "-c", statScript, "aml", g}, "", nil, 0)
	if err != nil {
		return eval.FileInfo{}, fmt.Errorf("%s sandbox stat %q: %w", r.p.Name(), p, err)
	}
	fields := strings.Fields(string(res.Stdout))
	if res.ExitCode != 0 || len(fields) == 0 {
		return eval.FileInfo{}, fmt.Errorf("%s sandbox stat %q: exit status %d: %s", r.p.Name(), p, res.ExitCode, tail(res.Stderr, res.Stdout))
	}
	switch fields[0] {
	case "missing":
		return eval.FileInfo{}, fmt.Errorf("%s sandbox stat %q: %w", r.p.Name(), p, fs.ErrNotExist)
	case "file":
		if len(fields) < 2 {
			return eval.FileInfo{}, fmt.Errorf("%s sandbox stat %q: no size", r.p.Name(), p)
		}
		size, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return eval.FileInfo{}, fmt.Errorf("%s sandbox stat %q: size %q", r.p.Name(), p, fields[1])
		}
		return eval.FileInfo{Kind: "file", Size: size}, nil
	case "directory", "other":
		return eval.FileInfo{Kind: eval.FileKind(fields[0])}, nil
	}
	return eval.FileInfo{}, fmt.Errorf("%s sandbox stat %q: unexpected %q", r.p.Name(), p, res.Stdout)
}

// WriteFile implements eval.SandboxRuntime: parents are made and the file
// uploaded; refused under read-only access.
func (r *runtime) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := r.usable(ctx); err != nil {
		return err
	}
	if r.access != eval.ReadWrite {
		return &readOnlyError{msg: fmt.Sprintf("%s sandbox write %q: the lease is read-only", r.p.Name(), p)}
	}
	g, err := r.guestPath(p, "path")
	if err != nil {
		return err
	}
	return r.upload(ctx, g, data)
}

// upload makes the parents of guest path g, then uploads data to it.
func (r *runtime) upload(ctx context.Context, g string, data []byte) error {
	if err := r.shell(ctx, "making "+path.Dir(g), `mkdir -p -- "$1"`, path.Dir(g)); err != nil {
		return err
	}
	if err := r.b.m.Upload(ctx, g, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%s sandbox write %q: %w", r.p.Name(), g, err)
	}
	return nil
}

// CreateFileStaging implements eval.SandboxRuntime: a unique directory
// below /tmp in the sandbox, writable under either access and removed
// before the release reconciles.
func (r *runtime) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	if err := r.usable(ctx); err != nil {
		return nil, err
	}
	s := &staging{r: r, dir: "/tmp/aml-staging-" + uuid.NewString()}
	if err := r.shell(ctx, "making a staging", `mkdir -p -- "$1"`, s.dir); err != nil {
		return nil, fmt.Errorf("%s sandbox staging: %w", r.p.Name(), err)
	}
	r.mu.Lock()
	r.stagings = append(r.stagings, s)
	r.mu.Unlock()
	return s, nil
}

// staging is a file staging in the sandbox.
type staging struct {
	r    *runtime
	dir  string
	once sync.Once
	err  error
}

// Root implements eval.FileStaging.
func (s *staging) Root() string { return s.dir }

// WriteFile implements eval.FileStaging, confined below the staging.
func (s *staging) WriteFile(ctx context.Context, rel string, data []byte) error {
	if err := s.r.usable(ctx); err != nil {
		return err
	}
	clean := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || strings.Contains(rel, `\`) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("%s sandbox staging path %q must be relative and slash-separated", s.r.p.Name(), rel)
	}
	return s.r.upload(ctx, path.Join(s.dir, clean), data)
}

// Release implements eval.FileStaging; it is repeat-safe.
func (s *staging) Release(ctx context.Context) error { return s.remove(ctx) }

func (s *staging) remove(ctx context.Context) error {
	s.once.Do(func() {
		s.err = s.r.shell(context.WithoutCancel(ctx), "removing a staging", `rm -rf -- "$1"`, s.dir)
	})
	return s.err
}

var _ eval.GuestRuntime = (*runtime)(nil)

// tunnelWait bounds how long the tunnel's guest end may take to start.
const tunnelWait = 30 * time.Second

// guestTunnel is the tunnel of a runtime: a host directory where the tool
// bridge makes its socket, the guest directory where the sandbox sees it,
// and the guest end's process (aml sandbox-tunnel) that carries its
// connections.
type guestTunnel struct {
	once        sync.Once
	err         error
	host, guest string
	stop        context.CancelFunc
	wait        func() error
}

// RelayCommand implements eval.GuestRuntime: the image's aml, whose
// mcp-relay reaches the tool bridge through the tunnel, which it starts
// on first use.
func (r *runtime) RelayCommand() ([]string, error) {
	r.tunnel.once.Do(func() { r.tunnel.err = r.startTunnel() })
	if r.tunnel.err != nil {
		return nil, r.tunnel.err
	}
	return []string{r.p.opts.Relay, "mcp-relay"}, nil
}

// SharedDirectory implements eval.GuestRuntime: a private host directory
// and the guest directory the tunnel listens in; a socket the host makes
// in the first is served in the second. The guest cannot write the host
// directory at all.
func (r *runtime) SharedDirectory() (host, guest string) {
	r.tunnel.once.Do(func() { r.tunnel.err = r.startTunnel() })
	return r.tunnel.host, r.tunnel.guest
}

// startTunnel starts the guest end in the sandbox and the host end here.
func (r *runtime) startTunnel() error {
	host, err := scratch.MkdirTemp("aml-remote-")
	if err != nil {
		return err
	}
	guest := "/tmp/aml-run-" + uuid.NewString()
	relay := r.p.opts.Relay
	fail := func(err error) error {
		_ = scratch.RemoveAll(host)
		return fmt.Errorf("the %s sandbox cannot run the tool relay %s (%w): the image needs the aml executable, a static build (CGO_ENABLED=0) or one whose libraries it has (%s_sandbox(relay = ...) names its path)", r.p.Name(), relay, err, r.p.Name())
	}
	p, err := r.start(context.Background(), []string{relay, "sandbox-tunnel", guest}, "", nil, true, 0, true)
	if err != nil {
		return fail(err)
	}
	var stderr bytes.Buffer
	var mu sync.Mutex
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := p.Stderr().Read(buf)
			mu.Lock()
			if stderr.Len() < 4096 {
				stderr.Write(buf[:n])
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := tunnel.Start(ctx, host, 20*time.Millisecond, p.Stdin(), p.Stdout(), tunnelWait)
	if err != nil {
		cancel()
		p.end(fmt.Errorf("the tunnel did not start: %w", err))
		code, _ := p.proc.Wait()
		_, _ = p.Wait()
		mu.Lock()
		out := strings.TrimSpace(stderr.String())
		mu.Unlock()
		return fail(fmt.Errorf("exit status %d: %s", code, out))
	}
	r.tunnel.host, r.tunnel.guest, r.tunnel.stop, r.tunnel.wait = host, guest, cancel, wait
	go func() { _, _ = p.Wait() }() // it runs until the release kills it
	return nil
}

// stopTunnel ends the host end and removes its directory (the guest end
// ends with the sandbox).
func (r *runtime) stopTunnel() {
	r.tunnel.once.Do(func() { r.tunnel.err = ErrReleased })
	if r.tunnel.stop != nil {
		r.tunnel.stop()
		_ = scratch.RemoveAll(r.tunnel.host)
	}
}
