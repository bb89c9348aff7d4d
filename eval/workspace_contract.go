package eval

import "context"

// WorkspaceProvider acquires durable file identities for workspace()
// scopes. Implementations are safe for concurrent use.
type WorkspaceProvider interface {
	// Name is the provider's normalized name.
	Name() string
	// Acquire takes writer authority for req.ID (unless req.Lock is false)
	// before materializing, and removes partial state when it fails. A
	// healthy competing writer is reported as *WorkspaceConflictError.
	Acquire(ctx context.Context, req *WorkspaceAcquireRequest) (WorkspaceLease, error)
}

// WorkspaceAcquireRequest is what a workspace() scope asks a provider for.
type WorkspaceAcquireRequest struct {
	// ID is the durable identity.
	ID           string
	EvaluationID string
	// Load selects what to materialize; nil materializes nothing (an
	// empty workspace).
	Load *WorkspaceLoad
	// Lock asks for exclusive writer authority.
	Lock bool
}

// WorkspaceLoad selects the revision to materialize and which paths.
type WorkspaceLoad struct {
	// Revision is "current" (or "") or a revision id; a named revision
	// must exist.
	Revision string
	// Include and Exclude are relative slash-separated globs; nil Include
	// means everything, and excludes win.
	Include []string
	Exclude []string
}

// WorkspaceSaveRequest asks a provider for one save: the workspace()'s
// own SavePolicy (the one type from the save= option to the provider; On
// was already applied by the evaluator, which saves only when the policy
// says so) and the outcome of the workspace's subtree.
type WorkspaceSaveRequest struct {
	// Outcome is "success" or "failure" (of the workspace's subtree).
	Outcome string
	SavePolicy
}

// WorkspaceLease is one acquired workspace.
type WorkspaceLease interface {
	// ID is the lease identity.
	ID() string
	// Directory is the host directory holding the materialized files.
	Directory() string
	// Save publishes the directory according to req.
	Save(ctx context.Context, req WorkspaceSaveRequest) error
	// Release removes temporary state and then releases the lock; it is
	// idempotent.
	Release(ctx context.Context) error
}
