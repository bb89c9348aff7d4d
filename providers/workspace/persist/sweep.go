package persist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/internal/lockfile"
)

// ownerFile, in the root of every materialization, names the process
// that made it and the workspace it holds, so that what a killed process
// left behind can be told from what a live one is using.
const ownerFile = "owner.json"

// materializationOwner is the content of ownerFile.
type materializationOwner struct {
	lockfile.Process
	// Store identifies the storage (adapter name and location).
	Store string `json:"store"`
	// Workspace is the workspace id.
	Workspace string    `json:"workspace"`
	CreatedAt time.Time `json:"createdAt"`
}

func writeOwner(root, store, id string) error {
	data, err := json.Marshal(materializationOwner{Process: lockfile.Self(), Store: store, Workspace: id, CreatedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, ownerFile), data, 0o600)
}

// storeKey identifies the provider's storage: its adapter name and, when
// the adapter has one, its directory.
func (p *provider) storeKey() string {
	key := p.storage.Name()
	if d, ok := p.storage.(interface{ Directory() string }); ok {
		key += ":" + d.Directory()
	}
	return key
}

// Sweep reports what a sweep removed.
type Sweep struct {
	// Removed are the paths removed: directories of the temporary
	// directory, and objects of the store as "<workspace id>: <path>".
	Removed []string
	// Bytes is the total size of what was removed where it is known: the
	// directories and the adapter's temporary uploads (not the store
	// objects of unpublished revisions).
	Bytes int64
	// Busy are the workspaces whose store was not swept because a live
	// writer holds them, with the conflict.
	Busy []error
}

func (s *Sweep) add(o Sweep) {
	s.Removed = append(s.Removed, o.Removed...)
	s.Bytes += o.Bytes
	s.Busy = append(s.Busy, o.Busy...)
}

// Sweeper is implemented by the workspace providers New returns: it
// removes what processes that no longer exist left behind.
type Sweeper interface {
	// Sweep removes the garbage of workspace id, or of every workspace
	// of the storage when id is "" (a storage that implements Lister is
	// asked for them; otherwise only the temporary directory is swept):
	//
	//   - the materializations (snapshots included) that a process of
	//     this machine that no longer exists made in the temporary
	//     directory: what a killed run left;
	//   - under the workspace's writer lock, the revisions a killed save
	//     uploaded but never published, stale pending markers, and the
	//     adapter's temporary uploads older than Options.TemporaryAge. A
	//     workspace held by a live writer is skipped and reported in
	//     Sweep.Busy.
	//
	// Materializations of live processes, of other machines and of
	// unknown owners are kept. Acquire sweeps the workspace it acquires
	// (the store only when it takes the writer lock).
	Sweep(ctx context.Context, id string) (Sweep, error)
}

// Lister is implemented by storages that can enumerate their workspaces.
type Lister interface {
	// Workspaces returns the ids of the workspaces the storage holds,
	// sorted.
	Workspaces(ctx context.Context) ([]string, error)
}

var _ Sweeper = (*provider)(nil)

// Sweep implements Sweeper.
func (p *provider) Sweep(ctx context.Context, id string) (Sweep, error) {
	sw, err := p.SweepMaterializations(id)
	errs := []error{err}
	ids := []string{id}
	if id == "" {
		ids = nil
		if l, ok := p.storage.(Lister); ok {
			ids, err = l.Workspaces(ctx)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			errs = append(errs, context.Cause(ctx))
			break
		}
		sl, err := p.storage.Acquire(ctx, StorageAcquireRequest{ID: id, EvaluationID: "sweep", Lock: true})
		var conflict *eval.WorkspaceConflictError
		if errors.As(err, &conflict) {
			sw.Busy = append(sw.Busy, err)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st, err := sweepStore(ctx, p, sl, id, p.opts.TemporaryAge)
		for i, r := range st.Removed {
			st.Removed[i] = id + ": " + r
		}
		sw.add(st)
		errs = append(errs, err, sl.Release(context.WithoutCancel(ctx)))
	}
	return sw, errors.Join(errs...)
}

// SweepMaterializations removes the dead materializations of workspace
// id ("" for all) of this provider's storage.
func (p *provider) SweepMaterializations(id string) (Sweep, error) {
	key := p.storeKey()
	return sweepMaterializations(p.opts.TemporaryDirectory, func(o materializationOwner) bool {
		return o.Store == key && (id == "" || o.Workspace == id)
	})
}

// SweepTemporaryDirectory removes from dir ("" for os.TempDir()) the
// materializations of every storage that processes of this machine that
// no longer exist left behind; what `aml workspace prune` does first.
func SweepTemporaryDirectory(dir string) (Sweep, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	return sweepMaterializations(dir, func(materializationOwner) bool { return true })
}

// sweepMaterializations removes the materializations in dir whose owner
// is gone and that match.
func sweepMaterializations(dir string, match func(materializationOwner) bool) (Sweep, error) {
	var sw Sweep
	dirs, err := filepath.Glob(filepath.Join(dir, "aml-workspace-*"))
	if err != nil {
		return sw, err
	}
	var errs []error
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		var o materializationOwner
		if json.Unmarshal(data, &o) != nil || !match(o) || !o.Process.Gone() {
			continue
		}
		size := treeSize(d)
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		sw.Removed = append(sw.Removed, d)
		sw.Bytes += size
	}
	return sw, errors.Join(errs...)
}

// treeSize is the total size of the regular files below dir.
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// revisionOf returns the revision id an object path under revisions/
// belongs to.
func revisionOf(object string) string {
	rest := strings.TrimPrefix(object, "revisions/")
	revID, _, _ := strings.Cut(rest, "/")
	return strings.TrimSuffix(revID, ".tar.gz")
}

// unannounced returns, sorted, the ids of the revisions in the store that
// no pending marker announces: revisions that were published (a save
// deletes its marker only after publication).
func unannounced(ctx context.Context, sl StorageLease) ([]string, error) {
	revObjects, err := sl.List(ctx, "revisions/")
	if err != nil {
		return nil, err
	}
	if len(revObjects) == 0 {
		return nil, nil
	}
	markers, err := sl.List(ctx, "pending/")
	if err != nil {
		return nil, err
	}
	announced := map[string]bool{}
	for _, m := range markers {
		announced[strings.TrimSuffix(strings.TrimPrefix(m, "pending/"), ".json")] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range revObjects {
		id := revisionOf(o)
		if id != "" && !announced[id] && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out, nil
}

// pendingPath is the marker of an unpublished revision.
func pendingPath(id string) string { return "pending/" + id + ".json" }

// pending is the content of a pending marker: the revision being saved
// and the process saving it.
type pending struct {
	Revision  Revision         `json:"revision"`
	Owner     lockfile.Process `json:"owner"`
	CreatedAt time.Time        `json:"createdAt"`
}

// writePending announces the revision a save is about to upload.
func writePending(ctx context.Context, sl StorageLease, rev Revision) error {
	data, err := json.Marshal(pending{Revision: rev, Owner: lockfile.Self(), CreatedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	_, err = sl.Write(ctx, pendingPath(rev.ID), bytes.NewReader(data), WriteOptions{ContentLength: int64(len(data)), ContentType: "application/json"})
	return err
}

// foreignPendingAge is how old the pending marker of a process of another
// machine (whose liveness cannot be judged) must be to be swept.
const foreignPendingAge = 24 * time.Hour

// TempSweeper is implemented by storage leases that keep temporary
// uploads outside their object namespace (the filesystem adapter's
// "*.tmp" files): SweepTemporary removes those older than age and reports
// their paths, relative to the workspace's namespace, and their size.
type TempSweeper interface {
	SweepTemporary(ctx context.Context, age time.Duration) (Sweep, error)
}

// sweepStore removes, under the writer lock, what killed saves left in
// the store: revisions announced by a pending marker whose owner is gone
// (or, for another machine, older than a day) and never published, the
// remains of revisions that no marker and no index entry name (a killed
// prune), stale pending markers, and the adapter's temporary uploads
// older than tempAge.
//
// Nothing is deleted on a guess: only a successfully read, valid index
// proves a revision unreferenced. Without one (missing, or unreadable)
// no revision and no marker is deleted, and a missing index while
// published revisions exist is reported (an *IndexError).
func sweepStore(ctx context.Context, p *provider, sl StorageLease, id string, tempAge time.Duration) (Sweep, error) {
	var sw Sweep
	index, _, err := readIndex(ctx, sl, id)
	if err != nil {
		return sw, err
	}
	// Revisions are listed before the markers: a save writes its marker
	// before its first revision object, so every revision listed here of a
	// save in progress has its marker in the second listing.
	revObjects, err := sl.List(ctx, "revisions/")
	if err != nil {
		return sw, err
	}
	markers, err := sl.List(ctx, "pending/")
	if err != nil {
		return sw, err
	}
	referenced := func(revID string) bool { return index != nil && index.Find(revID) != nil }
	live := map[string]bool{}
	var staleMarkers []string
	for _, m := range markers {
		revID := strings.TrimSuffix(strings.TrimPrefix(m, "pending/"), ".json")
		var p pending
		if rc, _, err := sl.Read(ctx, m); err == nil {
			data, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
			rc.Close()
			_ = json.Unmarshal(data, &p)
		}
		switch {
		case referenced(revID):
			staleMarkers = append(staleMarkers, m) // published; the marker's deletion was lost
		case p.Owner.Gone() || (p.Owner != lockfile.Self() && p.Owner.Machine != lockfile.Self().Machine && time.Since(p.CreatedAt) > foreignPendingAge):
			staleMarkers = append(staleMarkers, m)
		default:
			live[revID] = true
		}
	}
	// Incomplete uploads are never published content: those of saves
	// that are not live go, whatever the index says.
	if us, ok := sl.(UploadSweeper); ok {
		u, err := us.SweepUploads(ctx, func(revID string) bool { return live[revID] })
		sw.add(u)
		if err != nil {
			return sw, err
		}
	}
	if index == nil {
		// Nothing is deleted on a guess: without a valid index no
		// revision is proven unreferenced, and a marker is what tells an
		// unpublished revision from a published one.
		published, err := unannounced(ctx, sl)
		if err != nil {
			return sw, err
		}
		if len(published) > 0 {
			return sw, &IndexError{WorkspaceID: id, Location: location(p.storage, id, IndexPath), Store: storeName(p.storage), Missing: true, Revisions: published}
		}
		return sweepTemp(ctx, sl, tempAge, sw)
	}
	del := staleMarkers
	for _, o := range revObjects {
		revID := revisionOf(o)
		if !referenced(revID) && !live[revID] {
			del = append(del, o)
		}
	}
	if len(del) > 0 {
		if err := sl.Delete(ctx, del); err != nil {
			return sw, err
		}
		sw.Removed = append(sw.Removed, del...)
	}
	return sweepTemp(ctx, sl, tempAge, sw)
}

// UploadSweeper is implemented by storage leases whose writes can leave
// incomplete uploads that List does not show (S3 multipart uploads a
// killed save started): SweepUploads aborts those of the workspace's
// revisions that live does not claim (a save in progress), and reports
// them. The sweep runs under the writer lock.
type UploadSweeper interface {
	SweepUploads(ctx context.Context, live func(revisionID string) bool) (Sweep, error)
}

// sweepTemp adds to sw the adapter's temporary uploads older than age,
// which it removes.
func sweepTemp(ctx context.Context, sl StorageLease, tempAge time.Duration, sw Sweep) (Sweep, error) {
	if ts, ok := sl.(TempSweeper); ok {
		t, err := ts.SweepTemporary(ctx, tempAge)
		sw.Removed = append(sw.Removed, t.Removed...)
		sw.Bytes += t.Bytes
		if err != nil {
			return sw, err
		}
	}
	return sw, nil
}
