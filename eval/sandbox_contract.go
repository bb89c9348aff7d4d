package eval

import (
	"context"
	"errors"
	"io"
	"time"
)

// Access is the filesystem access of a sandbox, a sandbox view, or an
// agent's permissions.
type Access string

// The access modes.
const (
	ReadOnly  Access = "read-only"
	ReadWrite Access = "read-write"
)

// Valid reports whether a is ReadOnly or ReadWrite.
func (a Access) Valid() bool { return a == ReadOnly || a == ReadWrite }

// SandboxProvider acquires execution leases for sandbox() scopes. Only the
// outermost sandbox() of a subtree acquires a lease; nested ones are
// narrowing views of it.
//
// Acquire may be called from any goroutine, concurrently for different
// scopes: implementations must be safe for concurrent use.
type SandboxProvider interface {
	// Name is the provider's normalized name.
	Name() string
	// Acquire provisions a lease honouring req. It must return promptly
	// with an error wrapping context.Cause(ctx) once ctx is done, and
	// remove anything it partially created when it fails.
	Acquire(ctx context.Context, req *SandboxAcquireRequest) (SandboxLease, error)
}

// SandboxAcquireRequest is what a sandbox() scope asks a provider for.
type SandboxAcquireRequest struct {
	// Access is ReadOnly or ReadWrite.
	Access Access
	// Root is the logical root, relative and slash-separated ("." for the
	// whole filesystem the provider exposes).
	Root string
	// Cwd is the logical working directory, relative to Root.
	Cwd string
	// EvaluationID is the run identity.
	EvaluationID string
	// Workspace is the active workspace materialization, or nil.
	Workspace *WorkspaceMaterialization
}

// WorkspaceMaterialization tells a sandbox provider where the active
// workspace's files are. It grants no save or release authority.
type WorkspaceMaterialization struct {
	WorkspaceID string
	LeaseID     string
	// Directory is the host directory of the materialized files.
	Directory string
	// Cwd is the workspace's logical working directory.
	Cwd string
	// Provider is the workspace provider's name.
	Provider string
	// WriteConcurrency is "serial" or "parallel".
	WriteConcurrency string
}

// SandboxLease is one acquired sandbox.
type SandboxLease interface {
	// ID is a stable, non-empty identity of the lease.
	ID() string
	// Runtime operates on the lease; it reports the acquired access, root
	// and cwd exactly.
	Runtime() SandboxRuntime
	// Release destroys or releases everything the lease owns (processes,
	// containers, temporary files). It is idempotent: the evaluator calls
	// it exactly once, but providers must tolerate more.
	Release(ctx context.Context) error
}

// ExecOptions configure one command in a sandbox.
type ExecOptions struct {
	// Cwd is a logical directory relative to the runtime's root; "" means
	// the runtime's cwd.
	Cwd string
	// Env adds environment variables.
	Env map[string]string
	// Stdin, when non-nil, is the command's standard input; otherwise it
	// is empty.
	Stdin io.Reader
	// Timeout bounds the command; 0 means none.
	Timeout time.Duration
}

// ExecResult is the bounded outcome of a finished command.
type ExecResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// SandboxProcess is a running process started by Spawn.
type SandboxProcess interface {
	// ID is an opaque execution identity (never parse it as a PID).
	ID() string
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Kill terminates the process and its descendants; it is repeat-safe.
	Kill() error
	// Wait waits for the exit and returns the exit code; repeat-safe.
	Wait() (int, error)
}

// FileInfo describes one entry of a sandbox or workspace filesystem.
type FileInfo struct {
	// Kind is FileKindFile, FileKindDirectory or FileKindOther.
	Kind FileKind
	Size int64
	// ModTime is the modification time, or the zero time when the
	// provider does not know it.
	ModTime time.Time
}

// FileKind is what a FileInfo describes.
type FileKind string

// The kinds of FileInfo.
const (
	// FileKindFile is a regular file.
	FileKindFile FileKind = "file"
	// FileKindDirectory is a directory.
	FileKindDirectory FileKind = "directory"
	// FileKindOther is anything else: a device, a pipe, a socket, a link
	// where links are not followed.
	FileKindOther FileKind = "other"
)

// FileStaging is a writable, invocation-private directory visible to an
// agent in the sandbox, even when the sandbox is read-only.
type FileStaging interface {
	// Root is the staging directory as the agent sees it.
	Root() string
	// WriteFile writes a file below Root; rel is relative and confined.
	WriteFile(ctx context.Context, rel string, data []byte) error
	// Release removes the staging directory; repeat-safe.
	Release(ctx context.Context) error
}

// SandboxRuntime is the portable process and filesystem interface of a
// lease. Paths are logical: relative, slash-separated, below Root.
// Implementations are safe for concurrent use.
type SandboxRuntime interface {
	Access() Access
	Root() string
	Cwd() string
	// Exec runs one executable with literal arguments (never through a
	// shell) and returns its bounded output and exit code. A non-zero exit
	// is not an error. A read-only runtime that cannot enforce read-only
	// execution rejects it.
	Exec(ctx context.Context, command string, args []string, opts ExecOptions) (*ExecResult, error)
	// Spawn starts one executable with streaming I/O.
	Spawn(ctx context.Context, command string, args []string, opts ExecOptions) (SandboxProcess, error)
	// ReadFile returns a complete regular file.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// Stat describes an entry.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// WriteFile replaces a complete file, creating parent directories; it
	// rejects read-only access and non-file destinations.
	WriteFile(ctx context.Context, path string, data []byte) error
	// CreateFileStaging returns a new private writable directory.
	CreateFileStaging(ctx context.Context) (FileStaging, error)
}

// SandboxSession is the effective sandbox an agent runs in: the lease and
// the narrowed view of the nearest sandbox() (and the agent's cwd=).
type SandboxSession struct {
	Lease   SandboxLease
	Runtime SandboxRuntime
	Access  Access
	Root    string
	Cwd     string
}

// ErrReadOnly is wrapped by errors of writes through read-only access.
var ErrReadOnly = errors.New("read-only access")
