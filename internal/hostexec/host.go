package hostexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aml-go/aml/eval"
)

// DefaultMaxOutputBytes is the combined stdout and stderr bound of one
// Exec or Run when Options.MaxOutputBytes is zero: 4 MiB.
const DefaultMaxOutputBytes int64 = 4 << 20

// ErrReleased is wrapped by every operation on a Host, its Runtime or its
// file stagings after the Host (or the staging) was released, and by the
// error of a command the release killed. Its text speaks of a local
// sandbox lease, the form in which users meet a Host.
var ErrReleased = errors.New("local sandbox lease released")

// readOnlyExecMessage is the text of ErrReadOnlyExec.
const readOnlyExecMessage = `local sandbox cannot enforce read-only access for host processes; use access = "read-write" or a provider that can`

// readOnlyError is an error that wraps eval.ErrReadOnly with its own text.
type readOnlyError struct{ msg string }

func (e *readOnlyError) Error() string { return e.msg }
func (e *readOnlyError) Unwrap() error { return eval.ErrReadOnly }

// ErrReadOnlyExec is the error of Exec and Spawn under read-only access:
// a host process cannot be held to read-only access. It wraps
// eval.ErrReadOnly. It is never modified.
var ErrReadOnlyExec error = &readOnlyError{msg: readOnlyExecMessage}

// releaseWait bounds how long Release waits for the kernel to reap the
// leaders of the process groups it killed.
const releaseWait = 5 * time.Second

// Supported returns nil on hosts with process groups (Unix), and
// otherwise the error Open returns there. Safe for concurrent use.
func Supported() error {
	if !supported {
		return errors.New("local sandbox requires a Unix host")
	}
	return nil
}

// Options say what Open opens. Open does not keep or modify them.
type Options struct {
	// Dir is the host directory that bounds the Host: the root and the
	// cwd must resolve inside it. A relative path is resolved against
	// the process working directory. It must exist and must not be "".
	Dir string
	// Root is the logical root, a path below Dir ("" or "." for Dir
	// itself). Files are served below it and command directories
	// resolved below it.
	Root string
	// Cwd is the logical working directory of commands, a path below
	// Root ("" or "." for the root itself).
	Cwd string
	// Access is eval.ReadWrite or eval.ReadOnly; see the package
	// documentation for what read-only rejects.
	Access eval.Access
	// MaxOutputBytes bounds the combined stdout and stderr captured from
	// one Exec or Run; 0 means DefaultMaxOutputBytes. It must not be
	// negative. Exceeding it kills the command's process group and fails
	// the command.
	MaxOutputBytes int64
}

// Host is a directory of the host opened by Open, and every process
// started and file staging created through it until Release. Its
// methods are safe for concurrent use.
type Host struct {
	boundary  string // real Options.Dir
	rootReal  string // real root directory
	cwdReal   string // real cwd directory, as resolved by Open
	root      *os.Root
	maxOutput int64
	rt        *Runtime

	mu       sync.Mutex
	released bool
	procs    map[*process]struct{} // running processes
	spawned  []*process            // every spawned process, for its pipes
	stagings map[*staging]struct{}

	releaseOnce sync.Once
	releaseErr  error
}

// Open validates opts and returns a Host over opts.Root below opts.Dir.
// The root must resolve (following symbolic links) to an existing
// directory inside Dir, and the cwd to an existing directory inside the
// root; logical paths are relative and slash-separated, and absolute
// paths, backslashes and ".." segments are rejected. It returns an error
// wrapping context.Cause(ctx) when ctx ends first; ctx bounds only Open,
// not the Host. It fails on hosts that are not Unix (see Supported).
// The caller must Release the Host. Safe for concurrent use.
func Open(ctx context.Context, opts Options) (*Host, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local sandbox acquisition: %w", context.Cause(ctx))
	}
	if opts.Access != eval.ReadOnly && opts.Access != eval.ReadWrite {
		return nil, fmt.Errorf("local sandbox access %q must be %q or %q", opts.Access, eval.ReadOnly, eval.ReadWrite)
	}
	maxOutput := opts.MaxOutputBytes
	switch {
	case maxOutput == 0:
		maxOutput = DefaultMaxOutputBytes
	case maxOutput < 0:
		return nil, fmt.Errorf("local sandbox MaxOutputBytes must be positive, got %d", opts.MaxOutputBytes)
	}
	if opts.Dir == "" {
		return nil, errors.New("local sandbox requires a host directory")
	}
	rootRel, err := cleanLogical(opts.Root, "root")
	if err != nil {
		return nil, err
	}
	cwdRel, err := cleanLogical(opts.Cwd, "cwd")
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local sandbox workspace %q: %w", opts.Dir, err)
	}
	boundary, err := realPath(abs)
	if err != nil {
		return nil, fmt.Errorf("local sandbox workspace %q: %w", opts.Dir, err)
	}
	if fi, err := os.Stat(boundary); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("local sandbox workspace %q must be a directory", opts.Dir)
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
		return nil, fmt.Errorf("local sandbox root %q: %w", opts.Root, err)
	}
	h := &Host{
		boundary:  boundary,
		rootReal:  rootReal,
		cwdReal:   cwdReal,
		root:      root,
		maxOutput: maxOutput,
		procs:     make(map[*process]struct{}),
		stagings:  make(map[*staging]struct{}),
	}
	h.rt = &Runtime{host: h, access: opts.Access, rootPath: opts.Root, cwdPath: opts.Cwd, cwdRel: cwdRel}
	if err := ctx.Err(); err != nil {
		_ = h.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("local sandbox acquisition: %w", context.Cause(ctx))
	}
	return h, nil
}

// Runtime returns the Host's runtime; every call returns the same one.
// Safe for concurrent use.
func (h *Host) Runtime() *Runtime { return h.rt }

// Run runs command with literal args to completion, like the Runtime's
// Exec, but whatever the access: it is for the trusted commands of the
// Host's owner (the local sandbox's setup), never for a request's. With
// opts.Cwd "" it runs in the cwd Open resolved. Safe for concurrent use.
func (h *Host) Run(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	dir := h.cwdReal
	if opts.Cwd != "" {
		var err error
		if dir, err = h.rt.commandDir(opts.Cwd); err != nil {
			return nil, err
		}
	}
	return h.run(ctx, command, args, dir, opts)
}

// Release kills every still-running process group of the Host, closes
// the pipes of spawned processes, removes its file stagings and closes
// the directory. It copies nothing. The first call does the work; every
// call returns its result, and concurrent calls wait for it. ctx is not
// consulted: SIGKILL cannot be ignored, so the wait for the kernel to
// reap the killed leaders is bounded instead.
func (h *Host) Release(ctx context.Context) error {
	h.releaseOnce.Do(func() { h.releaseErr = h.release() })
	return h.releaseErr
}

func (h *Host) release() error {
	h.mu.Lock()
	h.released = true
	procs := make([]*process, 0, len(h.procs))
	for p := range h.procs {
		procs = append(procs, p)
	}
	stagings := make([]*staging, 0, len(h.stagings))
	for s := range h.stagings {
		stagings = append(stagings, s)
	}
	spawned := h.spawned
	h.spawned = nil
	h.mu.Unlock()

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
	if err := h.root.Close(); err != nil {
		errs = append(errs, fmt.Errorf("local sandbox release: %w", err))
	}
	return errors.Join(errs...)
}

// isReleased reports whether Release has started.
func (h *Host) isReleased() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

// forget untracks a process whose leader was reaped.
func (h *Host) forget(p *process) {
	h.mu.Lock()
	delete(h.procs, p)
	h.mu.Unlock()
}

// forgetStaging untracks a released staging.
func (h *Host) forgetStaging(s *staging) {
	h.mu.Lock()
	delete(h.stagings, s)
	h.mu.Unlock()
}

// Runtime is the eval.SandboxRuntime (and eval.FileOpener) of a Host:
// commands and files below its root, with the access Open was given.
// Its methods are safe for concurrent use.
type Runtime struct {
	host     *Host
	access   eval.Access
	rootPath string // as requested
	cwdPath  string // as requested
	cwdRel   string // cleaned, relative to the root
}

var _ eval.SandboxRuntime = (*Runtime)(nil)

// Access returns the access Open was given. Safe for concurrent use.
func (r *Runtime) Access() eval.Access { return r.access }

// Root returns the logical root, exactly as Open was given it. Safe for
// concurrent use.
func (r *Runtime) Root() string { return r.rootPath }

// Cwd returns the logical cwd, exactly as Open was given it. Safe for
// concurrent use.
func (r *Runtime) Cwd() string { return r.cwdPath }

// Exec runs command with literal args and returns its bounded output and
// exit code; a non-zero exit is not an error. opts.Cwd is a logical
// directory below the root ("" for the runtime's cwd). It is rejected
// with ErrReadOnlyExec under read-only access. Safe for concurrent use.
func (r *Runtime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	if r.access != eval.ReadWrite {
		return nil, ErrReadOnlyExec
	}
	dir, err := r.commandDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	return r.host.run(ctx, command, args, dir, opts)
}

// Spawn starts command with literal args and streaming I/O. ctx bounds
// the process's lifetime: cancelling it kills the process group.
// opts.Stdin must be nil (write to the process's Stdin instead); the
// output is not bounded. It is rejected with ErrReadOnlyExec under
// read-only access. Safe for concurrent use, as is the returned process.
func (r *Runtime) Spawn(ctx context.Context, command string, args []string, opts eval.ExecOptions) (eval.SandboxProcess, error) {
	if r.access != eval.ReadWrite {
		return nil, ErrReadOnlyExec
	}
	dir, err := r.commandDir(opts.Cwd)
	if err != nil {
		return nil, err
	}
	return r.host.spawn(ctx, command, args, dir, opts)
}

// commandDir resolves the working directory of a command: the runtime's
// cwd for "", otherwise the logical directory below the root.
func (r *Runtime) commandDir(cwd string) (string, error) {
	rel := r.cwdRel
	if cwd != "" {
		var err error
		if rel, err = cleanLogical(cwd, "command cwd"); err != nil {
			return "", err
		}
	}
	return resolveDir(r.host.rootReal, rel, r.host.rootReal, "command cwd")
}
