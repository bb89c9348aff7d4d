package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/pidline"
)

// ErrReleased is wrapped by operations on a released lease and by the
// error of a command the release killed.
var ErrReleased = errors.New("docker sandbox lease released")

// runtime is the eval.SandboxRuntime of a container.
type runtime struct {
	p                 *Provider
	b                 *box
	access            eval.Access
	rootPath, cwdPath string

	mu       sync.Mutex
	released bool
	procs    map[*process]struct{}
}

var _ eval.GuestRuntime = (*runtime)(nil)

// SharedDirectory implements eval.GuestRuntime: the read-only socket
// mount.
func (r *runtime) SharedDirectory() (host, guest string) { return r.b.sockets, SocketMount }

// RelayCommand implements eval.GuestRuntime: the mounted aml's mcp-relay,
// when the provider has one and it runs in the image.
func (r *runtime) RelayCommand() ([]string, error) {
	if r.p.opts.Relay == "" {
		return nil, errors.New("the docker sandbox has no aml executable to relay the tools through: the aml command mounts its own; embedders set docker.Options.Relay")
	}
	if r.b.relayErr != nil {
		return nil, r.b.relayErr
	}
	return []string{RelayPath, "mcp-relay"}, nil
}

// Access implements eval.SandboxRuntime.
func (r *runtime) Access() eval.Access { return r.access }

// Root implements eval.SandboxRuntime.
func (r *runtime) Root() string { return r.rootPath }

// Cwd implements eval.SandboxRuntime.
func (r *runtime) Cwd() string { return r.cwdPath }

// release kills every running command; later operations fail.
func (r *runtime) release() {
	r.mu.Lock()
	r.released = true
	procs := make([]*process, 0, len(r.procs))
	for p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		// Removing the container ends the process; the error says why.
		p.end(fmt.Errorf("command %q: %w", p.name, ErrReleased), false)
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

// guestDir returns the guest directory of a logical cwd ("" is the
// runtime's).
func (r *runtime) guestDir(cwd string) (string, error) {
	if cwd == "" {
		return r.b.cwd, nil
	}
	if strings.Contains(cwd, `\`) || path.IsAbs(cwd) {
		return "", fmt.Errorf("docker sandbox cwd %q must be a relative, slash-separated path", cwd)
	}
	clean := path.Clean(cwd)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("docker sandbox cwd %q escapes the sandbox root", cwd)
	}
	if _, err := r.b.host.Runtime().Stat(context.Background(), clean); err != nil {
		return "", fmt.Errorf("docker sandbox cwd %q: %w", cwd, err)
	}
	return path.Join(r.b.root, clean), nil
}

// execWrapper starts every command: it offers the command (and what it
// starts) to the kernel's OOM killer first, then says its process id and
// becomes the command. Raising one's own oom_score_adj needs no privilege.
// Without it, a command that outgrows the container's memory can have a
// second victim chosen while the first is still exiting, and under load
// that was the container's keeper: the lease was gone ("cannot exec in a
// stopped state"). Where /proc is not writable the command runs as before.
const execWrapper = `echo 1000 2>/dev/null >/proc/self/oom_score_adj; ` + pidline.Wrapper

// Exec implements eval.SandboxRuntime: one command to completion, its
// combined output bounded by the provider's MaxOutputBytes.
func (r *runtime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	var stdout, stderr bytes.Buffer
	var overflowed atomic.Bool
	bound := &bounded{max: r.p.maxOutput, onOverflow: func() { overflowed.Store(true) }}
	p, err := r.start(ctx, command, args, opts, false, bound.writer(&stdout), bound.writer(&stderr))
	if err != nil {
		return nil, err
	}
	// An overflow stops the output copy at once; the command is then
	// killed (not from inside the copy, which holds the output).
	<-p.outputDone
	if overflowed.Load() {
		p.kill(fmt.Errorf("docker sandbox command %q output exceeded %d bytes", command, r.p.maxOutput))
	}
	code, err := p.Wait()
	switch {
	case err != nil:
		return nil, err
	case p.copyErr != nil && !errors.Is(p.copyErr, errOverflow):
		return nil, fmt.Errorf("docker sandbox command %q: reading its output: %w", command, p.copyErr)
	}
	return &eval.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, nil
}

// Spawn implements eval.SandboxRuntime: a command with streaming stdin,
// stdout and stderr, which the caller must drain.
func (r *runtime) Spawn(ctx context.Context, command string, args []string, opts eval.ExecOptions) (eval.SandboxProcess, error) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p, err := r.start(ctx, command, args, opts, true, outW, errW)
	if err != nil {
		return nil, err
	}
	p.stdout, p.stderr = outR, errR
	go func() { _, _ = p.Wait() }() // ends the lifetime watch even when the caller never waits
	return p, nil
}

// start starts the command; its output goes to stdout and stderr (the
// wrapper's process id line taken off) until the command ends or is
// ended.
func (r *runtime) start(ctx context.Context, command string, args []string, opts eval.ExecOptions, spawn bool, stdout, stderr io.Writer) (_ *process, err error) {
	if err := r.usable(ctx); err != nil {
		return nil, err
	}
	if command == "" {
		return nil, errors.New("docker sandbox: empty command")
	}
	dir, err := r.guestDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	if err := checkEnv(opts.Env); err != nil {
		return nil, err
	}
	id := uuid.NewString()
	p := &process{r: r, name: command, id: "docker-exec:" + id, done: make(chan struct{}), outputDone: make(chan struct{})}
	p.waitCtx, p.cancelWait = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			p.cancelWait()
		}
	}()
	cfg := container.ExecOptions{
		Cmd:          append([]string{"/bin/sh", "-c", execWrapper, "aml-exec", command}, args...),
		Env:          envList(opts.Env),
		WorkingDir:   dir,
		AttachStdin:  spawn || opts.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	}
	created, err := engineCall(r.p, ctx, "create exec", func(c context.Context) (container.ExecCreateResponse, error) {
		return r.p.cli.ContainerExecCreate(c, r.b.id, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("docker sandbox command %q: %w", command, err)
	}
	p.execID = created.ID
	stream, err := attach(r.p, ctx, "attach exec", func(c context.Context) (types.HijackedResponse, error) {
		return r.p.cli.ContainerExecAttach(c, created.ID, container.ExecAttachOptions{})
	})
	if err != nil {
		return nil, fmt.Errorf("docker sandbox command %q: %w", command, err)
	}
	p.stream = stream
	p.out, p.errOut = &gate{w: stdout}, &gate{w: stderr}
	for _, w := range []io.Writer{stdout, stderr} {
		if pw, ok := w.(*io.PipeWriter); ok {
			p.pipes = append(p.pipes, pw)
		}
	}
	go p.demux()
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		stream.Close()
		return nil, ErrReleased
	}
	r.procs[p] = struct{}{}
	r.mu.Unlock()

	switch {
	case spawn:
		p.stdin = &stdinWriter{p: p}
	case opts.Stdin != nil:
		go func() {
			_, _ = io.Copy(stream.Conn, opts.Stdin)
			_ = stream.CloseWrite()
		}()
	default:
		_ = stream.CloseWrite()
	}
	// The context (and the timeout) bound the command's lifetime.
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		wctx, cancel = context.WithTimeoutCause(ctx, opts.Timeout, fmt.Errorf("docker sandbox command %q timed out after %v: %w", command, opts.Timeout, context.DeadlineExceeded))
	}
	go func() {
		defer cancel()
		select {
		case <-wctx.Done():
			p.kill(context.Cause(wctx))
		case <-p.done:
		}
	}()
	return p, nil
}

// ReadFile implements eval.SandboxRuntime from the host side of the
// mount.
func (r *runtime) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := r.usable(ctx); err != nil {
		return nil, err
	}
	return r.b.host.Runtime().ReadFile(ctx, p)
}

// OpenFile implements eval.FileOpener from the host side of the mount.
func (r *runtime) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := r.usable(ctx); err != nil {
		return nil, err
	}
	return r.b.host.Runtime().OpenFile(ctx, p)
}

var _ eval.FileOpener = (*runtime)(nil)

// Stat implements eval.SandboxRuntime from the host side of the mount.
func (r *runtime) Stat(ctx context.Context, p string) (eval.FileInfo, error) {
	if err := r.usable(ctx); err != nil {
		return eval.FileInfo{}, err
	}
	return r.b.host.Runtime().Stat(ctx, p)
}

// WriteFile implements eval.SandboxRuntime from the host side of the
// mount (a temporary file renamed over the destination).
func (r *runtime) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := r.usable(ctx); err != nil {
		return err
	}
	if r.access != eval.ReadWrite {
		return fmt.Errorf("docker sandbox write %q: the workspace is mounted read-only: %w", p, eval.ErrReadOnly)
	}
	return r.b.host.Runtime().WriteFile(ctx, p, data)
}

// CreateFileStaging implements eval.SandboxRuntime: a new directory below
// the staging mount, writable under either access.
func (r *runtime) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	if err := r.usable(ctx); err != nil {
		return nil, err
	}
	// The staging is made and opened through the handle the lease took
	// before the container existed, and its mode set on the open
	// directory: the container may swap the new name for a link at any
	// moment, and the host must not follow it.
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "s-" + hex.EncodeToString(rnd[:])
	if err := r.b.stagingRoot.Mkdir(name, 0o755); err != nil {
		return nil, fmt.Errorf("docker sandbox staging: %w", err)
	}
	root, err := r.b.stagingRoot.OpenRoot(name)
	if err == nil {
		err = fchmod(root, 0o755) // the container's user reads stagings
	}
	if err != nil {
		if root != nil {
			root.Close()
		}
		_ = r.b.stagingRoot.RemoveAll(name)
		return nil, fmt.Errorf("docker sandbox staging: %w", err)
	}
	return &staging{r: r, name: name, root: root, guest: path.Join(StagingMount, name)}, nil
}

// fchmod sets the mode of the directory root holds, on its handle.
func fchmod(root *os.Root, mode os.FileMode) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}

// staging is a file staging below the staging mount.
type staging struct {
	r *runtime
	// name is the staging's name below the staging mount; root a handle
	// on it, opened when it was made.
	name     string
	root     *os.Root
	guest    string
	once     sync.Once
	released atomic.Bool
}

// Root implements eval.FileStaging: the directory as the container sees
// it.
func (s *staging) Root() string { return s.guest }

// WriteFile implements eval.FileStaging, confined below the staging.
func (s *staging) WriteFile(ctx context.Context, rel string, data []byte) error {
	if err := s.r.usable(ctx); err != nil {
		return err
	}
	if s.released.Load() {
		return fmt.Errorf("docker sandbox staging %s: %w", s.guest, ErrReleased)
	}
	if rel == "" || path.IsAbs(rel) || strings.Contains(rel, `\`) {
		return fmt.Errorf("docker sandbox staging path %q must be relative and slash-separated", rel)
	}
	root := s.root
	if d := path.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("docker sandbox staging %q: %w", rel, err)
		}
	}
	if err := root.WriteFile(rel, data, 0o644); err != nil {
		return fmt.Errorf("docker sandbox staging %q: %w", rel, err)
	}
	return nil
}

// Release implements eval.FileStaging; it is repeat-safe.
func (s *staging) Release(context.Context) error {
	var err error
	s.once.Do(func() {
		s.released.Store(true)
		_ = s.root.Close()
		err = s.r.b.stagingRoot.RemoveAll(s.name)
	})
	return err
}

// process is one docker exec.
type process struct {
	r      *runtime
	name   string
	id     string
	execID string
	// pid is the command's process id in the container, from the
	// wrapper's first stderr line (0 when the stream ended without it).
	pid    pidline.ID
	stream types.HijackedResponse
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader

	// waitCtx bounds Wait's inspections; cancelWait ends them when the
	// command is ended.
	waitCtx    context.Context
	cancelWait context.CancelFunc

	killOnce sync.Once
	causeMu  sync.Mutex
	cause    error
	// out and errOut pass the output on until the command is ended.
	out, errOut *gate
	// pipes are a spawned command's output pipes, closed at its end.
	pipes []*io.PipeWriter
	// copyErr is why the output copy stopped early, if it did.
	copyErr error
	// outputDone is closed when the output has ended: the stream's end,
	// or the command's.
	outputDone chan struct{}
	outputOnce sync.Once
	waitOnce   sync.Once
	code       int
	err        error
	done       chan struct{}
}

// ID implements eval.SandboxProcess.
func (p *process) ID() string { return p.id }

// Stdin implements eval.SandboxProcess.
func (p *process) Stdin() io.WriteCloser { return p.stdin }

// Stdout implements eval.SandboxProcess.
func (p *process) Stdout() io.Reader { return p.stdout }

// Stderr implements eval.SandboxProcess.
func (p *process) Stderr() io.Reader { return p.stderr }

// Kill implements eval.SandboxProcess: the command's process group in
// the container is killed; repeat-safe.
func (p *process) Kill() error {
	p.kill(fmt.Errorf("docker sandbox command %q was killed", p.name))
	return nil
}

// kill ends the command's process group with cause as its error.
func (p *process) kill(cause error) { p.end(cause, true) }

// end records cause as the command's error and ends its output at once;
// with signal, it also kills the command's process group in the
// container. The kill needs the command's process id, which its stream
// brings: the stream stays open until it came (or the engine timeout
// passed), so that a command that started late is still killed. A frozen
// engine holds end for killWait at most.
func (p *process) end(cause error, signal bool) {
	p.killOnce.Do(func() {
		p.causeMu.Lock()
		p.cause = cause
		p.causeMu.Unlock()
		// The pipes first: a write blocked on a spawned command's pipe
		// that nobody reads returns, and the gates can be detached.
		p.finishOutput(nil)
		p.out.detach()
		p.errOut.detach()
		p.cancelWait()
		killed := make(chan struct{})
		go func() {
			defer close(killed)
			defer p.stream.Close()
			if !signal {
				return
			}
			t := time.NewTimer(p.r.p.engineTimeout)
			defer t.Stop()
			select {
			case <-p.pid.Ready():
			case <-t.C:
			}
			if pid := p.pid.Load(); pid > 0 {
				p.signal(pid)
			}
		}()
		t := time.NewTimer(killWait)
		defer t.Stop()
		select {
		case <-killed:
		case <-t.C:
		}
	})
}

// demux copies the stream's output to the gates until it ends.
func (p *process) demux() {
	_, err := stdcopy.StdCopy(p.out, &pidline.Writer{Dst: p.errOut, Set: p.pid.Set}, p.stream.Reader)
	p.pid.Set(nil)
	p.finishOutput(err)
}

// finishOutput ends the output once: err is why the copy stopped, nil
// for its end.
func (p *process) finishOutput(err error) {
	p.outputOnce.Do(func() {
		p.copyErr = err
		if err == nil {
			err = io.EOF
		}
		for _, w := range p.pipes {
			w.CloseWithError(err)
		}
		close(p.outputDone)
	})
}

// gate passes writes on until it is detached, then takes them without
// passing them on: the command's output is still read (its process id
// line may yet come) but no longer reaches a caller that has moved on.
type gate struct {
	mu       sync.Mutex
	w        io.Writer
	detached bool
}

func (g *gate) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.detached {
		return len(b), nil
	}
	return g.w.Write(b)
}

// detach stops passing writes on; no write is under way when it returns.
func (g *gate) detach() {
	g.mu.Lock()
	g.detached = true
	g.mu.Unlock()
}

// signal kills the process group of pid in the container.
func (p *process) signal(pid int64) {
	cmd := pidline.KillArgv(pid)
	ctx := context.Background()
	ex, err := engineCall(p.r.p, ctx, "create exec (kill)", func(c context.Context) (container.ExecCreateResponse, error) {
		return p.r.p.cli.ContainerExecCreate(c, p.r.b.id, container.ExecOptions{Cmd: cmd, User: "0"})
	})
	if err == nil {
		_ = engineDo(p.r.p, ctx, "start exec (kill)", func(c context.Context) error {
			return p.r.p.cli.ContainerExecStart(c, ex.ID, container.ExecStartOptions{Detach: true})
		})
	}
}

// killed returns the error the command was ended with, or nil.
func (p *process) killed() error {
	p.causeMu.Lock()
	defer p.causeMu.Unlock()
	return p.cause
}

// Wait implements eval.SandboxProcess: it waits for the exit and returns
// the exit code (128+signal for a signal); repeat-safe.
func (p *process) Wait() (int, error) {
	p.waitOnce.Do(func() {
		defer close(p.done)
		defer p.cancelWait()
		defer func() {
			p.r.mu.Lock()
			delete(p.r.procs, p)
			p.r.mu.Unlock()
		}()
		<-p.outputDone // the output ends when the command does (or is ended)
		// An inspection is cut when the command is ended: its exit code
		// no longer matters, and a frozen engine must not hold the end.
		for delay := time.Millisecond; p.killed() == nil; delay = min(2*delay, 100*time.Millisecond) {
			ins, err := engineCall(p.r.p, p.waitCtx, "inspect exec", func(c context.Context) (container.ExecInspect, error) {
				return p.r.p.cli.ContainerExecInspect(c, p.execID)
			})
			if err != nil {
				if p.killed() == nil {
					p.err = fmt.Errorf("docker sandbox command %q: %w", p.name, err)
				}
				break
			}
			if !ins.Running {
				p.code = ins.ExitCode
				break
			}
			if p.killed() != nil {
				break // killed, and its container may be gone already
			}
			time.Sleep(delay)
		}
		if cause := p.killed(); cause != nil {
			p.err = cause
		}
	})
	return p.code, p.err
}

// stdinWriter writes a spawned process's stdin; Close ends it.
type stdinWriter struct{ p *process }

func (w *stdinWriter) Write(b []byte) (int, error) { return w.p.stream.Conn.Write(b) }
func (w *stdinWriter) Close() error                { return w.p.stream.CloseWrite() }

// errOverflow stops the output copy of an Exec whose output exceeded the
// bound.
var errOverflow = errors.New("output bound exceeded")

// bounded counts the combined output of an Exec.
type bounded struct {
	max        int64
	total      atomic.Int64
	onOverflow func()
	once       sync.Once
}

func (b *bounded) writer(buf *bytes.Buffer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if b.total.Add(int64(len(p))) > b.max {
			b.once.Do(b.onOverflow)
			return 0, errOverflow
		}
		return buf.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
