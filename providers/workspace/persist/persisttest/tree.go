// Package persisttest checks persist.Storage adapters and the providers
// persist.New builds over them, and offers the tree and counting helpers
// those checks use. RunStorage and RunProvider are called from an
// adapter's tests with a constructor of fresh, empty storage.
package persisttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/providers/workspace/persist"
)

// File is one entry of a Tree: a directory or a regular file.
type File struct {
	// Data is a file's content.
	Data string
	// Mode holds the permission bits.
	Mode fs.FileMode
	// Dir marks a directory.
	Dir bool
}

// Tree maps slash-separated relative paths to entries.
type Tree map[string]File

// WriteTree creates t's entries below dir (parents first, modes applied
// last, deepest first, so that read-only directories can be filled).
func WriteTree(tb testing.TB, dir string, t Tree) {
	tb.Helper()
	paths := slices.Sorted(maps.Keys(t))
	for _, p := range paths {
		f := t[p]
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			tb.Fatal(err)
		}
		if f.Dir {
			if err := os.MkdirAll(abs, 0o755); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(abs, []byte(f.Data), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	slices.SortFunc(paths, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range paths {
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(p)), t[p].Mode); err != nil {
			tb.Fatal(err)
		}
	}
}

// ReadTree returns the entries below dir (not following symlinks; other
// non-regular files fail the test).
func ReadTree(tb testing.TB, dir string) Tree {
	tb.Helper()
	t := Tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			t[rel] = File{Dir: true, Mode: info.Mode().Perm()}
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			t[rel] = File{Data: string(data), Mode: info.Mode().Perm()}
		default:
			return fmt.Errorf("%s is not a file or directory", rel)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// ClearDir removes everything below dir, keeping dir.
func ClearDir(tb testing.TB, dir string) {
	tb.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(q, 0o700)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			tb.Fatal(err)
		}
	}
}

// DiffTrees describes how got differs from want ("" when equal).
func DiffTrees(want, got Tree) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[p]
		switch {
		case !ok:
			fmt.Fprintf(&b, "missing %s\n", p)
		case g.Dir != want[p].Dir:
			fmt.Fprintf(&b, "%s: dir=%v, want %v\n", p, g.Dir, want[p].Dir)
		case g.Mode != want[p].Mode:
			fmt.Fprintf(&b, "%s: mode %v, want %v\n", p, g.Mode, want[p].Mode)
		case g.Data != want[p].Data:
			fmt.Fprintf(&b, "%s: content differs (%d bytes, want %d)\n", p, len(g.Data), len(want[p].Data))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "unexpected %s\n", p)
		}
	}
	return b.String()
}

// CountingStorage wraps a Storage and counts the body bytes its leases
// write and the copies they make. It forwards Copy and CheckLock when the
// wrapped lease supports them. It is safe for concurrent use.
type CountingStorage struct {
	persist.Storage
	written atomic.Int64
	writes  atomic.Int64
	copies  atomic.Int64
}

// NewCountingStorage wraps s.
func NewCountingStorage(s persist.Storage) *CountingStorage {
	return &CountingStorage{Storage: s}
}

// BytesWritten is the total of body bytes passed to Write.
func (c *CountingStorage) BytesWritten() int64 { return c.written.Load() }

// Writes is the number of successful Write calls.
func (c *CountingStorage) Writes() int64 { return c.writes.Load() }

// Copies is the number of successful Copy calls.
func (c *CountingStorage) Copies() int64 { return c.copies.Load() }

// Reset zeroes the counters.
func (c *CountingStorage) Reset() {
	c.written.Store(0)
	c.writes.Store(0)
	c.copies.Store(0)
}

// Acquire implements persist.Storage.
func (c *CountingStorage) Acquire(ctx context.Context, req persist.StorageAcquireRequest) (persist.StorageLease, error) {
	l, err := c.Storage.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return &countingLease{StorageLease: l, c: c}, nil
}

type countingLease struct {
	persist.StorageLease
	c *CountingStorage
}

func (l *countingLease) Write(ctx context.Context, p string, body io.Reader, opts persist.WriteOptions) (persist.Version, error) {
	cr := &countReader{r: body}
	v, err := l.StorageLease.Write(ctx, p, cr, opts)
	l.c.written.Add(cr.n)
	if err == nil {
		l.c.writes.Add(1)
	}
	return v, err
}

func (l *countingLease) Copy(ctx context.Context, src, dst string) error {
	cp, ok := l.StorageLease.(persist.Copier)
	if !ok {
		return errors.ErrUnsupported
	}
	err := cp.Copy(ctx, src, dst)
	if err == nil {
		l.c.copies.Add(1)
	}
	return err
}

func (l *countingLease) CheckLock(ctx context.Context) error {
	if lc, ok := l.StorageLease.(persist.LockChecker); ok {
		return lc.CheckLock(ctx)
	}
	return nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
