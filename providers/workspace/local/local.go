// Package local is the workspace provider that materializes one existing
// host directory directly (localWorkspace).
//
// The directory itself is the materialization and the durable source:
// writes are visible there at once, there are no revisions, and Save only
// verifies that the writer lock is still healthy (it copies and filters
// nothing). The identity is the physical directory, resolved once (symlinks
// included) at Acquire: the workspace id only labels the evaluation, and
// two providers aimed at the same directory contend for the same lock.
//
// The writer lock is the file "<dir>.lock" beside the directory (so its
// parent must be writable), created with O_EXCL and recording its owner,
// refreshed every 5 minutes and stale after 20 minutes (or at once when
// its owner process on this machine is gone). A healthy holder makes
// Acquire fail with *eval.WorkspaceConflictError; a lock found lost is
// reported by Save and Release. With Lock false no lock is taken and
// concurrent runs see ordinary filesystem behaviour.
//
// The provider isolates nothing: processes, the rest of the host
// filesystem, the network and credentials stay reachable.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/option"
	"github.com/aml-go/aml/providers/workspace/internal/lockfile"
)

// Name is the provider's name.
const Name = "local"

// Options configure New.
type Options struct {
	// Directory is the existing directory to use (required); it is
	// resolved to an absolute path by New and must be a directory at
	// Acquire time. It is never created.
	Directory string
}

// New returns the local workspace provider. It validates and resolves the
// options without touching the filesystem. The provider is safe for
// concurrent use.
func New(opts Options) (eval.WorkspaceProvider, error) {
	if err := option.CheckGiven("local workspace", "directory", opts.Directory, false); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(opts.Directory)
	if err != nil {
		return nil, fmt.Errorf("local workspace: %w", err)
	}
	return &provider{dir: abs}, nil
}

type provider struct{ dir string }

// Name implements eval.WorkspaceProvider.
func (p *provider) Name() string { return Name }

// EditsInPlace implements eval.InPlaceWorkspace: the workspace is the
// user's directory itself, which journaled runs refuse.
func (p *provider) EditsInPlace() bool { return true }

// Acquire implements eval.WorkspaceProvider. Load may be nil or select
// "current" (or ""): the directory has no other revision. Load's include
// and exclude globs select nothing here (the directory is used as is).
func (p *provider) Acquire(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if req == nil {
		return nil, errors.New("local workspace: nil acquire request")
	}
	if req.Load != nil && req.Load.Revision != "" && req.Load.Revision != "current" {
		return nil, fmt.Errorf("local workspace %s: revision %q does not exist (a local workspace has no revisions)", p.dir, req.Load.Revision)
	}
	dir, err := filepath.EvalSymlinks(p.dir)
	if err != nil {
		return nil, fmt.Errorf("local workspace: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("local workspace: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("local workspace: %s is not a directory", dir)
	}
	l := &lease{id: Name + "-" + uuid.NewString(), dir: dir, workspaceID: req.ID}
	if req.Lock {
		lk, err := lockfile.Acquire(dir+".lock", lockfile.Options{
			Stale:  lockfile.DefaultStale,
			Update: lockfile.DefaultUpdate,
			Owner:  fmt.Sprintf("aml local workspace %q, evaluation %q", req.ID, req.EvaluationID),
		})
		if errors.Is(err, lockfile.ErrLocked) {
			return nil, &eval.WorkspaceConflictError{WorkspaceID: req.ID, Err: fmt.Errorf("%s: %w", dir, err)}
		}
		if err != nil {
			return nil, fmt.Errorf("local workspace %s: lock: %w", dir, err)
		}
		l.lock = lk
	}
	if ctx.Err() != nil {
		err := context.Cause(ctx)
		if rerr := l.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	return l, nil
}

// lease is a local workspace lease; it is safe for concurrent use.
type lease struct {
	id          string
	dir         string
	workspaceID string
	lock        *lockfile.Lock

	mu       sync.Mutex
	released bool
	relErr   error
}

// ID implements eval.WorkspaceLease.
func (l *lease) ID() string { return l.id }

// Directory implements eval.WorkspaceLease: the resolved directory.
func (l *lease) Directory() string { return l.dir }

// Save implements eval.WorkspaceLease: it publishes nothing and only
// reports a lost lock.
func (l *lease) Save(ctx context.Context, req eval.WorkspaceSaveRequest) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return fmt.Errorf("local workspace %s: save after release", l.dir)
	}
	if l.lock != nil {
		if err := l.lock.Check(); err != nil {
			return fmt.Errorf("local workspace %s: writer lock is no longer held: %w", l.dir, err)
		}
	}
	return nil
}

// Release implements eval.WorkspaceLease: it releases the lock (reporting
// a lock found lost) and leaves the directory as it is. It is idempotent.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return l.relErr
	}
	l.released = true
	if l.lock != nil {
		if err := l.lock.Release(); err != nil {
			l.relErr = fmt.Errorf("local workspace %s: %w", l.dir, err)
		}
	}
	return l.relErr
}
