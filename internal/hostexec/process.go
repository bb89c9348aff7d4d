package hostexec

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
)

// ioGrace bounds how long Exec keeps reading output after the process
// group was killed or exited: a process that left the group (setsid) may
// still hold the pipes open.
const ioGrace = time.Second

// process is one started host command, the leader of its own process
// group. Its methods are safe for concurrent use; as an
// eval.SandboxProcess it is what Spawn returns.
type process struct {
	id string
	// mark is the value of procscope.ProcessVar in the command and all
	// its descendants.
	mark string
	name string // the command, for errors
	host *Host
	cmd  *exec.Cmd
	pgid int

	stdin  *os.File // parent's write end of the stdin pipe, or nil
	stdout *os.File // parent's read end of the stdout pipe
	stderr *os.File // parent's read end of the stderr pipe

	stopCtx   func() bool
	timer     *time.Timer
	closeOnce sync.Once

	// done is closed once the leader was reaped; the fields below are
	// final then.
	done chan struct{}

	mu       sync.Mutex
	reaped   bool
	killed   bool
	cause    error // why the provider killed the group; nil for Kill
	exitCode int
	waitErr  error
}

var _ eval.SandboxProcess = (*process)(nil)

// start starts command in dir as the leader of a new process group and
// tracks it in the host. With spawn, stdin is a pipe kept for the
// caller; otherwise stdin is opts.Stdin (or empty).
func (h *Host) start(ctx context.Context, command string, args []string, dir string, opts eval.ExecOptions, spawn bool) (_ *process, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local sandbox command %q cancelled: %w", command, context.Cause(ctx))
	}
	if command == "" || strings.IndexByte(command, 0) >= 0 {
		return nil, fmt.Errorf("local sandbox command %q must be non-empty without NUL bytes", command)
	}
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("local sandbox command %q: argument %q contains a NUL byte", command, a)
		}
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("local sandbox command %q: negative timeout %s", command, opts.Timeout)
	}
	p := &process{host: h, name: command, done: make(chan struct{}), mark: uuid.NewString()}
	env, err := commandEnv(opts.Env, procscope.Env(p.mark))
	if err != nil {
		return nil, err
	}

	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
		if err != nil {
			p.closePipes()
		}
	}()
	var outW, errW *os.File
	if p.stdout, outW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("local sandbox command %q: %w", command, err)
	}
	childEnds = append(childEnds, outW)
	if p.stderr, errW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("local sandbox command %q: %w", command, err)
	}
	childEnds = append(childEnds, errW)

	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = outW
	cmd.Stderr = errW
	setProcessGroup(cmd)
	var copyIn io.Reader
	switch in := opts.Stdin.(type) {
	case nil:
		if spawn {
			var inR *os.File
			if inR, p.stdin, err = os.Pipe(); err != nil {
				return nil, fmt.Errorf("local sandbox command %q: %w", command, err)
			}
			childEnds = append(childEnds, inR)
			cmd.Stdin = inR
		}
	case *os.File:
		if spawn {
			return nil, fmt.Errorf("local sandbox command %q: Spawn streams stdin; ExecOptions.Stdin must be nil", command)
		}
		cmd.Stdin = in
	default:
		if spawn {
			return nil, fmt.Errorf("local sandbox command %q: Spawn streams stdin; ExecOptions.Stdin must be nil", command)
		}
		var inR *os.File
		if inR, p.stdin, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("local sandbox command %q: %w", command, err)
		}
		childEnds = append(childEnds, inR)
		cmd.Stdin = inR
		copyIn = in
	}
	if spawn {
		p.id = "local-process:" + p.mark
	}

	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return nil, fmt.Errorf("local sandbox command %q: %w", command, ErrReleased)
	}
	if err = cmd.Start(); err != nil {
		h.mu.Unlock()
		return nil, fmt.Errorf("local sandbox command %q: %w", command, err)
	}
	p.cmd = cmd
	p.pgid = cmd.Process.Pid
	h.procs[p] = struct{}{}
	if spawn {
		h.spawned = append(h.spawned, p)
	}
	h.mu.Unlock()

	if opts.Timeout > 0 {
		timeout := opts.Timeout
		p.timer = time.AfterFunc(timeout, func() {
			p.kill(fmt.Errorf("local sandbox command %q timed out after %s: %w", command, timeout, context.DeadlineExceeded))
		})
	}
	p.stopCtx = context.AfterFunc(ctx, func() {
		p.kill(fmt.Errorf("local sandbox command %q cancelled: %w", command, context.Cause(ctx)))
	})
	if copyIn != nil {
		go copyStdin(p.stdin, copyIn)
	}
	go p.supervise()
	return p, nil
}

// copyStdin feeds an Exec's stdin and closes it at the end of src. A
// write error (the process exited or was killed) ends the copy.
func copyStdin(dst *os.File, src io.Reader) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
}

// commandEnv returns the host environment plus extra, then marks: the
// procscope variables through which the command's descendants are found
// again.
func commandEnv(extra map[string]string, marks []string) ([]string, error) {
	env := os.Environ()
	env = slices.Grow(env, len(extra)+len(marks))
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		v := extra[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("local sandbox environment variable %q is invalid", k)
		}
		env = append(env, k+"="+v)
	}
	return append(env, marks...), nil
}

// supervise waits for the leader to exit, kills whatever it left in its
// process group, reaps it and publishes the outcome.
func (p *process) supervise() {
	pid := p.pgid
	if waitExited(pid) == nil {
		// The leader is a zombie until Wait reaps it, so its process
		// group id cannot have been reused: the kill is exact.
		p.mu.Lock()
		_ = killGroup(pid)
		p.finish(p.cmd.Wait())
		p.mu.Unlock()
	} else {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.finish(err)
		// Best effort where the leader cannot be awaited without reaping.
		_ = killGroup(pid)
		p.mu.Unlock()
	}
	// A descendant that left the group (setsid) still carries the
	// command's mark: it goes with the rest.
	procscope.Kill(procscope.ProcessVar, p.mark)
	if p.timer != nil {
		p.timer.Stop()
	}
	p.stopCtx()
	p.host.forget(p)
	close(p.done)
}

// finish records the outcome of the reaped leader. p.mu is held.
func (p *process) finish(err error) {
	p.reaped = true
	if ps := p.cmd.ProcessState; ps != nil {
		p.exitCode = exitStatus(ps)
		return
	}
	p.exitCode = -1
	p.waitErr = fmt.Errorf("local sandbox: wait for process: %w", err)
}

// kill sends SIGKILL to the whole process group unless the leader was
// already reaped. The first kill records cause.
func (p *process) kill(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	if !p.killed {
		p.killed = true
		p.cause = cause
	}
	_ = killGroup(p.pgid)
}

// closePipes closes the parent's ends of the pipes; repeat-safe.
func (p *process) closePipes() {
	p.closeOnce.Do(func() {
		for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
			if f != nil {
				_ = f.Close()
			}
		}
	})
}

// ID returns the opaque process identity.
func (p *process) ID() string { return p.id }

// Stdin returns the process's standard input; closing it signals EOF.
func (p *process) Stdin() io.WriteCloser { return p.stdin }

// Stdout returns the process's standard output. Read it (and Stderr)
// concurrently: a full pipe blocks the writer.
func (p *process) Stdout() io.Reader { return p.stdout }

// Stderr returns the process's standard error.
func (p *process) Stderr() io.Reader { return p.stderr }

// Kill kills the process group and waits until the leader was reaped;
// repeat-safe, and a no-op after the process exited.
func (p *process) Kill() error {
	p.kill(nil)
	<-p.done
	return nil
}

// Wait waits for the leader's exit and returns its exit code (128+signal
// when a signal ended it). The error is non-nil when the provider killed
// the group because of context cancellation, a timeout or the host's release;
// a Kill leaves it nil. Every call returns the same result.
func (p *process) Wait() (int, error) {
	<-p.done
	if p.waitErr != nil {
		return p.exitCode, p.waitErr
	}
	return p.exitCode, p.cause
}

// run executes one command to completion and returns its bounded output.
func (h *Host) run(ctx context.Context, command string, args []string, dir string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	p, err := h.start(ctx, command, args, dir, opts, false)
	if err != nil {
		return nil, err
	}
	c := &collector{p: p, max: h.maxOutput}
	var stdout, stderr []byte
	read := make(chan struct{}, 2)
	go func() { stdout = c.read(p.stdout); read <- struct{}{} }()
	go func() { stderr = c.read(p.stderr); read <- struct{}{} }()
	<-p.done
	grace := time.NewTimer(ioGrace)
	for n := 0; n < 2; {
		select {
		case <-read:
			n++
		case <-grace.C:
			p.closePipes()
		}
	}
	grace.Stop()
	p.closePipes()
	switch {
	case p.cause != nil:
		return nil, p.cause
	case c.overflow.Load():
		return nil, c.overflowError(command)
	case p.waitErr != nil:
		return nil, p.waitErr
	}
	return &eval.ExecResult{Stdout: stdout, Stderr: stderr, ExitCode: p.exitCode}, nil
}

// collector bounds the combined output of one Exec.
type collector struct {
	p        *process
	max      int64
	total    atomic.Int64
	overflow atomic.Bool
}

// read reads f to its end, or until the combined output exceeds the
// bound, which kills the process group.
func (c *collector) read(f *os.File) []byte {
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(512, cap(buf)))
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			if c.total.Add(int64(n)) > c.max {
				c.overflow.Store(true)
				c.p.kill(c.overflowError(c.p.name))
				return nil
			}
			buf = buf[:len(buf)+n]
		}
		if err != nil { // io.EOF, or the pipe was closed after ioGrace
			return buf
		}
	}
}

// overflowError is the error of an Exec whose output exceeded the bound.
func (c *collector) overflowError(command string) error {
	return fmt.Errorf("local sandbox command %q output exceeded %d bytes", command, c.max)
}

// spawn starts a streaming process.
func (h *Host) spawn(ctx context.Context, command string, args []string, dir string, opts eval.ExecOptions) (eval.SandboxProcess, error) {
	p, err := h.start(ctx, command, args, dir, opts, true)
	if err != nil {
		return nil, err
	}
	return p, nil
}
