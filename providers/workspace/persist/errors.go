package persist

import (
	"errors"
	"fmt"
	"strings"
)

// ErrCorrupt is matched (errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("workspace storage is corrupt")

// ErrLimitExceeded is wrapped by errors of snapshots, archives and
// manifests that exceed the configured entry, byte or archive limits.
var ErrLimitExceeded = errors.New("workspace limit exceeded")

// ErrSimulatedCrash, returned (or wrapped) by a Hooks.Step function, makes
// the operation stop at that step as if the process had died: no storage
// cleanup (orphan removal, pruning) runs. Local temporary files are still
// removed.
var ErrSimulatedCrash = errors.New("simulated crash")

// CorruptError reports stored workspace state that cannot be trusted: an
// index, manifest or archive that does not parse or validate, or an
// artifact the index references that is missing or has the wrong size or
// hash. It is never a *eval.WorkspaceConflictError; the store needs repair
// (or restoring a retained revision by id).
type CorruptError struct {
	// WorkspaceID is the workspace whose storage is corrupt.
	WorkspaceID string
	// Path is the storage path of the corrupt object.
	Path string
	// Err describes the defect.
	Err error
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("workspace %q: corrupt storage object %q: %v", e.WorkspaceID, e.Path, e.Err)
}

// Unwrap returns the defect.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is matches ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// PruneError reports that a save published its revision (the index is
// valid and current names it) but removing revisions beyond retention
// failed, leaving orphaned artifacts that need operational cleanup.
type PruneError struct {
	// WorkspaceID is the saved workspace.
	WorkspaceID string
	// Revision is the published revision.
	Revision string
	// Err is the failure.
	Err error
}

// Error implements error.
func (e *PruneError) Error() string {
	return fmt.Sprintf("workspace %q: revision %s was published, but pruning old revisions failed (orphaned artifacts remain): %v", e.WorkspaceID, e.Revision, e.Err)
}

// Unwrap returns the failure.
func (e *PruneError) Unwrap() error { return e.Err }

// corrupt builds a *CorruptError.
func corrupt(workspaceID, path string, format string, args ...any) error {
	return &CorruptError{WorkspaceID: workspaceID, Path: path, Err: fmt.Errorf(format, args...)}
}

// limitf builds an error wrapping ErrLimitExceeded.
func limitf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLimitExceeded, fmt.Sprintf(format, args...))
}

// IndexError reports a workspace whose index is missing while the store
// holds published revisions, or that cannot be read: nothing was loaded
// and nothing was deleted. errors.Is(err, ErrCorrupt) holds.
type IndexError struct {
	// WorkspaceID is the workspace.
	WorkspaceID string
	// Location is where the index is (an s3:// URL, a path).
	Location string
	// Store is the store as the aml workspace commands take it.
	Store string
	// Missing is set when the index does not exist; else Err (a
	// *CorruptError) says why it cannot be read.
	Missing bool
	Err     error
	// Revisions are the ids of the revisions found (Missing).
	Revisions []string
}

func (e *IndexError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workspace %q: ", e.WorkspaceID)
	if e.Missing {
		fmt.Fprintf(&b, "its index %s is missing, but the store holds %d published revision(s) (%s)", e.Location, len(e.Revisions), strings.Join(e.Revisions, ", "))
	} else {
		cause := e.Err
		var ce *CorruptError
		if errors.As(cause, &ce) && ce.Err != nil {
			cause = ce.Err
		}
		fmt.Fprintf(&b, "its index %s cannot be read: %v", e.Location, cause)
	}
	fmt.Fprintf(&b, "; nothing was loaded and nothing was deleted: check the store with `aml workspace check %s %s`, then rebuild the index from the revisions with `aml workspace recover %s %s` (or put back a copy of workspace.json)", e.Store, shellQuote(e.WorkspaceID), e.Store, shellQuote(e.WorkspaceID))
	return b.String()
}

func (e *IndexError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *IndexError) Is(target error) bool { return target == ErrCorrupt }

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\$`#&;|<>()*?[]{}~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
