package eval

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// MemoryJournal is a Journal that keeps its records in memory: for tests
// and embedders whose runs need not survive the process. It is safe for
// concurrent use.
type MemoryJournal struct {
	mu sync.Mutex
	// effects indexes order[:indexed] by id; Lookup indexes the rest.
	effects map[string]*Effect
	order   []*Effect
	indexed int
	syncs   int
	// trees are the checkpoints, by id.
	trees    map[string]memTree
	restores int
}

// NewMemoryJournal returns an empty in-memory journal.
func NewMemoryJournal() *MemoryJournal { return &MemoryJournal{effects: map[string]*Effect{}} }

// Lookup implements Journal.
func (m *MemoryJournal) Lookup(id string) *Effect {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.order[m.indexed:] {
		m.effects[e.ID] = e
	}
	m.indexed = len(m.order)
	return m.effects[id]
}

// Record implements Journal.
func (m *MemoryJournal) Record(e *Effect) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.order = append(m.order, e)
	return nil
}

// Len implements SizedJournal.
func (m *MemoryJournal) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.order)
}

// Sync implements Journal; it only counts the calls.
func (m *MemoryJournal) Sync() error {
	m.mu.Lock()
	m.syncs++
	m.mu.Unlock()
	return nil
}

// Effects returns the records in the order they were appended.
func (m *MemoryJournal) Effects() []*Effect {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Effect(nil), m.order...)
}

// memTree is one in-memory checkpoint: slash paths to files ("" data
// and dir set for directories).
type memTree map[string]memFile

type memFile struct {
	dir  bool
	mode fs.FileMode
	data []byte
}

// Checkpoint implements Checkpointer: the tree under dir is copied into
// memory.
func (m *MemoryJournal) Checkpoint(ctx context.Context, dir string) (string, error) {
	tree := memTree{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case de.IsDir():
			tree[rel] = memFile{dir: true, mode: info.Mode().Perm()}
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = memFile{mode: info.Mode().Perm(), data: b}
		default:
			return fmt.Errorf("%s is neither a regular file nor a directory", rel)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.trees == nil {
		m.trees = map[string]memTree{}
	}
	id := fmt.Sprintf("%08d", len(m.trees)+1)
	m.trees[id] = tree
	return id, nil
}

// Restore implements Checkpointer.
func (m *MemoryJournal) Restore(ctx context.Context, id, dir string) error {
	m.mu.Lock()
	tree, ok := m.trees[id]
	m.restores++
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("no checkpoint %q", id)
	}
	var stale []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if f, ok := tree[filepath.ToSlash(rel)]; !ok || f.dir != de.IsDir() {
			stale = append(stale, p)
			if de.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents first
	for _, rel := range paths {
		f := tree[rel]
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if f.dir {
			if err := os.MkdirAll(p, f.mode|0o700); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// LastCheckpoint implements Checkpointer.
func (m *MemoryJournal) LastCheckpoint() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.order) - 1; i >= 0; i-- {
		if c := m.order[i].Checkpoint; c != "" {
			return c
		}
	}
	return ""
}

// Restores counts the Restore calls, for tests.
func (m *MemoryJournal) Restores() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restores
}

// Truncated returns a journal holding the first n records of m and all
// its checkpoints: the journal a crash after the n-th record would leave.
// It is for tests of resumption.
func (m *MemoryJournal) Truncated(n int) *MemoryJournal {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMemoryJournal()
	out.order = append(out.order, m.order[:min(n, len(m.order))]...)
	out.trees = maps.Clone(m.trees)
	return out
}
