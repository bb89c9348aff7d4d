package lsp

import (
	"sync"
	"sync/atomic"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// maxTrees is how many open documents keep their parse tree between
// requests. A tree takes about 18 times its text (1 MB for 2,000 lines),
// so the others are parsed again when a request needs them (a few
// milliseconds for 2,000 lines).
const maxTrees = 8

// generation numbers the texts that parse trees are made of.
var generation atomic.Uint64

// trees caches the parse trees of the most recently used documents. It is
// safe for concurrent use; entries are immutable.
type trees struct {
	mu      sync.Mutex
	clock   uint64
	entries map[string]*treeEntry
}

type treeEntry struct {
	gen  uint64
	file *analysis.File
	used uint64
}

func newTrees() *trees { return &trees{entries: map[string]*treeEntry{}} }

// get returns the tree of path's text of generation gen, parsing src when
// the cache does not have it.
func (t *trees) get(path string, gen uint64, src []byte, exts []*starlib.Extension) *analysis.File {
	t.mu.Lock()
	if e, ok := t.entries[path]; ok && e.gen == gen {
		t.clock++
		e.used = t.clock
		t.mu.Unlock()
		return e.file
	}
	t.mu.Unlock()
	f := analysis.ParseFile(path, src, exts...)
	t.put(path, gen, f)
	return f
}

// put remembers a tree, evicting the least recently used beyond maxTrees.
func (t *trees) put(path string, gen uint64, f *analysis.File) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[path]; ok && e.gen > gen {
		return // a newer text's tree is there
	}
	t.clock++
	t.entries[path] = &treeEntry{gen: gen, file: f, used: t.clock}
	for len(t.entries) > maxTrees {
		var oldest string
		var at uint64
		for p, e := range t.entries {
			if oldest == "" || e.used < at {
				oldest, at = p, e.used
			}
		}
		delete(t.entries, oldest)
	}
}

// drop forgets path's tree.
func (t *trees) drop(path string) {
	t.mu.Lock()
	delete(t.entries, path)
	t.mu.Unlock()
}
