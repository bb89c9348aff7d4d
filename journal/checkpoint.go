package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aml-go/aml/internal/filekind"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/durable"
)

// Workspace checkpoints (eval.Checkpointer). A run's directory holds them
// next to its journal:
//
//	objects/<sha256 hex>      a file's content, shared by all checkpoints
//	checkpoints/<id>.json     one checkpoint's manifest
//
// See the package documentation for the format and the guarantees.

// Names inside a run's directory, besides logName.
const (
	objectsName     = "objects"
	checkpointsName = "checkpoints"
	// tmpPrefix starts the names of objects and manifests being written;
	// the first Checkpoint of a Run removes those a crash left.
	tmpPrefix = ".tmp-"
	// restorePrefix starts the names of files Restore is writing in the
	// restored tree (next to the file they replace).
	restorePrefix = ".aml-restore-"
	// manifestVersion is the "v" of the manifests this package writes.
	manifestVersion = 1
)

// racyWindow: a file modified less than this long before it was looked
// at is never trusted to the stat cache, since a later write within the
// file system's timestamp granularity could leave its size and
// modification time as they were (git's "racily clean" entries). It
// covers the coarsest common granularity (2 s, FAT).
const racyWindow = 2 * time.Second

var _ eval.Checkpointer = (*Run)(nil)

// manifest is a checkpoint's manifest file.
type manifest struct {
	V       int             `json:"v"`
	Entries []manifestEntry `json:"entries"`
}

// manifestEntry is one file or directory of a checkpoint.
type manifestEntry struct {
	// Path is slash-separated, relative to the checkpointed directory; a
	// directory's entry comes before its contents'.
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	// Mode holds the permission bits (the 0777 part).
	Mode uint32 `json:"mode"`
	// Size, MTime (unix ns) and SHA256 (hex, lowercase) are the file's;
	// a directory has its MTime only.
	Size   int64  `json:"size,omitempty"`
	MTime  int64  `json:"mtime"`
	SHA256 string `json:"sha256,omitempty"`
}

// checkpoints is a Run's checkpoint state, guarded by Run.cpMu.
type checkpoints struct {
	// ready: objects/ and checkpoints/ exist, the garbage of torn
	// checkpoints is removed and objects and seq are read from them.
	ready bool
	// seq is the highest checkpoint number taken, found on disk or named
	// by a record: the next checkpoint is seq+1.
	seq uint64
	// objects are the objects known to be in objects/; dirty is set while
	// some of them were renamed into place and objects/ was not fsynced.
	objects map[[32]byte]bool
	dirty   bool
	// cache holds the content hashes of the files the last Checkpoint or
	// Restore of a directory saw, by the directory's absolute path and
	// the file's slash path, with the stat they were computed for.
	cache map[string]map[string]fileSum
	buf   []byte // for copying
	// Test hooks: objects written, files hashed, files Restore wrote,
	// and the fsyncs of files and of directories.
	objectWrites, hashes, restoreWrites, fileSyncs, dirSyncs int
}

// init allocates the buffer and the cache.
func (cp *checkpoints) init() {
	if cp.buf == nil {
		cp.buf = make([]byte, 64<<10)
	}
	if cp.cache == nil {
		cp.cache = map[string]map[string]fileSum{}
	}
}

// fileSum is a file's content hash and the stat it was computed for.
type fileSum struct {
	size, mtime, ctime int64
	ino                uint64
	sum                [32]byte
}

// statSum returns the cache key of info (its sum left zero).
func statSum(info fs.FileInfo) fileSum {
	ino, ctime := statIDs(info)
	return fileSum{size: info.Size(), mtime: info.ModTime().UnixNano(), ctime: ctime, ino: ino}
}

// sameStat reports whether a and b are the stat of the same, unchanged
// file.
func (a fileSum) sameStat(b fileSum) bool {
	return a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime && a.ino == b.ino
}

// cacheable reports whether a file with stat s, looked at time now, may
// be trusted to the cache.
func (s fileSum) cacheable(now time.Time) bool {
	return s.mtime < now.Add(-racyWindow).UnixNano()
}

// Checkpoint implements eval.Checkpointer: it stores a copy of the tree
// under dir (walked without following symbolic links, dotfiles included)
// in the run's directory and returns its id, the checkpoint's number as
// 8 decimal digits. Ids sort in the order the checkpoints were taken, also
// across Close and Open: a Run numbers its checkpoints after the highest
// one in the run's directory or named by a record. An entry that is
// neither a regular file nor a directory, or whose name is not valid
// UTF-8, is an error naming it.
//
// Files are stored by content (objects/<sha256>), each content once per
// run. A file whose size, modification time, inode and change time are
// those a previous Checkpoint or Restore of dir by this Run saw, and
// that was not modified within racyWindow (2 s) before that, is not read
// again. When Checkpoint returns the checkpoint is durable (its objects,
// its manifest and their directories were fsynced), so a record that
// names it can be synced; a crash leaves it whole or absent.
//
// Checkpoint and Restore are serialized; Close waits for them. Checkpoint
// fails after Close. It is safe for concurrent use.
func (r *Run) Checkpoint(ctx context.Context, dir string) (string, error) {
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	if err := r.readyLocked(); err != nil {
		return "", err
	}
	cp := &r.cp
	root, err := checkpointRoot(dir)
	if err != nil {
		return "", fmt.Errorf("cannot checkpoint %s: %w", dir, err)
	}
	now := time.Now()
	old := cp.cache[root]
	cache := make(map[string]fileSum, len(old))
	m := manifest{V: manifestVersion, Entries: make([]manifestEntry, 0, len(old))}
	err = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel := relPath(root, p)
		if !utf8.ValidString(rel) {
			// JSON strings cannot hold it: the name would change.
			return fmt.Errorf("the name of %q is not valid UTF-8, which a checkpoint cannot hold", p)
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		e := manifestEntry{Path: rel, Mode: uint32(info.Mode().Perm()), MTime: info.ModTime().UnixNano()}
		switch {
		case info.IsDir():
			e.Dir = true
		case info.Mode().IsRegular():
			s := statSum(info)
			if prev, ok := old[rel]; ok && prev.sameStat(s) {
				s.sum = prev.sum
			} else if s.sum, s.size, err = r.hashFile(p); err != nil {
				return err
			}
			if !cp.objects[s.sum] {
				if s.sum, s.size, err = r.writeObject(p); err != nil {
					return err
				}
			}
			if s.size == info.Size() && s.cacheable(now) {
				cache[rel] = s
			}
			e.Size, e.SHA256 = s.size, hex.EncodeToString(s.sum[:])
		default:
			return fmt.Errorf("%s is a %s: a checkpoint holds only regular files and directories", p, filekind.Name(info.Mode()))
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("cannot checkpoint %s: %w", dir, err)
	}
	if cp.dirty {
		objDir := filepath.Join(r.dir, objectsName)
		cp.dirSyncs++
		if err := durable.SyncDir(objDir); err != nil {
			return "", fmt.Errorf("cannot checkpoint %s: cannot sync %s: %w", dir, objDir, err)
		}
		cp.dirty = false
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("cannot checkpoint %s: %w", dir, err)
	}
	cp.seq++
	id := fmt.Sprintf("%08d", cp.seq)
	cp.fileSyncs++
	cp.dirSyncs++
	mpath := filepath.Join(r.dir, checkpointsName, id+".json")
	if err := durable.Write(mpath, b, durable.Options{Perm: 0o600, Umask: true, Temp: tmpPrefix + "*"}); err != nil {
		return "", fmt.Errorf("cannot checkpoint %s: %w", dir, err)
	}
	cp.cache[root] = cache
	return id, nil
}

// Restore implements eval.Checkpointer: it makes the tree under dir
// (created 0700 when missing) equal to checkpoint id. Entries the
// checkpoint lacks, or has with another type, are removed (directories
// whole, symbolic links themselves and never what they point to);
// missing directories are created; a file is written (to a temporary
// name, then renamed over the old one) unless it has the checkpoint's
// size and content already. Files and directories then get the
// checkpoint's permission bits and modification times. The mode of dir
// itself is kept. An unknown id is an error naming it and the run; a
// missing or damaged object fails Restore, which may then leave the tree
// partly restored. Restore fails after Close. It is safe for concurrent
// use.
func (r *Run) Restore(ctx context.Context, id, dir string) error {
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	if err := r.openLocked(); err != nil {
		return err
	}
	m, err := r.readManifest(id)
	if err != nil {
		return err
	}
	if err := r.restore(ctx, m, dir); err != nil {
		return fmt.Errorf("cannot restore checkpoint %s of run %s into %s: %w", id, r.id, dir, err)
	}
	return nil
}

func (r *Run) restore(ctx context.Context, m *manifest, dir string) error {
	cp := &r.cp
	cp.init()
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	root, err := checkpointRoot(dir)
	if err != nil {
		return err
	}
	rootInfo, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if perm := rootInfo.Mode().Perm(); perm&0o700 != 0o700 {
		if err := os.Chmod(root, perm|0o700); err != nil {
			return err
		}
		defer os.Chmod(root, perm)
	}
	index := make(map[string]int, len(m.Entries))
	for i, e := range m.Entries {
		index[e.Path] = i
	}

	// What is there: the entries to keep, and those to remove.
	present := make(map[string]fs.FileInfo, len(m.Entries))
	var stale []string
	err = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel := relPath(root, p)
		i, ok := index[rel]
		if !ok || m.Entries[i].Dir != de.IsDir() || (!de.IsDir() && !de.Type().IsRegular()) {
			stale = append(stale, p)
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		// A directory must be writable and searchable while it is
		// restored; its mode is set at the end.
		if perm := info.Mode().Perm(); info.IsDir() && perm&0o700 != 0o700 {
			if err := os.Chmod(p, perm|0o700); err != nil {
				return err
			}
		}
		present[rel] = info
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := removeAll(p); err != nil {
			return err
		}
	}

	// Directories and files, parents first.
	now := time.Now()
	old := cp.cache[root]
	cache := make(map[string]fileSum, len(m.Entries))
	delete(cp.cache, root) // until it is rebuilt
	for i := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := &m.Entries[i]
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		info, ok := present[e.Path]
		if e.Dir {
			if !ok {
				if err := os.Mkdir(p, dirPerm); err != nil {
					return err
				}
			}
			continue
		}
		want, err := hex.DecodeString(e.SHA256)
		if err != nil {
			return err // readManifest checked it
		}
		if ok && info.Size() == e.Size {
			s := statSum(info)
			if prev, hit := old[e.Path]; hit && prev.sameStat(s) {
				s.sum = prev.sum
			} else if s.sum, _, err = r.hashFile(p); err != nil {
				return err
			}
			if string(s.sum[:]) == string(want) {
				touched := false
				if uint32(info.Mode().Perm()) != e.Mode {
					if err := os.Chmod(p, fs.FileMode(e.Mode)); err != nil {
						return err
					}
					touched = true
				}
				if info.ModTime().UnixNano() != e.MTime {
					if err := os.Chtimes(p, time.Time{}, time.Unix(0, e.MTime)); err != nil {
						return err
					}
					touched = true
				}
				if touched {
					if info, err = os.Lstat(p); err != nil {
						return err
					}
					sum := s.sum
					s = statSum(info)
					s.sum = sum
				}
				if s.cacheable(now) {
					cache[e.Path] = s
				}
				continue
			}
		}
		if err := r.restoreFile(p, e, want); err != nil {
			return err
		}
		if info, err := os.Lstat(p); err == nil {
			if s := statSum(info); s.cacheable(now) {
				copy(s.sum[:], want)
				cache[e.Path] = s
			}
		}
	}

	// Modes and times of directories, children first (setting them does
	// not change the parent's).
	for i := len(m.Entries) - 1; i >= 0; i-- {
		e := &m.Entries[i]
		if !e.Dir {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if info.ModTime().UnixNano() != e.MTime {
			if err := os.Chtimes(p, time.Time{}, time.Unix(0, e.MTime)); err != nil {
				return err
			}
		}
		if uint32(info.Mode().Perm()) != e.Mode {
			if err := os.Chmod(p, fs.FileMode(e.Mode)); err != nil {
				return err
			}
		}
	}
	cp.cache[root] = cache
	return nil
}

// LastCheckpoint implements eval.Checkpointer: it returns the Checkpoint
// of the last effect record (in file order, those appended since Open
// last) that names one, or "". It is safe for concurrent use.
func (r *Run) LastCheckpoint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeQueuedLocked()
	return r.lastCheckpoint
}

// openLocked fails once the run is closed. r.cpMu is held (Close takes
// it, so the answer holds until it is released).
func (r *Run) openLocked() error {
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return fmt.Errorf("run %s: %w", r.id, ErrClosed)
	}
	return nil
}

// readyLocked prepares r's checkpoint state for a Checkpoint: it creates
// objects/ and checkpoints/ (fsyncing the run's directory when it did),
// removes what torn checkpoints left there, and reads which objects
// exist and the highest checkpoint number. r.cpMu is held.
func (r *Run) readyLocked() error {
	if err := r.openLocked(); err != nil {
		return err
	}
	cp := &r.cp
	if cp.ready {
		return nil
	}
	cp.init()
	cp.objects, cp.dirty = map[[32]byte]bool{}, false
	created := false
	for _, name := range []string{objectsName, checkpointsName} {
		err := os.Mkdir(filepath.Join(r.dir, name), dirPerm)
		if err == nil {
			created = true
		} else if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cannot create the checkpoint directory of run %s: %w", r.id, err)
		}
	}
	if created {
		cp.dirSyncs++
		if err := durable.SyncDir(r.dir); err != nil {
			return fmt.Errorf("cannot sync the run's directory %s: %w", r.dir, err)
		}
	}
	for _, name := range []string{objectsName, checkpointsName} {
		d := filepath.Join(r.dir, name)
		entries, err := os.ReadDir(d)
		if err != nil {
			return fmt.Errorf("cannot read the checkpoints of run %s: %w", r.id, err)
		}
		for _, de := range entries {
			n := de.Name()
			if strings.HasPrefix(n, tmpPrefix) {
				// A torn write; the run's lock keeps others out.
				if err := os.RemoveAll(filepath.Join(d, n)); err != nil {
					return fmt.Errorf("cannot remove a torn checkpoint's file: %w", err)
				}
				continue
			}
			if !de.Type().IsRegular() {
				continue
			}
			if name == objectsName {
				if sum, ok := parseSum(n); ok {
					cp.objects[sum] = true
				}
			} else if id, ok := strings.CutSuffix(n, ".json"); ok {
				if seq, ok := parseCheckpointID(id); ok {
					cp.seq = max(cp.seq, seq)
				}
			}
		}
	}
	r.mu.Lock()
	r.writeQueuedLocked()
	for _, e := range r.order {
		if seq, ok := parseCheckpointID(e.Checkpoint); ok {
			cp.seq = max(cp.seq, seq)
		}
	}
	r.mu.Unlock()
	cp.ready = true
	return nil
}

// pruneCheckpoints removes the run's checkpoints (SetState does when the
// run succeeded). Failures are ignored: Prune removes the whole run
// later. Later checkpoints start over, numbered after the pruned ones.
func (r *Run) pruneCheckpoints() {
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	os.RemoveAll(filepath.Join(r.dir, checkpointsName)) // manifests first: no manifest outlives its objects
	os.RemoveAll(filepath.Join(r.dir, objectsName))
	r.cp.ready, r.cp.objects, r.cp.cache = false, nil, nil
}

// hashFile returns the SHA-256 and the length of the file at p.
func (r *Run) hashFile(p string) (sum [32]byte, n int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err = io.CopyBuffer(h, struct{ io.Reader }{f}, r.cp.buf)
	if err != nil {
		return sum, 0, err
	}
	r.cp.hashes++
	h.Sum(sum[:0])
	return sum, n, nil
}

// writeObject stores the content of the file at p as an object (to a
// temporary name, fsynced, then renamed) and returns its SHA-256 and
// length: those of what it read, which are what a file that changed
// since it was hashed holds now.
func (r *Run) writeObject(p string) (sum [32]byte, n int64, err error) {
	src, err := os.Open(p)
	if err != nil {
		return sum, 0, err
	}
	defer src.Close()
	objDir := filepath.Join(r.dir, objectsName)
	tmp, err := os.CreateTemp(objDir, tmpPrefix+"*")
	if err != nil {
		return sum, 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err = io.CopyBuffer(struct{ io.Writer }{io.MultiWriter(tmp, h)}, struct{ io.Reader }{src}, r.cp.buf)
	if err != nil {
		return sum, 0, fmt.Errorf("cannot copy %s into the checkpoint: %w", p, err)
	}
	h.Sum(sum[:0])
	if r.cp.objects[sum] { // it changed into content stored already
		return sum, n, nil
	}
	r.cp.fileSyncs++
	if err := tmp.Sync(); err != nil {
		return sum, 0, fmt.Errorf("cannot sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return sum, 0, fmt.Errorf("cannot write %s: %w", tmp.Name(), err)
	}
	done = true
	if err := os.Rename(tmp.Name(), filepath.Join(objDir, hex.EncodeToString(sum[:]))); err != nil {
		os.Remove(tmp.Name())
		return sum, 0, err
	}
	r.cp.objects[sum], r.cp.dirty = true, true
	r.cp.objectWrites++
	return sum, n, nil
}

// restoreFile writes the file of entry e (whose SHA-256 is want) at p
// from its object, through a temporary file in p's directory, checking
// the object's content on the way.
func (r *Run) restoreFile(p string, e *manifestEntry, want []byte) error {
	obj := filepath.Join(r.dir, objectsName, e.SHA256)
	src, err := os.Open(obj)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: the object of %s (%s) is missing", ErrCorrupt, e.Path, obj)
		}
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(p), restorePrefix+"*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.CopyBuffer(struct{ io.Writer }{io.MultiWriter(tmp, h)}, struct{ io.Reader }{src}, r.cp.buf)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	if n != e.Size || string(h.Sum(nil)) != string(want) {
		return fmt.Errorf("%w: the object of %s (%s) does not hold its content", ErrCorrupt, e.Path, obj)
	}
	if err := tmp.Chmod(fs.FileMode(e.Mode)); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	done = true
	err = os.Chtimes(tmp.Name(), time.Time{}, time.Unix(0, e.MTime))
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot restore %s: %w", p, err)
	}
	r.cp.restoreWrites++
	return nil
}

// readManifest reads and checks the manifest of checkpoint id.
func (r *Run) readManifest(id string) (*manifest, error) {
	unknown := fmt.Errorf("run %s has no checkpoint %q: %w", r.id, id, fs.ErrNotExist)
	if _, ok := parseCheckpointID(id); !ok {
		return nil, unknown
	}
	path := filepath.Join(r.dir, checkpointsName, id+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, unknown
		}
		return nil, fmt.Errorf("cannot read checkpoint %s of run %s: %w", id, r.id, err)
	}
	m := new(manifest)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: checkpoint %s of run %s (%s): %s", ErrCorrupt, id, r.id, path, fmt.Sprintf(format, args...))
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, bad("%v", err)
	}
	if m.V < 1 || m.V > manifestVersion {
		return nil, bad("format version %d; this program reads version %d", m.V, manifestVersion)
	}
	dirs := map[string]bool{".": true}
	seen := make(map[string]bool, len(m.Entries))
	for _, e := range m.Entries {
		p := e.Path
		if !fs.ValidPath(p) || p == "." || (filepath.Separator != '/' && strings.ContainsRune(p, filepath.Separator)) {
			return nil, bad("invalid path %q", p)
		}
		if seen[p] {
			return nil, bad("%s is listed twice", p)
		}
		seen[p] = true
		if parent, _ := splitParent(p); !dirs[parent] {
			return nil, bad("%s comes before its directory", p)
		}
		if e.Mode&^0o777 != 0 {
			return nil, bad("%s has an invalid mode %o", p, e.Mode)
		}
		if e.Dir {
			dirs[p] = true
			continue
		}
		if _, ok := parseSum(e.SHA256); !ok || e.Size < 0 {
			return nil, bad("%s has an invalid size or hash", p)
		}
	}
	return m, nil
}

// removeAll removes p like os.RemoveAll, also when it holds directories
// without write or search permission.
func removeAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, de fs.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// checkpointRoot returns dir as an absolute, clean path, checking that it
// is a directory.
func checkpointRoot(dir string) (string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	info, err := os.Lstat(root)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is a %s, not a directory", root, filekind.Name(info.Mode()))
	}
	return root, nil
}

// relPath returns the slash path of p, which WalkDir found under root.
func relPath(root, p string) string {
	return filepath.ToSlash(strings.TrimPrefix(p[len(root):], string(filepath.Separator)))
}

// splitParent splits a slash path into its parent ("." for none) and
// base name.
func splitParent(p string) (parent, base string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i], p[i+1:]
}

// parseCheckpointID reads a checkpoint id's number: ids are decimal
// digits (8 as this package writes them).
func parseCheckpointID(id string) (uint64, bool) {
	if id == "" || len(id) > 19 || !digits(id) {
		return 0, false
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}

// parseSum reads a lowercase hex SHA-256.
func parseSum(s string) (sum [32]byte, ok bool) {
	if len(s) != 64 || strings.ToLower(s) != s {
		return sum, false
	}
	_, err := hex.Decode(sum[:], []byte(s))
	return sum, err == nil
}

// statIDs returns the inode number and the change time (unix ns) of
// info's system stat where the platform has them (the unix ones have
// Ino and Ctim or Ctimespec), or zeros. It reads the fields by name so
// that this file builds on every platform.
func statIDs(info fs.FileInfo) (ino uint64, ctime int64) {
	v := reflect.ValueOf(info.Sys())
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, 0
	}
	v = v.Elem()
	fx := statFieldsOf(v.Type())
	if fx.ino != nil {
		switch f := v.FieldByIndex(fx.ino); {
		case f.CanUint():
			ino = f.Uint()
		case f.CanInt():
			ino = uint64(f.Int())
		}
	}
	if fx.sec != nil {
		ctime = v.FieldByIndex(fx.sec).Int()*1e9 + v.FieldByIndex(fx.nsec).Int()
	}
	return ino, ctime
}

// statFields are the indexes of the fields statIDs reads in a stat
// struct type, nil when it has none.
type statFields struct{ ino, sec, nsec []int }

var statFieldCache sync.Map // reflect.Type → *statFields

func statFieldsOf(t reflect.Type) *statFields {
	if fx, ok := statFieldCache.Load(t); ok {
		return fx.(*statFields)
	}
	fx := new(statFields)
	if f, ok := t.FieldByName("Ino"); ok {
		if k := f.Type.Kind(); reflect.Int <= k && k <= reflect.Uint64 {
			fx.ino = f.Index
		}
	}
	for _, name := range []string{"Ctim", "Ctimespec"} {
		f, ok := t.FieldByName(name)
		if !ok || f.Type.Kind() != reflect.Struct {
			continue
		}
		sec, ok1 := f.Type.FieldByName("Sec")
		nsec, ok2 := f.Type.FieldByName("Nsec")
		if ok1 && ok2 && isInt(sec.Type.Kind()) && isInt(nsec.Type.Kind()) {
			fx.sec = append(append([]int(nil), f.Index...), sec.Index...)
			fx.nsec = append(append([]int(nil), f.Index...), nsec.Index...)
			break
		}
	}
	statFieldCache.Store(t, fx)
	return fx
}

func isInt(k reflect.Kind) bool { return reflect.Int <= k && k <= reflect.Int64 }
