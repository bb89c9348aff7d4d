package deterministic

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aml-go/aml/eval"
)

// DefaultWorkspaceName is the name of a Workspace whose options name none.
const DefaultWorkspaceName = "deterministic-workspace"

// ErrStaleRevision is wrapped by a Save whose workspace was published by
// another lease since this lease acquired it (or last saved). It is an
// ordinary provider failure, not a *eval.WorkspaceConflictError.
var ErrStaleRevision = errors.New("workspace revision changed since acquisition")

// WorkspaceOptions configure a Workspace.
type WorkspaceOptions struct {
	// Name is the provider name; "" means DefaultWorkspaceName. It must
	// equal its trimmed form.
	Name string
	// TempDir is the parent of the materialization directories; "" means
	// os.TempDir().
	TempDir string
}

// Save is one recorded successful Save.
type Save struct {
	// LeaseID is the lease that saved.
	LeaseID string
	// Request is a copy of the save policy.
	Request eval.WorkspaceSaveRequest
	// Revision is the id of the published revision.
	Revision string
}

// Workspace is a deterministic eval.WorkspaceProvider with an in-memory
// revision store. Every acquisition materializes into a fresh real
// directory below TempDir, so host-side file writes work; Save snapshots
// that directory into memory and Release removes it.
//
// Semantics:
//   - Load nil materializes an empty directory. Load.Revision "current"
//     (or "") restores the current revision, or nothing when the id was
//     never saved; any other revision must be one of the retained
//     revision ids ("<n>" counting saves of the id from 1), otherwise
//     Acquire fails.
//   - With Lock set, one lease per id holds writer authority until it is
//     released; a competing locked Acquire fails with
//     *eval.WorkspaceConflictError. Unlocked leases neither take nor check
//     the lock, but a Save still fails with ErrStaleRevision when another
//     lease published since this lease observed the current revision.
//   - Include and Exclude (of Load and of Save) use path.Match against the
//     slash-separated path relative to the directory; a pattern also
//     selects everything below a directory it matches. Nil Include selects
//     everything, and excludes win. WorkspaceSaveRequest.Gitignore is
//     recorded but .gitignore files are not applied.
//   - Regular files (with their permission bits) and directories are
//     snapshot; symlinks and other entries fail the Save.
//   - Retention keeps the newest revisions, counting the new one; 0 means
//     1.
//
// A Workspace and its leases are safe for concurrent use.
type Workspace struct {
	name    string
	tempDir string

	mu           sync.Mutex
	leases       int
	acquisitions []eval.WorkspaceAcquireRequest
	saves        []Save
	releases     []string
	writers      map[string]string // workspace id → lease id
	store        map[string]*history
}

// history is the revision store of one workspace id.
type history struct {
	next      int
	revisions []*revision // newest first
}

// revision is one saved snapshot.
type revision struct {
	id      string
	entries map[string]entry // relative slash path → entry
}

// entry is one snapshot entry.
type entry struct {
	dir  bool
	mode fs.FileMode
	data []byte
}

// NewWorkspace returns a Workspace for opts, or an error for an invalid
// name.
func NewWorkspace(opts WorkspaceOptions) (*Workspace, error) {
	name := opts.Name
	if name == "" {
		name = DefaultWorkspaceName
	}
	if err := checkName("workspace", name); err != nil {
		return nil, err
	}
	return &Workspace{name: name, tempDir: opts.TempDir, writers: map[string]string{}, store: map[string]*history{}}, nil
}

// Name implements eval.WorkspaceProvider.
func (w *Workspace) Name() string { return w.name }

// Acquire implements eval.WorkspaceProvider. It takes writer authority
// (when req.Lock) before materializing, records a copy of req and returns
// a lease with id "<name>-<n>" (n counts acquisitions that passed
// validation, from 1). A failed Acquire removes its directory and
// releases the lock. A context that is already done is rejected with its
// cause before anything is recorded.
func (w *Workspace) Acquire(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if req == nil {
		return nil, errors.New("deterministic workspace: nil acquire request")
	}
	if req.ID == "" || strings.TrimSpace(req.ID) != req.ID || strings.ContainsRune(req.ID, 0) {
		return nil, fmt.Errorf("deterministic workspace: id %q must be non-empty, without surrounding whitespace or NUL bytes", req.ID)
	}
	if req.Load != nil {
		if err := checkGlobs(req.Load.Include, req.Load.Exclude); err != nil {
			return nil, fmt.Errorf("deterministic workspace %q: load: %w", req.ID, err)
		}
	}

	w.mu.Lock()
	w.leases++
	l := &workspaceLease{p: w, id: w.name + "-" + strconv.Itoa(w.leases), wsID: req.ID, locked: req.Lock}
	w.acquisitions = append(w.acquisitions, copyAcquire(req))
	if req.Lock {
		if _, busy := w.writers[req.ID]; busy {
			w.mu.Unlock()
			return nil, &eval.WorkspaceConflictError{WorkspaceID: req.ID}
		}
		w.writers[req.ID] = l.id
	}
	var rev *revision
	var err error
	if h := w.store[req.ID]; h != nil && len(h.revisions) > 0 {
		l.observed = h.revisions[0].id
	}
	if req.Load != nil {
		rev, err = w.find(req.ID, req.Load.Revision)
	}
	w.mu.Unlock()

	fail := func(err error) (eval.WorkspaceLease, error) {
		if l.dir != "" {
			err = errors.Join(err, os.RemoveAll(l.dir))
		}
		w.unlock(l)
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp(w.tempDir, "aml-deterministic-workspace-*")
	if err != nil {
		return fail(fmt.Errorf("deterministic workspace %q: %w", req.ID, err))
	}
	l.dir = dir
	if rev != nil {
		if err := restore(dir, rev, req.Load.Include, req.Load.Exclude); err != nil {
			return fail(fmt.Errorf("deterministic workspace %q: restore revision %s: %w", req.ID, rev.id, err))
		}
	}
	if ctx.Err() != nil {
		return fail(context.Cause(ctx))
	}
	return l, nil
}

// find returns the revision named by sel, or nil for an empty workspace.
// w.mu is held.
func (w *Workspace) find(id, sel string) (*revision, error) {
	h := w.store[id]
	if sel == "" || sel == "current" {
		if h == nil || len(h.revisions) == 0 {
			return nil, nil
		}
		return h.revisions[0], nil
	}
	if h != nil {
		for _, r := range h.revisions {
			if r.id == sel {
				return r, nil
			}
		}
	}
	return nil, fmt.Errorf("deterministic workspace %q: revision %q does not exist", id, sel)
}

// unlock gives up l's writer authority, if it holds it.
func (w *Workspace) unlock(l *workspaceLease) {
	w.mu.Lock()
	if l.locked && w.writers[l.wsID] == l.id {
		delete(w.writers, l.wsID)
	}
	w.mu.Unlock()
}

// Acquisitions returns copies of the acquire requests that passed
// validation, in acquisition order (including ones that then failed with
// a conflict or a missing revision).
func (w *Workspace) Acquisitions() []eval.WorkspaceAcquireRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]eval.WorkspaceAcquireRequest, len(w.acquisitions))
	for i := range w.acquisitions {
		out[i] = copyAcquire(&w.acquisitions[i])
	}
	return out
}

// Saves returns copies of the successful saves in publication order.
func (w *Workspace) Saves() []Save {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.saves)
	for i := range out {
		out[i].Request = copySave(out[i].Request)
	}
	return out
}

// Releases returns the released lease ids in release order; a lease
// appears once however often it was released.
func (w *Workspace) Releases() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.releases)
}

// Files returns the regular files of the current revision of id (relative
// slash path → content), or nil when id has no revision.
func (w *Workspace) Files(id string) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.store[id]
	if h == nil || len(h.revisions) == 0 {
		return nil
	}
	out := map[string]string{}
	for p, e := range h.revisions[0].entries {
		if !e.dir {
			out[p] = string(e.data)
		}
	}
	return out
}

// Revisions returns the retained revision ids of id, newest (current)
// first.
func (w *Workspace) Revisions(id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.store[id]
	if h == nil {
		return nil
	}
	out := make([]string, len(h.revisions))
	for i, r := range h.revisions {
		out[i] = r.id
	}
	return out
}

func copyAcquire(req *eval.WorkspaceAcquireRequest) eval.WorkspaceAcquireRequest {
	c := *req
	if req.Load != nil {
		ld := *req.Load
		ld.Include = slices.Clone(ld.Include)
		ld.Exclude = slices.Clone(ld.Exclude)
		c.Load = &ld
	}
	return c
}

func copySave(req eval.WorkspaceSaveRequest) eval.WorkspaceSaveRequest {
	req.Include = slices.Clone(req.Include)
	req.Exclude = slices.Clone(req.Exclude)
	return req
}

// workspaceLease is one lease of a Workspace.
type workspaceLease struct {
	p      *Workspace
	id     string
	wsID   string
	locked bool
	dir    string

	mu       sync.Mutex // serializes Save and Release
	observed string     // current revision id when acquired or last saved
	released bool
	relErr   error
}

func (l *workspaceLease) ID() string        { return l.id }
func (l *workspaceLease) Directory() string { return l.dir }

// Save snapshots the directory and publishes it as the new current
// revision.
func (l *workspaceLease) Save(ctx context.Context, req eval.WorkspaceSaveRequest) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if req.Outcome != "" && req.Outcome != "success" && req.Outcome != "failure" {
		return fmt.Errorf("deterministic workspace %q: save outcome %q is neither \"success\" nor \"failure\"", l.wsID, req.Outcome)
	}
	if req.Retention < 0 {
		return fmt.Errorf("deterministic workspace %q: negative retention %d", l.wsID, req.Retention)
	}
	if err := checkGlobs(req.Include, req.Exclude); err != nil {
		return fmt.Errorf("deterministic workspace %q: save: %w", l.wsID, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("deterministic workspace lease %s: %w", l.id, ErrReleased)
	}
	entries, err := snapshot(l.dir, req.Include, req.Exclude)
	if err != nil {
		return fmt.Errorf("deterministic workspace %q: save: %w", l.wsID, err)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	keep := max(req.Retention, 1)

	w := l.p
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.store[l.wsID]
	if h == nil {
		h = &history{}
		w.store[l.wsID] = h
	}
	current := ""
	if len(h.revisions) > 0 {
		current = h.revisions[0].id
	}
	if current != l.observed {
		return fmt.Errorf("deterministic workspace %q: observed revision %q, current is %q: %w", l.wsID, l.observed, current, ErrStaleRevision)
	}
	h.next++
	rev := &revision{id: strconv.Itoa(h.next), entries: entries}
	h.revisions = append([]*revision{rev}, h.revisions...)
	if len(h.revisions) > keep {
		h.revisions = h.revisions[:keep]
	}
	l.observed = rev.id
	w.saves = append(w.saves, Save{LeaseID: l.id, Request: copySave(req), Revision: rev.id})
	return nil
}

// Release removes the directory, then gives up writer authority and
// records the release; later calls return the first call's result.
func (l *workspaceLease) Release(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return l.relErr
	}
	l.released = true
	if err := os.RemoveAll(l.dir); err != nil {
		l.relErr = fmt.Errorf("deterministic workspace %q: remove %s: %w", l.wsID, l.dir, err)
	}
	l.p.unlock(l)
	l.p.mu.Lock()
	l.p.releases = append(l.p.releases, l.id)
	l.p.mu.Unlock()
	return l.relErr
}

// checkGlobs validates include and exclude patterns.
func checkGlobs(include, exclude []string) error {
	for _, g := range slices.Concat(include, exclude) {
		if g == "" || strings.HasPrefix(g, "/") || strings.ContainsRune(g, '\\') || strings.HasPrefix(g, "!") {
			return fmt.Errorf("glob %q must be relative and slash-separated, without negation", g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("glob %q: %w", g, err)
		}
	}
	return nil
}

// matches reports whether a pattern matches p or one of its parent
// directories.
func matches(patterns []string, p string) bool {
	for q := p; q != "."; q = path.Dir(q) {
		for _, g := range patterns {
			if ok, _ := path.Match(g, q); ok {
				return true
			}
		}
	}
	return false
}

// selected applies the include and exclude rules to p.
func selected(include, exclude []string, p string) bool {
	if include != nil && !matches(include, p) {
		return false
	}
	return !matches(exclude, p)
}

// snapshot reads the selected entries below dir.
func snapshot(dir string, include, exclude []string) (map[string]entry, error) {
	out := map[string]entry{}
	err := filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if full == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, full)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if selected(include, exclude, rel) {
				out[rel] = entry{dir: true, mode: info.Mode().Perm()}
			} else if matches(exclude, rel) {
				return fs.SkipDir
			}
		case info.Mode().IsRegular():
			if !selected(include, exclude, rel) {
				return nil
			}
			data, err := os.ReadFile(full)
			if err != nil {
				return err
			}
			out[rel] = entry{mode: info.Mode().Perm(), data: data}
		default:
			if selected(include, exclude, rel) {
				return fmt.Errorf("%s: unsupported entry type %s", rel, info.Mode().Type())
			}
		}
		return nil
	})
	return out, err
}

// restore writes the selected entries of rev below dir.
func restore(dir string, rev *revision, include, exclude []string) error {
	paths := make([]string, 0, len(rev.entries))
	for p := range rev.entries {
		if selected(include, exclude, p) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		e := rev.entries[p]
		full := filepath.Join(dir, filepath.FromSlash(p))
		if e.dir {
			if err := os.MkdirAll(full, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, e.data, e.mode); err != nil {
			return err
		}
		if err := os.Chmod(full, e.mode); err != nil {
			return err
		}
	}
	// Directory modes last, so read-only directories do not block writes
	// of their children.
	for _, p := range slices.Backward(paths) {
		if e := rev.entries[p]; e.dir {
			if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(p)), e.mode); err != nil {
				return err
			}
		}
	}
	return nil
}
