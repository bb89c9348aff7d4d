package temporal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// Workspace checkpoints of runs on Temporal. After every effect that can
// write in a workspace, the worker that holds it records the workspace's
// regular files and directories in the checkpoint store (a persist.Storage,
// usually the blob store): each file's content once, as a blob named by its
// SHA-256, and a manifest blob that lists the tree. A checkpoint's id,
// which history records, is "<manifest sha256>:<size>". When the worker
// dies, the worker that acquires the workspace again makes its tree equal
// to the newest checkpoint. Blobs are never overwritten or deleted.

// cpManifest is a checkpoint's manifest.
type cpManifest struct {
	V       int       `json:"v"`
	Entries []cpEntry `json:"entries"`
}

// cpEntry is one directory or regular file of a checkpoint; a directory
// comes before its contents.
type cpEntry struct {
	Path   string `json:"path"`
	Dir    bool   `json:"dir,omitempty"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// checkpointer checkpoints one held workspace directory.
type checkpointer struct {
	storage persist.Storage
	dir     string

	mu sync.Mutex
	// known are the files whose content was stored, by path, with the
	// size and modification time they had then; a file that still has
	// them (and was not modified within racyWindow of being looked at)
	// is not read again.
	known map[string]cpKnown
}

type cpKnown struct {
	size, mtime int64
	sha         string
}

// racyWindow: a file modified this recently is read again, since a write
// within the file system's timestamp granularity could leave its size and
// modification time unchanged.
const racyWindow = 2 * time.Second

func newCheckpointer(storage persist.Storage, dir string) *checkpointer {
	return &checkpointer{storage: storage, dir: dir, known: map[string]cpKnown{}}
}

func (c *checkpointer) lease(ctx context.Context) (persist.StorageLease, error) {
	if c.storage == nil {
		return nil, errors.New("no checkpoint store is configured: give every worker the same blob store (aml worker --blob-store)")
	}
	l, err := c.storage.Acquire(ctx, persist.StorageAcquireRequest{ID: BlobNamespace})
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", c.storage.Name(), err)
	}
	return l, nil
}

// putBlob stores data under its digest, unless it is there already.
func putBlob(ctx context.Context, l persist.StorageLease, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	_, err := l.Write(ctx, blobPath(digest), bytes.NewReader(data), persist.WriteOptions{Condition: persist.Absent, ContentLength: int64(len(data))})
	if err != nil && !errors.Is(err, persist.ErrPreconditionFailed) {
		return "", fmt.Errorf("storing blob %s: %w", digest, err)
	}
	return digest, nil
}

// checkpoint records the directory and returns the checkpoint's id.
func (c *checkpointer) checkpoint(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := c.lease(ctx)
	if err != nil {
		return "", err
	}
	defer l.Release(context.WithoutCancel(ctx))
	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	m := cpManifest{V: 1}
	seen := map[string]bool{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			m.Entries = append(m.Entries, cpEntry{Path: p, Dir: true, Mode: uint32(info.Mode().Perm())})
			return nil
		case !info.Mode().IsRegular():
			return nil // links and devices are not part of a checkpoint
		}
		e := cpEntry{Path: p, Mode: uint32(info.Mode().Perm()), Size: info.Size()}
		k, ok := c.known[p]
		if ok && k.size == info.Size() && k.mtime == info.ModTime().UnixNano() && time.Since(info.ModTime()) > racyWindow {
			e.SHA256 = k.sha
		} else {
			data, err := root.ReadFile(p)
			if err != nil {
				return err
			}
			if e.SHA256, err = putBlob(ctx, l, data); err != nil {
				return err
			}
			e.Size = int64(len(data))
			c.known[p] = cpKnown{size: e.Size, mtime: info.ModTime().UnixNano(), sha: e.SHA256}
		}
		seen[p] = true
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return "", err
	}
	for p := range c.known {
		if !seen[p] {
			delete(c.known, p)
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	digest, err := putBlob(ctx, l, data)
	if err != nil {
		return "", err
	}
	return digest + ":" + strconv.Itoa(len(data)), nil
}

// restore makes the directory's tree equal to checkpoint id: files and
// directories it does not list are removed, the others written.
func (c *checkpointer) restore(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	digest, sizeText, ok := strings.Cut(id, ":")
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if !ok || err != nil || len(digest) != 64 {
		return fmt.Errorf("checkpoint id %q is not <sha256>:<size>", id)
	}
	l, err := c.lease(ctx)
	if err != nil {
		return err
	}
	defer l.Release(context.WithoutCancel(ctx))
	data, err := readBlob(ctx, l, digest, size)
	if err != nil {
		return err
	}
	var m cpManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("checkpoint %s is not a manifest: %w", id, err)
	}
	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	want := map[string]cpEntry{}
	for _, e := range m.Entries {
		if !fs.ValidPath(e.Path) || e.Path == "." {
			return fmt.Errorf("checkpoint %s lists an invalid path %q", id, e.Path)
		}
		want[e.Path] = e
	}
	// Remove what the checkpoint does not list, deepest first.
	var extra []string
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		e, ok := want[p]
		if !ok || e.Dir != d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			extra = append(extra, p)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	slices.SortFunc(extra, func(a, b string) int { return len(b) - len(a) })
	for _, p := range extra {
		if err := root.RemoveAll(p); err != nil {
			return err
		}
	}
	clear(c.known)
	for _, e := range m.Entries {
		if e.Dir {
			if err := root.MkdirAll(e.Path, 0o755); err != nil {
				return err
			}
			_ = root.Chmod(e.Path, fs.FileMode(e.Mode)|0o700)
			continue
		}
		if cur, err := root.ReadFile(e.Path); err == nil {
			sum := sha256.Sum256(cur)
			if hex.EncodeToString(sum[:]) == e.SHA256 {
				_ = root.Chmod(e.Path, fs.FileMode(e.Mode))
				continue
			}
		}
		content, err := readBlob(ctx, l, e.SHA256, e.Size)
		if err != nil {
			return err
		}
		if err := eval.DirFiles(c.dir).WriteFile(ctx, e.Path, content); err != nil {
			return err
		}
		_ = root.Chmod(e.Path, fs.FileMode(e.Mode))
	}
	return nil
}

// maxReadBytes bounds a file read from a held workspace: it travels in one
// activity result.
const maxReadBytes = MaxBlobBytes
