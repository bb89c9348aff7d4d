package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/scratch"
	"github.com/aml-go/aml/providers/option"
)

// DefaultMaxOutputBytes is the combined stdout and stderr bound of one
// command when Options.MaxOutputBytes is zero: 4 MiB.
const DefaultMaxOutputBytes int64 = 4 << 20

// ErrReleased is wrapped by every operation on a lease, its runtime or
// its file stagings after the lease (or the staging) was released, and
// by the error of a command the release killed.
var ErrReleased = errors.New("local sandbox lease released")

// readOnlyExecMessage is the text of the error rejecting host processes
// under read-only access.
const readOnlyExecMessage = `local sandbox cannot enforce read-only access for host processes; use access = "read-write" or a provider that can`

// readOnlyError is an error that wraps eval.ErrReadOnly with its own text.
type readOnlyError struct{ msg string }

func (e *readOnlyError) Error() string { return e.msg }
func (e *readOnlyError) Unwrap() error { return eval.ErrReadOnly }

// errReadOnlyExec rejects Exec, Spawn and Setup under read-only access.
var errReadOnlyExec error = &readOnlyError{msg: readOnlyExecMessage}

// DefaultSetupTimeout bounds Options.Setup when Options.SetupTimeout is
// 0: room for a package install, not for a hang.
const DefaultSetupTimeout = 10 * time.Minute

// releaseWait bounds how long Release waits for the kernel to reap the
// leaders of the process groups it killed.
const releaseWait = 5 * time.Second

// Options configure a Provider. The zero value is valid: no setup, no
// fallback workspace and DefaultMaxOutputBytes.
type Options struct {
	// Setup is trusted shell source run with "sh -lc" in the acquired cwd
	// on every acquisition, after the paths were validated and before the
	// lease is returned; "" runs nothing. A non-zero exit fails the
	// acquisition. Because it is a host process, a configured Setup makes
	// read-only acquisitions fail (see the package documentation). It must
	// equal its trimmed form and contain no NUL byte. Never interpolate
	// untrusted text into it. A setup running longer than SetupTimeout
	// is killed (its process group) and fails the acquisition.
	Setup string
	// SetupTimeout bounds Setup; 0 means DefaultSetupTimeout. It must not
	// be negative.
	SetupTimeout time.Duration
	// Workspace is the fallback host directory used when a request has no
	// active workspace materialization; "" means none. A relative path is
	// resolved against the process working directory by New; the directory
	// must exist when a lease is acquired. It must equal its trimmed form
	// and contain no NUL byte.
	Workspace string
	// MaxOutputBytes bounds the combined stdout and stderr captured from
	// one Exec (and from Setup); 0 means DefaultMaxOutputBytes. It must not
	// be negative. Exceeding it kills the command's process group and
	// fails the command.
	MaxOutputBytes int64
}

// Provider is the local eval.SandboxProvider. It is immutable after New
// and safe for concurrent use; every Acquire creates an independent
// lease.
type Provider struct {
	setup        string
	setupTimeout time.Duration
	workspace    string
	maxOutput    int64
}

var _ eval.SandboxProvider = (*Provider)(nil)

// New validates opts and returns a Provider. It resolves
// opts.Workspace to an absolute path but does not require it to exist
// yet. It fails on hosts that are not Unix, where process groups are
// unavailable.
func New(opts Options) (*Provider, error) {
	if !supported {
		return nil, errors.New("local sandbox requires a Unix host")
	}
	if err := checkOption(opts.Setup, "setup"); err != nil {
		return nil, err
	}
	if err := checkOption(opts.Workspace, "workspace"); err != nil {
		return nil, err
	}
	p := &Provider{setup: opts.Setup, setupTimeout: opts.SetupTimeout, maxOutput: opts.MaxOutputBytes}
	switch {
	case p.setupTimeout == 0:
		p.setupTimeout = DefaultSetupTimeout
	case p.setupTimeout < 0:
		return nil, fmt.Errorf("local sandbox SetupTimeout must be positive, got %v", opts.SetupTimeout)
	}
	switch {
	case p.maxOutput == 0:
		p.maxOutput = DefaultMaxOutputBytes
	case p.maxOutput < 0:
		return nil, fmt.Errorf("local sandbox MaxOutputBytes must be positive, got %d", opts.MaxOutputBytes)
	}
	if opts.Workspace != "" {
		abs, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, fmt.Errorf("local sandbox workspace %q: %w", opts.Workspace, err)
		}
		p.workspace = abs
	}
	return p, nil
}

// checkOption validates an optional string option.
func checkOption(v, label string) error {
	return option.String("local sandbox", label, v, false)
}

// Name returns "local".
func (p *Provider) Name() string { return "local" }

// KeepsNoState implements eval.StatelessSandbox: commands run directly in
// the workspace's (or the configured) directory, so journaled runs may use
// the provider.
func (p *Provider) KeepsNoState() bool { return true }

// Acquire validates the workspace directory, root and cwd of req, runs the
// configured setup and returns a lease whose runtime runs host processes.
// It returns an error wrapping context.Cause(ctx) when ctx ends first;
// setup runs under ctx, so cancelling it kills the setup's process group.
// A failed acquisition leaves no process, staging or open file behind.
func (p *Provider) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if req == nil {
		return nil, errors.New("local sandbox: nil acquire request")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local sandbox acquisition: %w", context.Cause(ctx))
	}
	if req.Access != eval.ReadOnly && req.Access != eval.ReadWrite {
		return nil, fmt.Errorf("local sandbox access %q must be %q or %q", req.Access, eval.ReadOnly, eval.ReadWrite)
	}
	dir := p.workspace
	if req.Workspace != nil && req.Workspace.Directory != "" {
		dir = req.Workspace.Directory
	}
	if dir == "" {
		return nil, errors.New("local sandbox requires an active workspace() or a configured workspace directory")
	}
	rootRel, err := cleanLogical(req.Root, "root")
	if err != nil {
		return nil, err
	}
	cwdRel, err := cleanLogical(req.Cwd, "cwd")
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local sandbox workspace %q: %w", dir, err)
	}
	boundary, err := realPath(abs)
	if err != nil {
		return nil, fmt.Errorf("local sandbox workspace %q: %w", dir, err)
	}
	if fi, err := os.Stat(boundary); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("local sandbox workspace %q must be a directory", dir)
	}
	rootReal, err := resolveDir(boundary, rootRel, boundary, "root")
	if err != nil {
		return nil, err
	}
	cwdReal, err := resolveDir(rootReal, cwdRel, rootReal, "cwd")
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(rootReal)
	if err != nil {
		return nil, fmt.Errorf("local sandbox root %q: %w", req.Root, err)
	}
	l := &lease{
		id:        "local:" + uuid.NewString(),
		boundary:  boundary,
		rootReal:  rootReal,
		root:      root,
		maxOutput: p.maxOutput,
		procs:     make(map[*process]struct{}),
		stagings:  make(map[*staging]struct{}),
	}
	l.rt = &hostRuntime{lease: l, access: req.Access, rootPath: req.Root, cwdPath: req.Cwd, cwdRel: cwdRel}
	if p.setup != "" {
		if err := l.runSetup(ctx, p.setup, p.setupTimeout, cwdReal, req.Access); err != nil {
			_ = l.Release(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("local sandbox acquisition: %w", context.Cause(ctx))
	}
	return l, nil
}

// runSetup runs the setup source in dir.
func (l *lease) runSetup(ctx context.Context, setup string, timeout time.Duration, dir string, access eval.Access) error {
	if access != eval.ReadWrite {
		return &readOnlyError{msg: "local sandbox setup: " + readOnlyExecMessage}
	}
	res, err := l.run(ctx, "sh", []string{"-lc", setup}, dir, eval.ExecOptions{Timeout: timeout})
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("local sandbox setup did not finish within %v (setup_timeout_ms raises the bound): %w", timeout, err)
		}
		return fmt.Errorf("local sandbox setup: %w", err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			return fmt.Errorf("local sandbox setup failed with exit code %d", res.ExitCode)
		}
		return fmt.Errorf("local sandbox setup failed with exit code %d: %s", res.ExitCode, msg)
	}
	return nil
}

// lease is one acquired local sandbox. It is safe for concurrent use.
type lease struct {
	id        string
	boundary  string // real workspace directory
	rootReal  string // real root directory
	root      *os.Root
	maxOutput int64
	rt        *hostRuntime

	mu       sync.Mutex
	released bool
	procs    map[*process]struct{} // running processes
	spawned  []*process            // every spawned process, for its pipes
	stagings map[*staging]struct{}

	releaseOnce sync.Once
	releaseErr  error
}

var _ eval.SandboxLease = (*lease)(nil)

// ID returns "local:<uuid>".
func (l *lease) ID() string { return l.id }

// Runtime returns the lease's runtime.
func (l *lease) Runtime() eval.SandboxRuntime { return l.rt }

// Release kills every still-running process group of the lease, closes
// the pipes of spawned processes and removes its file stagings. It copies
// nothing. The first call does the work; every call returns its result.
// ctx is not consulted: SIGKILL cannot be ignored, so the wait for the
// kernel to reap the killed leaders is bounded instead.
func (l *lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() { l.releaseErr = l.release() })
	return l.releaseErr
}

func (l *lease) release() error {
	l.mu.Lock()
	l.released = true
	procs := make([]*process, 0, len(l.procs))
	for p := range l.procs {
		procs = append(procs, p)
	}
	stagings := make([]*staging, 0, len(l.stagings))
	for s := range l.stagings {
		stagings = append(stagings, s)
	}
	spawned := l.spawned
	l.spawned = nil
	l.mu.Unlock()

	var errs []error
	for _, p := range procs {
		p.kill(ErrReleased)
	}
	if len(procs) > 0 {
		timer := time.NewTimer(releaseWait)
	wait:
		for _, p := range procs {
			select {
			case <-p.done:
			case <-timer.C:
				errs = append(errs, fmt.Errorf("local sandbox release: killed processes were not reaped within %s", releaseWait))
				break wait
			}
		}
		timer.Stop()
	}
	for _, p := range spawned {
		p.closePipes()
	}
	for _, s := range stagings {
		if err := s.Release(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := l.root.Close(); err != nil {
		errs = append(errs, fmt.Errorf("local sandbox release: %w", err))
	}
	return errors.Join(errs...)
}

// isReleased reports whether Release has started.
func (l *lease) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// forget untracks a process whose leader was reaped.
func (l *lease) forget(p *process) {
	l.mu.Lock()
	delete(l.procs, p)
	l.mu.Unlock()
}

// forgetStaging untracks a released staging.
func (l *lease) forgetStaging(s *staging) {
	l.mu.Lock()
	delete(l.stagings, s)
	l.mu.Unlock()
}

// hostRuntime is the eval.SandboxRuntime of a lease. It is safe for
// concurrent use.
type hostRuntime struct {
	lease    *lease
	access   eval.Access
	rootPath string // as requested
	cwdPath  string // as requested
	cwdRel   string // cleaned, relative to the root
}

var _ eval.SandboxRuntime = (*hostRuntime)(nil)

// Access returns the acquired access.
func (r *hostRuntime) Access() eval.Access { return r.access }

// Root returns the acquired logical root, exactly as requested.
func (r *hostRuntime) Root() string { return r.rootPath }

// Cwd returns the acquired logical cwd, exactly as requested.
func (r *hostRuntime) Cwd() string { return r.cwdPath }

// Exec runs command with literal args and returns its bounded output and
// exit code; a non-zero exit is not an error. It is rejected under
// read-only access.
func (r *hostRuntime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	if r.access != eval.ReadWrite {
		return nil, errReadOnlyExec
	}
	dir, err := r.commandDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	return r.lease.run(ctx, command, args, dir, opts)
}

// Spawn starts command with literal args and streaming I/O. ctx bounds
// the process's lifetime: cancelling it kills the process group.
// opts.Stdin must be nil (write to the process's Stdin instead); the
// output is not bounded. It is rejected under read-only access.
func (r *hostRuntime) Spawn(ctx context.Context, command string, args []string, opts eval.ExecOptions) (eval.SandboxProcess, error) {
	if r.access != eval.ReadWrite {
		return nil, errReadOnlyExec
	}
	dir, err := r.commandDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	return r.lease.spawn(ctx, command, args, dir, opts)
}

// commandDir resolves the working directory of a command: the runtime's
// cwd for "", otherwise the logical directory below the root.
func (r *hostRuntime) commandDir(cwd string) (string, error) {
	rel := r.cwdRel
	if cwd != "" {
		var err error
		if rel, err = cleanLogical(cwd, "command cwd"); err != nil {
			return "", err
		}
	}
	return resolveDir(r.lease.rootReal, rel, r.lease.rootReal, "command cwd")
}

// MkdirTemp makes a private directory in the temporary directory that
// records this process as its owner, so that a later aml process can
// remove it should this one be killed. The evaluator makes the staging
// directories of agents outside a sandbox through it when the provider is
// its host (eval.Options.Host). Safe for concurrent use.
func (p *Provider) MkdirTemp(prefix string) (string, error) { return scratch.MkdirTemp(prefix) }

// RemoveAll removes a directory made by MkdirTemp. Safe for concurrent
// use.
func (p *Provider) RemoveAll(dir string) error { return scratch.RemoveAll(dir) }
