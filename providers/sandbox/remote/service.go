package remote

import (
	"context"
	"io"
	"time"
)

// Service is what the provider asks of a remote sandbox service's client
// (Daytona's REST API, Modal's SDK): making, finding and destroying
// sandboxes. Implementations are safe for concurrent use.
type Service interface {
	// Name is the provider's name ("daytona", "modal"), used in errors.
	Name() string
	// Create makes one sandbox carrying labels and returns it once it runs
	// commands. A creation that fails or is cancelled leaves nothing
	// behind: when the service made the sandbox after all, Create destroys
	// it before it returns.
	Create(ctx context.Context, req CreateRequest) (Machine, error)
	// List returns the sandboxes that carry every label in labels, with
	// all their labels; nil labels lists every sandbox the client sees
	// (aml sandbox prune picks those with the provider's owner mark).
	List(ctx context.Context, labels map[string]string) ([]Found, error)
	// Destroy destroys the sandbox id; a sandbox that no longer exists is
	// not an error.
	Destroy(ctx context.Context, id string) error
}

// CreateRequest is what a new sandbox carries.
type CreateRequest struct {
	// Labels are the provider's own (LabelRun, LabelLease, LabelOwner) and
	// the user's; services keep them as labels or tags.
	Labels map[string]string
}

// Found is a sandbox List returned.
type Found struct {
	ID     string
	Labels map[string]string
}

// Machine is one running remote sandbox. Its methods are safe for
// concurrent use.
type Machine interface {
	// ID is the service's id of the sandbox (the lease's resource id).
	ID() string
	// Start starts one process of the literal argv (never through a
	// shell the caller did not name), in Command.Dir with Command.Env.
	// The process runs until it exits or is killed; ctx bounds only the
	// start.
	Start(ctx context.Context, cmd Command) (Process, error)
	// Upload creates or replaces the regular file at path (an absolute
	// guest path, or one relative to the service's home) with what r
	// yields, streamed; parent directories must exist.
	Upload(ctx context.Context, path string, r io.Reader) error
	// Download streams the regular file at path; the caller closes it.
	Download(ctx context.Context, path string) (io.ReadCloser, error)
	// Destroy destroys the sandbox; it is repeat-safe.
	Destroy(ctx context.Context) error
}

// Command is one process to start.
type Command struct {
	// Args is the argv: Args[0] is the executable, found on the guest's
	// PATH when it has no slash.
	Args []string
	// Dir is the working directory: absolute, or relative to the
	// service's home ("" is the home).
	Dir string
	// Env are variables added to the guest's environment.
	Env map[string]string
	// Stdin says whether the process reads its standard input
	// (Process.Stdin); otherwise its input is empty.
	Stdin bool
	// Timeout, when positive, is a bound the service enforces itself, in
	// addition to the provider's kill: the provider asks for its own
	// timeout plus a second's grace, so that its kill comes first and
	// the service's ends a command whose host has gone.
	Timeout time.Duration
}

// Process is a started process. Stdout and Stderr must be drained
// (concurrently) for it to go on.
type Process interface {
	// Stdin is its standard input (nil unless Command.Stdin); Close ends
	// it.
	Stdin() io.WriteCloser
	// Stdout and Stderr are its output streams; they end when it exits
	// or is killed.
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait waits for the exit and returns its status (128+signal when a
	// signal ended it); repeat-safe.
	Wait() (int, error)
	// Kill ends the process and what it started; repeat-safe. A service
	// that cannot end one process may destroy the sandbox.
	Kill() error
}
