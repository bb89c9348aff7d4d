// Package filesystem is the revision-backed workspace provider on a durable
// local directory (filesystemWorkspace): persist's protocol over a Storage
// whose objects are files.
//
// # Layout
//
//	<Directory>/<segment>/workspace.json
//	<Directory>/<segment>/revisions/<rev>.tar.gz
//	<Directory>/<segment>/revisions/<rev>/manifest.json
//	<Directory>/<segment>/revisions/<rev>/files/...
//	<Directory>/<segment>/.lock         the writer lock (while held)
//	<Directory>/<segment>/.index.lock   the brief compare-and-swap lock
//
// <segment> is persist.EncodeSegment(id). Names starting with "." at the top
// of a segment belong to the adapter, and names ending in ".<uuid>.tmp" or
// ".<uuid>.p<pid>-<machine tag>.tmp" are writes in progress (or left by a
// killed writer, the one the pid names); neither is an object. The
// materialization is <TemporaryDirectory>/aml-workspace-*/workspace; keep
// Directory outside TemporaryDirectory.
//
// # Guarantees
//
// An object version is the hex sha256 of the file content. A write goes to
// ".<uuid>.p<pid>-<machine tag>.tmp" beside the destination, is synced, and is then moved into place (a rename
// for unconditional and version-conditional writes, a hard link that fails
// if the destination exists for create-if-absent writes), followed by a
// sync of the directory. A version-conditional write compares the current
// hash under a brief lock (".index.lock", stale after 10 seconds), taken
// also by unlocked runs. Readers therefore see complete objects only, and a
// process killed at any point of a save leaves the previous index and
// revisions intact (at worst with unreferenced temporary files and artifacts
// of the unpublished revision). Folder saves reuse unchanged files of the
// previous revision by hard-linking them.
//
// # Locking
//
// With Lock, Acquire takes a cross-process writer lock on the workspace
// (".lock", created with O_EXCL) that records its owner and is refreshed
// every 5 minutes; a lock not refreshed for 20 minutes, or whose owner
// process on this machine is gone, is stale and taken over. A healthy lock
// held by anyone (this process included) makes Acquire fail with
// *eval.WorkspaceConflictError. A lock found lost (taken over) fails every
// later write of the lease, Save (before upload and before publication) and
// Release. Release never deletes published revisions.
package filesystem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/providers/option"
	"github.com/aml-go/aml/providers/workspace/internal/lockfile"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// Name is the storage adapter's (and provider's) name.
const Name = "filesystem"

// Lock timing of the writer lock and of the brief index lock.
const (
	LockStale      = 20 * time.Minute
	LockUpdate     = 5 * time.Minute
	IndexLockStale = 10 * time.Second
)

// Adapter metadata files inside a workspace segment.
const (
	lockName      = ".lock"
	indexLockName = ".index.lock"
)

// Options configure New. Zero fields take persist's defaults.
type Options struct {
	// Directory is the durable root (required); it is resolved to an
	// absolute path by New and created lazily.
	Directory string
	// StoreOptions are the format of new revisions, the bounds of a
	// revision and the parent of materializations.
	persist.StoreOptions
}

// New returns the filesystem workspace provider. It validates and resolves
// the options without touching the filesystem. The provider is safe for
// concurrent use.
func New(opts Options) (eval.WorkspaceProvider, error) {
	if err := CheckOptions(opts); err != nil {
		return nil, err
	}
	s, err := NewStorage(opts.Directory)
	if err != nil {
		return nil, err
	}
	return persist.New(s, persist.Options{StoreOptions: opts.StoreOptions}), nil
}

// CheckOptions reports what New refuses in opts, without touching the
// file system: a missing or malformed directory, an unknown format, a
// negative bound. aml check calls it on a call's literal arguments.
func CheckOptions(opts Options) error {
	if err := option.CheckGiven("filesystem workspace", "directory", opts.Directory, false); err != nil {
		return err
	}
	if err := option.Check("filesystem workspace", "temporary directory", opts.TemporaryDirectory, false); err != nil {
		return err
	}
	if err := opts.StoreOptions.Validate(); err != nil {
		return fmt.Errorf("filesystem workspace: %w", err)
	}
	return nil
}

// Storage is the persist.Storage of the filesystem provider. It is safe
// for concurrent use, also across processes sharing the directory.
type Storage struct {
	root string
}

// NewStorage returns the Storage rooted at directory (resolved to an
// absolute path, not created).
func NewStorage(directory string) (*Storage, error) {
	if err := option.CheckGiven("filesystem workspace", "directory", directory, false); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(directory)
	if err != nil {
		return nil, fmt.Errorf("filesystem workspace: %w", err)
	}
	return &Storage{root: abs}, nil
}

// Directory is the resolved durable root.
func (s *Storage) Directory() string { return s.root }

// Name implements persist.Storage.
func (s *Storage) Name() string { return Name }

var _ persist.Lister = (*Storage)(nil)

// Workspaces implements persist.Lister: the ids of the workspace
// directories below the root (names that are not the encoding of an id
// are not workspaces and are left out). A missing root holds none.
func (s *Storage) Workspaces(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("filesystem workspace: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		id, err := url.PathUnescape(e.Name())
		if err != nil {
			continue
		}
		if seg, err := persist.EncodeSegment(id); err != nil || seg != e.Name() {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

var _ persist.Locator = (*Storage)(nil)

// Location implements persist.Locator: the file of object path of
// workspace id.
func (s *Storage) Location(id, path string) string {
	dir, err := s.WorkspaceDirectory(id)
	if err != nil {
		return filepath.Join(s.root, path)
	}
	return filepath.Join(dir, filepath.FromSlash(path))
}

// Store implements persist.Locator: the store's directory.
func (s *Storage) Store() string { return s.root }

var _ persist.Unlocker = (*Storage)(nil)

// Unlock implements persist.Unlocker with the workspace's lock file.
func (s *Storage) Unlock(ctx context.Context, id string, force bool) (string, error) {
	dir, err := s.WorkspaceDirectory(id)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, lockName)
	holder, err := lockfile.Break(path, LockStale, force)
	if errors.Is(err, lockfile.ErrHeld) {
		return holder, fmt.Errorf("filesystem workspace %q: %w; it was not removed (--force removes it anyway, and the run then fails to save): %w", id, err, persist.ErrLockHeld)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("filesystem workspace %q has no writer lock (%s): %w", id, path, err)
	}
	return holder, err
}

// WorkspaceDirectory is the directory holding a workspace's objects.
func (s *Storage) WorkspaceDirectory(id string) (string, error) {
	seg, err := persist.EncodeSegment(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.root, seg), nil
}

// Acquire implements persist.Storage: with req.Lock it creates the
// workspace directory and takes its writer lock, reporting a healthy
// holder as *eval.WorkspaceConflictError.
func (s *Storage) Acquire(ctx context.Context, req persist.StorageAcquireRequest) (persist.StorageLease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	dir, err := s.WorkspaceDirectory(req.ID)
	if err != nil {
		return nil, err
	}
	l := &lease{id: req.ID, dir: dir}
	if req.Lock {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("filesystem workspace %q: %w", req.ID, err)
		}
		lk, err := lockfile.Acquire(filepath.Join(dir, lockName), lockfile.Options{
			Stale:  LockStale,
			Update: LockUpdate,
			Owner:  fmt.Sprintf("aml filesystem workspace %q, evaluation %q", req.ID, req.EvaluationID),
		})
		if errors.Is(err, lockfile.ErrLocked) {
			return nil, &eval.WorkspaceConflictError{WorkspaceID: req.ID, Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("filesystem workspace %q: lock: %w", req.ID, err)
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

// lease is a Storage lease; it is safe for concurrent use.
type lease struct {
	id   string
	dir  string
	lock *lockfile.Lock // nil without Lock

	mu       sync.Mutex
	released bool
	relErr   error
}

// tmpPattern matches the temporary files of writes: ".<uuid>.p<pid>-<machine
// tag>.tmp", which names the writer, and "<dest>.<uuid>.tmp" of earlier
// versions.
var tmpPattern = regexp.MustCompile(`\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(\.p([0-9]+)-([0-9a-f]+))?\.tmp$`)

// tmpSuffix names this process as the writer of a temporary file.
var tmpSuffix = sync.OnceValue(func() string {
	return fmt.Sprintf(".p%d-%s.tmp", os.Getpid(), procscope.MachineTag())
})

// tmpWriterGone reports whether the temporary file name names a writer
// process of this machine that no longer exists.
func tmpWriterGone(name string) bool {
	m := tmpPattern.FindStringSubmatch(name)
	if m == nil || m[1] == "" || m[3] != procscope.MachineTag() || m[3] == "0" {
		return false
	}
	pid, err := strconv.Atoi(m[2])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !procscope.Alive(pid)
}

// resolve maps an object path to a file, rejecting adapter names.
func (l *lease) resolve(p string) (string, error) {
	if err := persist.ValidateStoragePath(p); err != nil {
		return "", fmt.Errorf("filesystem workspace %q: %w", l.id, err)
	}
	if strings.HasPrefix(p, ".") || tmpPattern.MatchString(p) {
		return "", fmt.Errorf("filesystem workspace %q: storage path %q is reserved", l.id, p)
	}
	return filepath.Join(l.dir, filepath.FromSlash(p)), nil
}

// writable checks that the lease may mutate the store.
func (l *lease) writable(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return fmt.Errorf("filesystem workspace %q: lease was released", l.id)
	}
	return l.CheckLock(ctx)
}

// CheckLock implements persist.LockChecker.
func (l *lease) CheckLock(ctx context.Context) error {
	if l.lock == nil {
		return nil
	}
	if err := l.lock.Check(); err != nil {
		return fmt.Errorf("filesystem workspace %q: %w", l.id, err)
	}
	return nil
}

// Read implements persist.StorageLease: the version is the sha256 of the
// opened file, whose content cannot change (files are replaced, never
// modified).
func (l *lease) Read(ctx context.Context, p string) (io.ReadCloser, persist.Version, error) {
	if ctx.Err() != nil {
		return nil, "", context.Cause(ctx)
	}
	file, err := l.resolve(p)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, "", fmt.Errorf("filesystem workspace %q: %s: %w", l.id, p, persist.ErrNotExist)
	}
	if err != nil {
		return nil, "", err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		f.Close()
		return nil, "", fmt.Errorf("filesystem workspace %q: %s is not a file: %w", l.id, p, persist.ErrNotExist)
	}
	var sum string
	if err == nil {
		sum, err = hashReader(ctx, f)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, persist.Version(sum), nil
}

func hashReader(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, r}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(ctx context.Context, file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(ctx, f)
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}

// Write implements persist.StorageLease.
func (l *lease) Write(ctx context.Context, p string, body io.Reader, opts persist.WriteOptions) (persist.Version, error) {
	if err := l.writable(ctx); err != nil {
		return "", err
	}
	dest, err := l.resolve(p)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	// Named apart from dest, so that a destination name of the longest
	// length allowed (255 bytes) still has a temporary name.
	tmp := filepath.Join(filepath.Dir(dest), "."+uuid.NewString()+tmpSuffix())
	defer os.Remove(tmp)
	sum, err := writeTemp(ctx, tmp, body, opts.ContentLength)
	if err != nil {
		return "", fmt.Errorf("filesystem workspace %q: write %s: %w", l.id, p, err)
	}
	switch opts.Condition.Kind() {
	case persist.ConditionAbsent:
		err = l.link(ctx, tmp, dest, p)
	case persist.ConditionVersion:
		err = l.swap(ctx, tmp, dest, p, opts.Condition.Version())
	default:
		if err = os.Rename(tmp, dest); err == nil {
			err = durable.SyncDir(filepath.Dir(dest))
		}
	}
	if err != nil {
		return "", err
	}
	return persist.Version(sum), nil
}

// writeTemp writes body to a new synced file and returns its hash.
func writeTemp(ctx context.Context, tmp string, body io.Reader, length int64) (string, error) {
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, body})
	if err == nil && length >= 0 && n != length {
		err = fmt.Errorf("body has %d bytes, content length is %d", n, length)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// link moves tmp to dest only if dest does not exist.
func (l *lease) link(ctx context.Context, tmp, dest, p string) error {
	err := os.Link(tmp, dest)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("filesystem workspace %q: %s exists: %w", l.id, p, persist.ErrPreconditionFailed)
	}
	if err != nil {
		// No hard links here: check and rename under the index lock.
		ilk, lerr := l.indexLock(ctx)
		if lerr != nil {
			return lerr
		}
		defer ilk.Release()
		if _, serr := os.Lstat(dest); serr == nil {
			return fmt.Errorf("filesystem workspace %q: %s exists: %w", l.id, p, persist.ErrPreconditionFailed)
		}
		if err := os.Rename(tmp, dest); err != nil {
			return err
		}
	}
	return durable.SyncDir(filepath.Dir(dest))
}

// swap moves tmp to dest only if dest's content hashes to want, under the
// brief index lock.
func (l *lease) swap(ctx context.Context, tmp, dest, p string, want persist.Version) error {
	ilk, err := l.indexLock(ctx)
	if err != nil {
		return err
	}
	defer ilk.Release()
	cur, err := hashFile(ctx, dest)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filesystem workspace %q: %s does not exist: %w", l.id, p, persist.ErrPreconditionFailed)
	}
	if err != nil {
		return err
	}
	if persist.Version(cur) != want {
		return fmt.Errorf("filesystem workspace %q: %s changed: %w", l.id, p, persist.ErrPreconditionFailed)
	}
	// The lock may have been taken over while waiting: never publish then.
	if err := l.CheckLock(ctx); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(dest))
}

// indexLock takes the brief compare-and-swap lock, waiting for a holder.
func (l *lease) indexLock(ctx context.Context) (*lockfile.Lock, error) {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	lk, err := lockfile.AcquireWait(ctx, filepath.Join(l.dir, indexLockName), lockfile.Options{Stale: IndexLockStale, Update: IndexLockStale / 4})
	if err != nil {
		return nil, fmt.Errorf("filesystem workspace %q: index lock: %w", l.id, err)
	}
	return lk, nil
}

// Copy implements persist.Copier with a hard link (falling back to a
// streamed copy where links are unsupported).
func (l *lease) Copy(ctx context.Context, src, dst string) error {
	if err := l.writable(ctx); err != nil {
		return err
	}
	from, err := l.resolve(src)
	if err != nil {
		return err
	}
	to, err := l.resolve(dst)
	if err != nil {
		return err
	}
	info, err := os.Lstat(from)
	if err != nil || !info.Mode().IsRegular() {
		return fmt.Errorf("filesystem workspace %q: %s: %w", l.id, src, persist.ErrNotExist)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	err = os.Link(from, to)
	switch {
	case err == nil:
		return durable.SyncDir(filepath.Dir(to))
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("filesystem workspace %q: %s exists: %w", l.id, dst, persist.ErrPreconditionFailed)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("filesystem workspace %q: %s: %w", l.id, src, persist.ErrNotExist)
	}
	f, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("filesystem workspace %q: %s: %w", l.id, src, persist.ErrNotExist)
	}
	defer f.Close()
	_, err = l.Write(ctx, dst, f, persist.WriteOptions{Condition: persist.Absent, ContentLength: info.Size()})
	return err
}

// List implements persist.StorageLease; temporary files of writes and
// adapter metadata are not objects.
func (l *lease) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := l.list(ctx, prefix, false)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Path
	}
	return out, nil
}

var _ persist.InfoLister = (*lease)(nil)

// ListInfo implements persist.InfoLister: List with each file's size and
// modification time.
func (l *lease) ListInfo(ctx context.Context, prefix string) ([]persist.ObjectInfo, error) {
	return l.list(ctx, prefix, true)
}

// list walks the objects under prefix, with their sizes and times when
// stat is set.
func (l *lease) list(ctx context.Context, prefix string, stat bool) ([]persist.ObjectInfo, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err := persist.ValidateStoragePrefix(prefix); err != nil {
		return nil, err
	}
	start := l.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(l.dir, filepath.FromSlash(prefix[:i]))
	}
	var out []persist.ObjectInfo
	err := filepath.WalkDir(start, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(l.dir, file)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, ".") || tmpPattern.MatchString(rel) || !strings.HasPrefix(rel, prefix) {
			return nil
		}
		o := persist.ObjectInfo{Path: rel}
		if stat {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			if err != nil {
				return err
			}
			o.Size, o.ModTime = info.Size(), info.ModTime()
		}
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b persist.ObjectInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Delete implements persist.StorageLease; directories left empty are
// removed too.
func (l *lease) Delete(ctx context.Context, paths []string) error {
	if err := l.writable(ctx); err != nil {
		return err
	}
	var errs []error
	dirs := map[string]bool{}
	for _, p := range paths {
		file, err := l.resolve(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			errs = append(errs, err)
			continue
		}
		dirs[filepath.Dir(file)] = true
	}
	// Remove emptied directories, deepest first, up to the segment.
	var ds []string
	for d := range dirs {
		for ; d != l.dir && strings.HasPrefix(d, l.dir+string(filepath.Separator)); d = filepath.Dir(d) {
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for _, d := range slices.Compact(ds) {
		_ = os.Remove(d) // fails while not empty
	}
	return errors.Join(errs...)
}

// Release implements persist.StorageLease: it releases the writer lock,
// reporting a lock found lost. It is idempotent.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return l.relErr
	}
	l.released = true
	if l.lock != nil {
		if err := l.lock.Release(); err != nil {
			l.relErr = fmt.Errorf("filesystem workspace %q: %w", l.id, err)
		}
	}
	return l.relErr
}

var _ persist.TempSweeper = (*lease)(nil)

// SweepTemporary implements persist.TempSweeper: it removes the temporary
// files of writes that a killed writer left in the workspace's directory:
// those whose name names a writer of this machine that is gone, and the
// others once they are older than age. It reports their paths relative
// to the directory.
func (l *lease) SweepTemporary(ctx context.Context, age time.Duration) (persist.Sweep, error) {
	var sw persist.Sweep
	err := filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if d.IsDir() || !tmpPattern.MatchString(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil || time.Since(info.ModTime()) < age && !tmpWriterGone(d.Name()) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			rel, _ := filepath.Rel(l.dir, p)
			sw.Removed = append(sw.Removed, filepath.ToSlash(rel))
			sw.Bytes += info.Size()
		}
		return nil
	})
	return sw, err
}
