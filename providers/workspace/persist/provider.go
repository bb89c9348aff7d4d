package persist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
)

// cleanupTimeout bounds cleanup that runs after its operation's context is
// done (orphan removal, storage release).
const cleanupTimeout = time.Minute

// New returns a revision-backed eval.WorkspaceProvider over storage: it owns
// the index, conditional publication, retention and materialization, while
// storage owns the namespace, object I/O and writer authority. Invalid
// options (see Options.Validate) make every Acquire fail. The provider is
// safe for concurrent use.
func New(storage Storage, opts Options) eval.WorkspaceProvider {
	p := &provider{storage: storage}
	p.opts, p.err = opts.normalized()
	if p.err == nil && storage == nil {
		p.err = errors.New("workspace persistence: nil storage")
	}
	return p
}

// Lease is the eval.WorkspaceLease returned by a provider from New, with
// its revision state. Its methods are safe for concurrent use; saves are
// serialized.
type Lease interface {
	eval.WorkspaceLease
	// WorkspaceID is the durable identity the lease was acquired for.
	WorkspaceID() string
	// Format is the format of the lease's next save.
	Format() string
	// RevisionID is the revision restored at acquisition or last
	// published by this lease ("" for an empty start).
	RevisionID() string
	// Index is a copy of the index the lease last observed or published
	// (nil when the workspace had none).
	Index() *Index
}

type provider struct {
	storage Storage
	opts    Options
	err     error
}

// Name implements eval.WorkspaceProvider.
func (p *provider) Name() string {
	if p.storage == nil {
		return ""
	}
	return p.storage.Name()
}

// Acquire implements eval.WorkspaceProvider: it acquires the storage lease
// (taking the lock when req.Lock) before creating
// <TemporaryDirectory>/aml-workspace-*/workspace and restoring the selected
// revision into it. Any failure removes the temporary root and releases the
// storage lease.
func (p *provider) Acquire(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	if p.err != nil {
		return nil, p.err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if req == nil {
		return nil, errors.New("workspace persistence: nil acquire request")
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sl, err := p.storage.Acquire(ctx, StorageAcquireRequest{ID: req.ID, EvaluationID: req.EvaluationID, Lock: req.Lock})
	if err != nil {
		return nil, err
	}
	// What a dead process left of this workspace goes before a new
	// materialization is made: its materializations (with their
	// snapshots) and, under the writer lock, its unpublished revisions and
	// temporary uploads.
	_, _ = p.SweepMaterializations(req.ID)
	if req.Lock {
		_, _ = sweepStore(ctx, p, sl, req.ID, p.opts.TemporaryAge)
	}
	l := &lease{
		p:           p,
		id:          p.storage.Name() + "-" + uuid.NewString(),
		workspaceID: req.ID,
		sl:          sl,
		format:      p.opts.Format,
	}
	if err := l.materialize(ctx, req.Load); err != nil {
		errs := []error{err}
		if rerr := removeAll(l.root); rerr != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", l.root, rerr))
		}
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if rerr := sl.Release(cctx); rerr != nil {
			errs = append(errs, fmt.Errorf("release storage: %w", rerr))
		}
		if len(errs) > 1 {
			return nil, fmt.Errorf("workspace %q: acquisition and cleanup failed: %w", req.ID, errors.Join(errs...))
		}
		return nil, err
	}
	return l, nil
}

// cleanupContext survives the cancellation of ctx for a bounded time.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

type lease struct {
	p           *provider
	id          string
	workspaceID string
	sl          StorageLease
	format      string
	root, dir   string

	mu       sync.Mutex
	index    *Index  // nil when none was observed
	version  Version // of index
	revision string
	reuse    map[string]string // sha256 -> object of a folder revision
	released bool
	relErr   error
}

// materialize creates the temporary root and restores the selected revision.
func (l *lease) materialize(ctx context.Context, load *eval.WorkspaceLoad) error {
	root, err := os.MkdirTemp(l.p.opts.TemporaryDirectory, "aml-workspace-")
	if err != nil {
		return fmt.Errorf("workspace %q: create materialization: %w", l.workspaceID, err)
	}
	l.root, l.dir = root, filepath.Join(root, "workspace")
	if err := writeOwner(root, l.p.storeKey(), l.workspaceID); err != nil {
		return fmt.Errorf("workspace %q: create materialization: %w", l.workspaceID, err)
	}
	if err := os.Mkdir(l.dir, 0o755); err != nil {
		return err
	}
	index, version, err := readIndex(ctx, l.sl, l.workspaceID)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) && ce.Path == IndexPath {
			return &IndexError{WorkspaceID: l.workspaceID, Location: location(l.p.storage, l.workspaceID, IndexPath), Store: storeName(l.p.storage), Err: ce}
		}
		return err
	}
	if index == nil {
		// No index: a new workspace, or one whose index was lost. Revisions
		// that no save in progress (or killed) announced were published:
		// starting empty would hide them, and a later save would replace
		// them.
		published, err := unannounced(ctx, l.sl)
		if err != nil {
			return fmt.Errorf("workspace %q: listing its revisions: %w", l.workspaceID, err)
		}
		if len(published) > 0 {
			return &IndexError{WorkspaceID: l.workspaceID, Location: location(l.p.storage, l.workspaceID, IndexPath), Store: storeName(l.p.storage), Missing: true, Revisions: published}
		}
	}
	l.index, l.version = index, version
	if load == nil {
		return nil
	}
	want := load.Revision
	if want == "" {
		want = "current"
	}
	if index == nil {
		if want != "current" {
			return fmt.Errorf("workspace %q: revision %q does not exist (the workspace has no published revision)", l.workspaceID, want)
		}
		return nil
	}
	if want == "current" {
		want = index.Current
	}
	rev := index.Find(want)
	if rev == nil {
		return fmt.Errorf("workspace %q: revision %q does not exist (retained: %d revisions)", l.workspaceID, want, len(index.Revisions))
	}
	sel := selection{include: load.Include, exclude: load.Exclude}
	filtered := load.Include != nil || len(load.Exclude) > 0
	target := l.dir
	if filtered {
		target = filepath.Join(root, "restored")
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
	}
	es, err := l.restore(ctx, rev, target)
	if err != nil {
		return fmt.Errorf("workspace %q: restore revision %s: %w", l.workspaceID, rev.ID, err)
	}
	if filtered {
		es = selectEntries(es, sel)
		if err := moveSelected(ctx, target, l.dir, es); err != nil {
			return err
		}
		if err := removeAll(target); err != nil {
			return err
		}
	}
	if err := applyModes(l.dir, es); err != nil {
		return err
	}
	l.revision = rev.ID
	return nil
}

// restore extracts one revision, in its recorded format, into dir.
func (l *lease) restore(ctx context.Context, rev *Revision, dir string) ([]entry, error) {
	lim := l.p.opts.limits(rev.Format)
	if rev.Format == FormatFolder {
		es, err := downloadFolder(ctx, l.sl, rev, dir, lim, l.workspaceID)
		if err == nil {
			l.reuse = reuseMap(rev, es)
		}
		return es, err
	}
	body, _, err := l.sl.Read(ctx, rev.Path)
	if errors.Is(err, ErrNotExist) {
		return nil, corrupt(l.workspaceID, rev.Path, "archive revision %s is missing (%s)", rev.ID, location(l.p.storage, l.workspaceID, rev.Path))
	}
	if err != nil {
		return nil, err
	}
	defer body.Close()
	h := &countingHash{h: sha256.New()}
	es, err := extractArchive(ctx, io.TeeReader(body, h), dir, lim, l.p.opts.MaxArchiveBytes, l.workspaceID, rev.Path)
	if err != nil || !rev.Pinned() {
		return es, err
	}
	// What follows the tar stream (gzip's trailer, or bytes appended to
	// a swapped object) counts too.
	if _, err := io.Copy(io.Discard, &boundedReader{ctx: ctx, r: io.TeeReader(body, h), max: l.p.opts.MaxArchiveBytes - h.n + 1, what: "workspace archive"}); err != nil {
		return nil, readerError(l.workspaceID, rev.Path, err)
	}
	if err := checkPin(rev, hex.EncodeToString(h.h.Sum(nil)), h.n); err != nil {
		return nil, &CorruptError{WorkspaceID: l.workspaceID, Path: rev.Path, Err: fmt.Errorf("%w (%s)", err, location(l.p.storage, l.workspaceID, rev.Path))}
	}
	return es, nil
}

// checkPin compares an object's digest and size with what the index pins
// for rev.
func checkPin(rev *Revision, sum string, size int64) error {
	if !rev.Pinned() {
		return nil
	}
	if sum != rev.SHA256 || size != rev.Size {
		return fmt.Errorf("revision %s does not match the index: its %s is %d bytes with SHA-256 %s, the index pins %d bytes with SHA-256 %s: the object was replaced, truncated or damaged since it was published", rev.ID, rev.PinnedPath(), size, shortSum(sum), rev.Size, shortSum(rev.SHA256))
	}
	return nil
}

// shortSum shortens a hex digest for messages.
func shortSum(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// readIndex reads workspace.json: (nil, "", nil) when absent.
func readIndex(ctx context.Context, sl StorageLease, workspaceID string) (*Index, Version, error) {
	data, version, err := readAll(ctx, sl, IndexPath, MaxIndexBytes)
	switch {
	case errors.Is(err, ErrNotExist):
		return nil, "", nil
	case errors.Is(err, errTooLarge):
		return nil, "", corrupt(workspaceID, IndexPath, "index exceeds %d bytes", MaxIndexBytes)
	case err != nil:
		return nil, "", fmt.Errorf("workspace %q: read %s: %w", workspaceID, IndexPath, err)
	}
	index, err := ParseIndex(data)
	if err != nil {
		return nil, "", &CorruptError{WorkspaceID: workspaceID, Path: IndexPath, Err: err}
	}
	return index, version, nil
}

// ID implements eval.WorkspaceLease.
func (l *lease) ID() string { return l.id }

// Directory implements eval.WorkspaceLease.
func (l *lease) Directory() string { return l.dir }

// WorkspaceID implements Lease.
func (l *lease) WorkspaceID() string { return l.workspaceID }

// Format implements Lease.
func (l *lease) Format() string { return l.format }

// RevisionID implements Lease.
func (l *lease) RevisionID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.revision
}

// Index implements Lease.
func (l *lease) Index() *Index {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.index == nil {
		return nil
	}
	c := *l.index
	c.Revisions = append([]Revision(nil), l.index.Revisions...)
	return &c
}

// Save implements eval.WorkspaceLease: snapshot, upload an immutable
// artifact, publish workspace.json conditionally (absent when no index was
// observed, else the observed version), then prune. Saves on one lease
// chain: each publishes against the previous one's index version.
func (l *lease) Save(ctx context.Context, req eval.WorkspaceSaveRequest) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("workspace %q: save after release", l.workspaceID)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("workspace %q: %w", l.workspaceID, err)
	}
	retention := req.RetentionOrDefault()
	if err := l.checkLock(ctx); err != nil {
		return err
	}
	rev := Revision{ID: uuid.NewString(), Format: l.format}
	rev.Path = RevisionPath(rev.ID, rev.Format)
	hook := l.hook

	// 1. Snapshot.
	sel := selection{include: req.Include, exclude: req.Exclude, gitignore: req.Gitignore}
	lim := l.p.opts.limits(rev.Format)
	es, err := scan(ctx, l.dir, sel, lim)
	if err != nil {
		return fmt.Errorf("workspace %q: save: %w", l.workspaceID, err)
	}
	snap := filepath.Join(l.root, "snapshot-"+rev.ID)
	defer removeAll(snap)
	if err := copySnapshot(ctx, l.dir, snap, es, lim, rev.Format == FormatFolder); err != nil {
		return fmt.Errorf("workspace %q: save: %w", l.workspaceID, err)
	}
	if err := hook(StepAfterSnapshot); err != nil {
		return err
	}

	// 2. Upload the immutable artifact, announced first by a pending
	// marker so that what a killed save leaves can be swept.
	up := &uploaded{}
	if err := writePending(ctx, l.sl, rev); err != nil {
		return fmt.Errorf("workspace %q: save: %w", l.workspaceID, err)
	}
	up.add(pendingPath(rev.ID))
	fail := func(err error) error {
		if errors.Is(err, ErrSimulatedCrash) {
			return err
		}
		return l.cleanupOrphan(ctx, &rev, up, err)
	}
	if rev.Format == FormatFolder {
		reuse := l.reuseFor(ctx)
		if err := uploadFolder(ctx, l.sl, &rev, snap, es, reuse, up, hook); err != nil {
			return fail(fmt.Errorf("workspace %q: save: %w", l.workspaceID, err))
		}
	} else if err := l.uploadArchive(ctx, &rev, snap, es, up); err != nil {
		return fail(fmt.Errorf("workspace %q: save: %w", l.workspaceID, err))
	}
	if err := hook(StepAfterArtifactUpload); err != nil {
		return fail(err)
	}

	// 3. Build the new index.
	rev.CreatedAt = formatCreatedAt(time.Now())
	next := &Index{Version: IndexVersion, Current: rev.ID, Revisions: []Revision{rev}}
	var previous []Revision
	if l.index != nil {
		previous = l.index.Revisions
	}
	for _, r := range previous {
		if len(next.Revisions) < retention && r.ID != rev.ID {
			next.Revisions = append(next.Revisions, r)
		}
	}
	data, err := json.Marshal(next)
	if err == nil && len(data) > MaxIndexBytes {
		err = limitf("index would exceed %d bytes", MaxIndexBytes)
	}
	if err != nil {
		return fail(fmt.Errorf("workspace %q: save: %w", l.workspaceID, err))
	}
	if err := hook(StepBeforePublication); err != nil {
		return fail(err)
	}
	if err := l.checkLock(ctx); err != nil {
		return fail(err)
	}

	// 4. Publish: the atomic publication point.
	cond := Absent
	if l.index != nil {
		cond = MatchVersion(l.version)
	}
	version, err := l.sl.Write(ctx, IndexPath, bytes.NewReader(data), WriteOptions{Condition: cond, ContentLength: int64(len(data)), ContentType: "application/json"})
	if err != nil {
		// A failed write may still have been applied: a reply lost to a
		// timeout or a cut connection, whose retry then meets a
		// precondition failure against the index this very write put
		// there. Look before deleting what may have become current.
		cctx, cancel := cleanupContext(ctx)
		idx, v, rerr := readIndex(cctx, l.sl, l.workspaceID)
		cancel()
		switch {
		case rerr != nil:
			return fmt.Errorf("workspace %q: publish %s: the outcome is unknown (the publication may have been applied, and reading %s back failed); revision %s was not removed, reload the current revision before saving again: %w", l.workspaceID, IndexPath, IndexPath, rev.ID, errors.Join(err, rerr))
		case idx != nil && idx.Current == rev.ID:
			// The revision ID is fresh: only this write names it current.
			version, err = v, nil
			next = idx
		case idx != nil && idx.Find(rev.ID) != nil:
			// Published, and since replaced by another writer whose index
			// keeps this revision: it is no longer this save's to remove.
			return fmt.Errorf("workspace %q: stale publication: revision %s was published, then %s changed again (another writer published); reload the current revision, reconcile and save again: %w", l.workspaceID, rev.ID, IndexPath, err)
		case errors.Is(err, ErrPreconditionFailed):
			return fail(fmt.Errorf("workspace %q: stale publication: %s changed since this lease observed it (another writer published); reload the current revision, reconcile and save again: %w", l.workspaceID, IndexPath, err))
		default:
			return fail(fmt.Errorf("workspace %q: publish %s: %w", l.workspaceID, IndexPath, err))
		}
	}

	// 5. Chain: the lease now stands on the published index; the revision
	// is no longer pending (a marker left behind is swept later).
	l.index, l.version, l.revision = next, version, rev.ID
	_ = l.sl.Delete(ctx, []string{pendingPath(rev.ID)})
	if rev.Format == FormatFolder {
		l.reuse = reuseMap(&rev, es)
	}

	// 6. Prune revisions beyond retention.
	if err := hook(StepAfterPublication); err != nil {
		if errors.Is(err, ErrSimulatedCrash) {
			return err
		}
		return &PruneError{WorkspaceID: l.workspaceID, Revision: rev.ID, Err: err}
	}
	var errs []error
	for _, r := range previous {
		if next.Find(r.ID) != nil {
			continue
		}
		if err := hook(StepDuringPrune); err != nil {
			if errors.Is(err, ErrSimulatedCrash) {
				return err
			}
			errs = append(errs, err)
			continue
		}
		if err := deleteRevision(ctx, l.sl, &r, nil); err != nil {
			errs = append(errs, fmt.Errorf("prune revision %s: %w", r.ID, err))
		}
	}
	if len(errs) > 0 {
		return &PruneError{WorkspaceID: l.workspaceID, Revision: rev.ID, Err: errors.Join(errs...)}
	}
	return nil
}

// hook runs Options.Hooks.Step.
func (l *lease) hook(step Step) error {
	if f := l.p.opts.Hooks.Step; f != nil {
		if err := f(step); err != nil {
			return fmt.Errorf("workspace %q: save: %s: %w", l.workspaceID, step, err)
		}
	}
	return nil
}

// checkLock asks a LockChecker storage lease whether the lock is healthy.
func (l *lease) checkLock(ctx context.Context) error {
	if c, ok := l.sl.(LockChecker); ok {
		if err := c.CheckLock(ctx); err != nil {
			return fmt.Errorf("workspace %q: writer lock is no longer held: %w", l.workspaceID, err)
		}
	}
	return nil
}

// reuseFor returns objects the next folder revision may copy: those of the
// revision this lease restored or last published, or else of the observed
// current revision when it is a folder revision.
func (l *lease) reuseFor(ctx context.Context) map[string]string {
	if l.reuse != nil {
		return l.reuse
	}
	if l.index == nil {
		return nil
	}
	cur := l.index.Find(l.index.Current)
	if cur == nil || cur.Format != FormatFolder {
		return nil
	}
	es, err := readManifest(ctx, l.sl, cur, l.p.opts.limits(FormatFolder), l.workspaceID)
	if err != nil {
		return nil // reuse is an optimization: upload everything
	}
	l.reuse = reuseMap(cur, es)
	return l.reuse
}

// uploadArchive builds the archive next to the snapshot, checks its size
// and writes it create-if-absent.
func (l *lease) uploadArchive(ctx context.Context, rev *Revision, snap string, es []entry, up *uploaded) error {
	file := snap + ".tar.gz"
	defer os.Remove(file)
	sum, size, err := writeArchive(ctx, snap, es, file)
	if err != nil {
		return fmt.Errorf("create archive: %w", err)
	}
	rev.SHA256, rev.Size = sum, size
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.Size() > l.p.opts.MaxArchiveBytes {
		return limitf("workspace archive of %d bytes exceeds %d bytes", info.Size(), l.p.opts.MaxArchiveBytes)
	}
	if _, err := l.sl.Write(ctx, rev.Path, f, WriteOptions{Condition: Absent, ContentLength: info.Size(), ContentType: "application/gzip"}); err != nil {
		return fmt.Errorf("upload %s: %w", rev.Path, err)
	}
	up.add(rev.Path)
	return l.hook(StepArtifactObject)
}

// cleanupOrphan deletes a revision that was (partly) uploaded but not
// published, and returns cause, joined with a cleanup failure.
func (l *lease) cleanupOrphan(ctx context.Context, rev *Revision, up *uploaded, cause error) error {
	if l.index != nil && l.index.Current == rev.ID {
		return cause
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := deleteRevision(cctx, l.sl, rev, up.list()); err != nil {
		return fmt.Errorf("workspace save and orphan cleanup failed: %w", errors.Join(cause, fmt.Errorf("delete unpublished revision %s: %w", rev.ID, err)))
	}
	return cause
}

// deleteRevision removes a revision's artifacts (plus extra paths).
func deleteRevision(ctx context.Context, sl StorageLease, rev *Revision, extra []string) error {
	paths := append([]string(nil), extra...)
	if rev.Format == FormatFolder {
		listed, err := sl.List(ctx, rev.Path)
		if err != nil {
			return err
		}
		paths = append(paths, listed...)
	} else {
		paths = append(paths, rev.Path)
	}
	if len(paths) == 0 {
		return nil
	}
	return sl.Delete(ctx, dedupe(paths))
}

func dedupe(ps []string) []string {
	seen := make(map[string]bool, len(ps))
	out := ps[:0]
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Release implements eval.WorkspaceLease: it waits for a running save,
// removes the temporary root, then releases the storage lease (and its
// lock), even when ctx is done. It is idempotent: later calls return the
// first call's result.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return l.relErr
	}
	l.released = true
	var errs []error
	if err := removeAll(l.root); err != nil {
		errs = append(errs, fmt.Errorf("remove materialization: %w", err))
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := l.sl.Release(cctx); err != nil {
		errs = append(errs, fmt.Errorf("release storage: %w", err))
	}
	if len(errs) > 0 {
		l.relErr = fmt.Errorf("workspace %q: release: %w", l.workspaceID, errors.Join(errs...))
	}
	return l.relErr
}
