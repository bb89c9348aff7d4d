package persisttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// Formats are the revision formats.
var Formats = []string{persist.FormatArchive, persist.FormatFolder}

// Env is one provider under test. Its helpers fail the test on errors;
// they may be called from one goroutine at a time (SetHook from any).
type Env struct {
	// TB is the test the helpers report to.
	TB testing.TB
	// Storage is the storage under test.
	Storage persist.Storage
	// Provider is persist.New over Storage.
	Provider eval.WorkspaceProvider
	// Temp is the provider's TemporaryDirectory.
	Temp string
	hook atomic.Pointer[func(persist.Step) error]
}

// NewEnv builds persist.New(storage, opts) with a private temporary
// directory and a replaceable hook (SetHook).
func NewEnv(tb testing.TB, storage persist.Storage, opts persist.Options) *Env {
	e := &Env{TB: tb, Storage: storage, Temp: tb.TempDir()}
	opts.TemporaryDirectory = e.Temp
	opts.Hooks.Step = func(s persist.Step) error {
		if f := e.hook.Load(); f != nil {
			return (*f)(s)
		}
		return nil
	}
	e.Provider = persist.New(storage, opts)
	return e
}

// SetHook replaces the step hook (nil removes it).
func (e *Env) SetHook(f func(persist.Step) error) {
	if f == nil {
		e.hook.Store(nil)
		return
	}
	e.hook.Store(&f)
}

// Acquire acquires id with lock and load, failing the test on error.
func (e *Env) Acquire(id string, lock bool, load *eval.WorkspaceLoad) persist.Lease {
	e.TB.Helper()
	l, err := e.Provider.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: id, EvaluationID: "eval-" + id, Load: load, Lock: lock})
	if err != nil {
		e.TB.Fatalf("Acquire(%q): %v", id, err)
	}
	return l.(persist.Lease)
}

// TryAcquire acquires and returns the error.
func (e *Env) TryAcquire(id string, lock bool, load *eval.WorkspaceLoad) (persist.Lease, error) {
	l, err := e.Provider.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: id, EvaluationID: "eval-" + id, Load: load, Lock: lock})
	if err != nil {
		return nil, err
	}
	return l.(persist.Lease), nil
}

// Release releases l, failing the test on error.
func (e *Env) Release(l eval.WorkspaceLease) {
	e.TB.Helper()
	if err := l.Release(context.Background()); err != nil {
		e.TB.Fatalf("Release: %v", err)
	}
}

// Current is the load of the current revision.
var Current = &eval.WorkspaceLoad{Revision: "current"}

// SaveTree acquires id, replaces its tree with t, saves with retention and
// no gitignore, releases, and returns the published revision id.
func (e *Env) SaveTree(id string, t Tree, retention int) string {
	e.TB.Helper()
	l := e.Acquire(id, true, nil)
	defer e.Release(l)
	WriteTree(e.TB, l.Directory(), t)
	if err := l.Save(context.Background(), eval.WorkspaceSaveRequest{Outcome: "success", SavePolicy: eval.SavePolicy{Retention: retention}}); err != nil {
		e.TB.Fatalf("Save: %v", err)
	}
	return l.RevisionID()
}

// Load acquires id without a lock with load, returns its tree, and
// releases it.
func (e *Env) Load(id string, load *eval.WorkspaceLoad) Tree {
	e.TB.Helper()
	l := e.Acquire(id, false, load)
	defer e.Release(l)
	return ReadTree(e.TB, l.Directory())
}

// StoredIndex reads and strictly parses the stored workspace.json (nil
// when absent), failing the test when it does not parse.
func (e *Env) StoredIndex(id string) *persist.Index {
	e.TB.Helper()
	l := acquire(e.TB, e.Storage, id, false)
	defer release(e.TB, l)
	data, _, err := read(e.TB, l, persist.IndexPath)
	if errors.Is(err, persist.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.TB.Fatal(err)
	}
	x, err := persist.ParseIndex([]byte(data))
	if err != nil {
		e.TB.Fatalf("stored index is invalid: %v\n%s", err, data)
	}
	return x
}

// Orphans lists stored revision objects that the index does not reference.
func (e *Env) Orphans(id string) []string {
	e.TB.Helper()
	x := e.StoredIndex(id)
	l := acquire(e.TB, e.Storage, id, false)
	defer release(e.TB, l)
	paths, err := l.List(context.Background(), "revisions/")
	if err != nil {
		e.TB.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		referenced := false
		if x != nil {
			for _, r := range x.Revisions {
				if p == r.Path || (r.Format == persist.FormatFolder && strings.HasPrefix(p, r.Path)) {
					referenced = true
				}
			}
		}
		if !referenced {
			out = append(out, p)
		}
	}
	return out
}

// Put stores an object unconditionally (to corrupt a store).
func (e *Env) Put(id, p string, data []byte) {
	e.TB.Helper()
	l := acquire(e.TB, e.Storage, id, false)
	defer release(e.TB, l)
	if _, err := l.Write(context.Background(), p, bytes.NewReader(data), persist.WriteOptions{ContentLength: int64(len(data))}); err != nil {
		e.TB.Fatal(err)
	}
}

// Get reads an object.
func (e *Env) Get(id, p string) []byte {
	e.TB.Helper()
	l := acquire(e.TB, e.Storage, id, false)
	defer release(e.TB, l)
	data, _, err := read(e.TB, l, p)
	if err != nil {
		e.TB.Fatal(err)
	}
	return []byte(data)
}

// Remove deletes objects.
func (e *Env) Remove(id string, paths ...string) {
	e.TB.Helper()
	l := acquire(e.TB, e.Storage, id, false)
	defer release(e.TB, l)
	if err := l.Delete(context.Background(), paths); err != nil {
		e.TB.Fatal(err)
	}
}

// AssertTempEmpty fails when materializations are left behind.
func (e *Env) AssertTempEmpty() {
	e.TB.Helper()
	des, err := os.ReadDir(e.Temp)
	if err != nil {
		e.TB.Fatal(err)
	}
	if len(des) > 0 {
		e.TB.Fatalf("temporary directory holds %d entries after release (first %s)", len(des), des[0].Name())
	}
}

// SampleTree has nested directories, dotfiles, an empty file and
// directory, and varied modes (including a read-only directory).
func SampleTree() Tree {
	return Tree{
		"README.md":              {Data: "# sample\n", Mode: 0o644},
		".env":                   {Data: "SECRET=1\n", Mode: 0o600},
		".hidden":                {Dir: true, Mode: 0o755},
		".hidden/.dotfile":       {Data: "dot", Mode: 0o640},
		"bin":                    {Dir: true, Mode: 0o750},
		"bin/run.sh":             {Data: "#!/bin/sh\necho hi\n", Mode: 0o755},
		"src":                    {Dir: true, Mode: 0o755},
		"src/a":                  {Dir: true, Mode: 0o755},
		"src/a/b":                {Dir: true, Mode: 0o700},
		"src/a/b/deep.txt":       {Data: strings.Repeat("deep ", 1000), Mode: 0o644},
		"src/empty.txt":          {Data: "", Mode: 0o644},
		"src/readonly.txt":       {Data: "ro", Mode: 0o444},
		"emptydir":               {Dir: true, Mode: 0o755},
		"locked":                 {Dir: true, Mode: 0o555},
		"locked/inside.txt":      {Data: "inside", Mode: 0o644},
		"space name/ünïcode.txt": {Data: "unicode", Mode: 0o644},
		"space name":             {Dir: true, Mode: 0o755},
	}
}

func saveReq(retention int) eval.WorkspaceSaveRequest {
	return eval.WorkspaceSaveRequest{Outcome: "success", SavePolicy: eval.SavePolicy{Retention: retention}}
}

func mustConflictFree(tb testing.TB, err error) {
	tb.Helper()
	var ce *eval.WorkspaceConflictError
	if errors.As(err, &ce) {
		tb.Fatalf("error is a *eval.WorkspaceConflictError: %v", err)
	}
}

// RunProvider checks persist.New over fresh storage from newStorage.
func RunProvider(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()

	for _, format := range Formats {
		t.Run("RoundTrip/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			want := SampleTree()
			stamp := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			l := e.Acquire("ws", true, nil)
			WriteTree(t, l.Directory(), want)
			if err := os.Chtimes(filepath.Join(l.Directory(), "src", "a", "b", "deep.txt"), stamp, stamp); err != nil {
				t.Fatal(err)
			}
			if err := l.Save(ctx, saveReq(1)); err != nil {
				t.Fatal(err)
			}
			rev := l.RevisionID()
			e.Release(l)
			l = e.Acquire("ws", false, Current)
			if got := ReadTree(t, l.Directory()); DiffTrees(want, got) != "" {
				t.Fatalf("restored tree differs:\n%s", DiffTrees(want, got))
			}
			if info, err := os.Stat(filepath.Join(l.Directory(), "src", "a", "b", "deep.txt")); err != nil || !info.ModTime().Equal(stamp) {
				t.Fatalf("modification time not restored: %v, %v", info.ModTime(), err)
			}
			e.Release(l)
			x := e.StoredIndex("ws")
			if x == nil || x.Current != rev || len(x.Revisions) != 1 || x.Revisions[0].Format != format {
				t.Fatalf("index %+v, want current %s in format %s", x, rev, format)
			}
			e.AssertTempEmpty()
		})
	}

	t.Run("LeaseShape", func(t *testing.T) {
		e := NewEnv(t, newStorage(t), persist.Options{})
		l := e.Acquire("ws", true, nil)
		if !strings.HasPrefix(l.ID(), e.Storage.Name()+"-") || len(l.ID()) != len(e.Storage.Name())+1+36 {
			t.Errorf("lease id %q, want %s-<uuid>", l.ID(), e.Storage.Name())
		}
		dir := l.Directory()
		if filepath.Base(dir) != "workspace" || !strings.HasPrefix(filepath.Base(filepath.Dir(dir)), "aml-workspace-") || filepath.Dir(filepath.Dir(dir)) != e.Temp {
			t.Errorf("materialization %s, want %s/aml-workspace-*/workspace", dir, e.Temp)
		}
		if e.Provider.Name() != e.Storage.Name() {
			t.Errorf("provider name %q, want %q", e.Provider.Name(), e.Storage.Name())
		}
		e.Release(l)
		if err := l.Release(ctx); err != nil {
			t.Errorf("second Release: %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("materialization survives release: %v", err)
		}
		if err := l.Save(ctx, saveReq(1)); err == nil {
			t.Error("Save after Release succeeded")
		}
		e.AssertTempEmpty()
	})

	t.Run("MixedFormats", func(t *testing.T) {
		st := newStorage(t)
		archive := NewEnv(t, st, persist.Options{Format: persist.FormatArchive})
		folder := NewEnv(t, st, persist.Options{Format: persist.FormatFolder})
		v1 := Tree{"a.txt": {Data: "one", Mode: 0o644}}
		archive.SaveTree("ws", v1, 5)
		l := folder.Acquire("ws", true, Current)
		if d := DiffTrees(v1, ReadTree(t, l.Directory())); d != "" {
			t.Fatalf("folder provider restoring an archive revision:\n%s", d)
		}
		WriteTree(t, l.Directory(), Tree{"b.txt": {Data: "two", Mode: 0o600}})
		if err := l.Save(ctx, saveReq(5)); err != nil {
			t.Fatal(err)
		}
		folder.Release(l)
		x := archive.StoredIndex("ws")
		if len(x.Revisions) != 2 || x.Revisions[0].Format != persist.FormatFolder || x.Revisions[1].Format != persist.FormatArchive {
			t.Fatalf("revisions %+v", x.Revisions)
		}
		want := Tree{"a.txt": {Data: "one", Mode: 0o644}, "b.txt": {Data: "two", Mode: 0o600}}
		if d := DiffTrees(want, archive.Load("ws", Current)); d != "" {
			t.Fatalf("archive provider restoring a folder revision:\n%s", d)
		}
		if d := DiffTrees(v1, archive.Load("ws", &eval.WorkspaceLoad{Revision: x.Revisions[1].ID})); d != "" {
			t.Fatalf("older archive revision:\n%s", d)
		}
	})

	for _, format := range Formats {
		t.Run("Revisions/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			var ids []string
			var trees []Tree
			for i := range 3 {
				tr := Tree{"v.txt": {Data: fmt.Sprint("version ", i), Mode: 0o644}, fmt.Sprint("only", i): {Data: "x", Mode: 0o644}}
				l := e.Acquire("ws", true, nil) // load=nil: empty, yet saves chain on the index
				if got := ReadTree(t, l.Directory()); len(got) != 0 {
					t.Fatalf("load=nil materialized %d entries", len(got))
				}
				WriteTree(t, l.Directory(), tr)
				if err := l.Save(ctx, saveReq(3)); err != nil {
					t.Fatalf("save %d: %v", i, err)
				}
				ids = append(ids, l.RevisionID())
				trees = append(trees, tr)
				e.Release(l)
			}
			for i, id := range ids {
				if d := DiffTrees(trees[i], e.Load("ws", &eval.WorkspaceLoad{Revision: id})); d != "" {
					t.Fatalf("revision %d:\n%s", i, d)
				}
			}
			if d := DiffTrees(trees[2], e.Load("ws", &eval.WorkspaceLoad{})); d != "" {
				t.Fatalf("Revision \"\" is current:\n%s", d)
			}
			_, err := e.TryAcquire("ws", true, &eval.WorkspaceLoad{Revision: "no-such-revision"})
			if err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Fatalf("missing named revision: %v", err)
			}
			mustConflictFree(t, err)
			if _, err := e.TryAcquire("fresh", true, &eval.WorkspaceLoad{Revision: ids[0]}); err == nil {
				t.Fatal("a named revision of a workspace without index was accepted")
			}
			if got := e.Load("fresh", Current); len(got) != 0 {
				t.Fatalf("current of a fresh workspace has %d entries", len(got))
			}
			e.AssertTempEmpty()
		})

		t.Run("Retention/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			l := e.Acquire("ws", true, nil)
			var ids []string
			for i := range 4 {
				WriteTree(t, l.Directory(), Tree{"f": {Data: fmt.Sprint(i), Mode: 0o644}})
				if err := l.Save(ctx, saveReq(2)); err != nil { // chained saves on one lease
					t.Fatalf("save %d: %v", i, err)
				}
				ids = append(ids, l.RevisionID())
			}
			e.Release(l)
			x := e.StoredIndex("ws")
			if len(x.Revisions) != 2 || x.Revisions[0].ID != ids[3] || x.Revisions[1].ID != ids[2] || x.Current != ids[3] {
				t.Fatalf("index %+v, want newest-first %v", x, ids[2:])
			}
			if o := e.Orphans("ws"); len(o) != 0 {
				t.Fatalf("pruned revisions left objects: %q", o)
			}
			if _, err := e.TryAcquire("ws", true, &eval.WorkspaceLoad{Revision: ids[0]}); err == nil {
				t.Fatal("a pruned revision was restored")
			}
			// Retention 1 keeps only the new revision.
			e.SaveTree("ws", Tree{"g": {Data: "g", Mode: 0o644}}, 1)
			if x := e.StoredIndex("ws"); len(x.Revisions) != 1 {
				t.Fatalf("retention 1 kept %d revisions", len(x.Revisions))
			}
			if o := e.Orphans("ws"); len(o) != 0 {
				t.Fatalf("orphans %q", o)
			}
		})

		t.Run("Selection/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			full := Tree{
				"README.md":          {Data: "r", Mode: 0o644},
				"src":                {Dir: true, Mode: 0o755},
				"src/a.go":           {Data: "a", Mode: 0o644},
				"src/a_test.go":      {Data: "t", Mode: 0o644},
				"src/sub":            {Dir: true, Mode: 0o755},
				"src/sub/b.go":       {Data: "b", Mode: 0o644},
				"src/sub/gen":        {Dir: true, Mode: 0o755},
				"src/sub/gen/c.go":   {Data: "c", Mode: 0o644},
				"docs":               {Dir: true, Mode: 0o755},
				"docs/x.md":          {Data: "x", Mode: 0o644},
				"build":              {Dir: true, Mode: 0o755},
				"build/out.bin":      {Data: "bin", Mode: 0o755},
				"build/nested":       {Dir: true, Mode: 0o755},
				"build/nested/o.bin": {Data: "o", Mode: 0o644},
			}
			l := e.Acquire("ws", true, nil)
			WriteTree(t, l.Directory(), full)
			// Excludes win; a directory match covers its subtree.
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Include: []string{"src", "README.md", "build/**"}, Exclude: []string{"**/*_test.go", "src/sub/gen", "build/nested"}}}); err != nil {
				t.Fatal(err)
			}
			e.Release(l)
			want := Tree{
				"README.md":     full["README.md"],
				"src":           full["src"],
				"src/a.go":      full["src/a.go"],
				"src/sub":       full["src/sub"],
				"src/sub/b.go":  full["src/sub/b.go"],
				"build":         full["build"],
				"build/out.bin": full["build/out.bin"],
			}
			if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
				t.Fatalf("save selection:\n%s", d)
			}
			// Include patterns that match only files keep their parents.
			l = e.Acquire("ws", true, nil)
			WriteTree(t, l.Directory(), full)
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Include: []string{"**/*.go"}, Exclude: []string{}}}); err != nil {
				t.Fatal(err)
			}
			e.Release(l)
			want = Tree{
				"src":              full["src"],
				"src/a.go":         full["src/a.go"],
				"src/a_test.go":    full["src/a_test.go"],
				"src/sub":          full["src/sub"],
				"src/sub/b.go":     full["src/sub/b.go"],
				"src/sub/gen":      full["src/sub/gen"],
				"src/sub/gen/c.go": full["src/sub/gen/c.go"],
			}
			if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
				t.Fatalf("file-only include:\n%s", d)
			}
			// Restore selection.
			e.SaveTree("ws", full, 5)
			got := e.Load("ws", &eval.WorkspaceLoad{Revision: "current", Include: []string{"src/**", "docs"}, Exclude: []string{"src/sub"}})
			want = Tree{
				"src":           full["src"],
				"src/a.go":      full["src/a.go"],
				"src/a_test.go": full["src/a_test.go"],
				"docs":          full["docs"],
				"docs/x.md":     full["docs/x.md"],
			}
			if d := DiffTrees(want, got); d != "" {
				t.Fatalf("restore selection:\n%s", d)
			}
			got = e.Load("ws", &eval.WorkspaceLoad{Revision: "current", Exclude: []string{"build", "src/**/*.go"}})
			want = Tree{
				"README.md":   full["README.md"],
				"src":         full["src"],
				"src/sub":     full["src/sub"],
				"src/sub/gen": full["src/sub/gen"],
				"docs":        full["docs"],
				"docs/x.md":   full["docs/x.md"],
			}
			if d := DiffTrees(want, got); d != "" {
				t.Fatalf("restore exclude:\n%s", d)
			}
			for _, bad := range []string{"/abs", "!neg", "../up", "a\\b", "", "a//b", "./a", "[unclosed"} {
				if _, err := e.TryAcquire("ws", true, &eval.WorkspaceLoad{Include: []string{bad}}); err == nil {
					t.Errorf("load include %q accepted", bad)
				}
				l := e.Acquire("ws", true, nil)
				if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Exclude: []string{bad}}}); err == nil {
					t.Errorf("save exclude %q accepted", bad)
				}
				e.Release(l)
			}
			e.AssertTempEmpty()
		})

		t.Run("Gitignore/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			full := Tree{
				".gitignore":       {Data: "# comment\n*.log\n!keep.log\nbuild/\n/rooted.txt\n", Mode: 0o644},
				"a.log":            {Data: "a", Mode: 0o644},
				"keep.log":         {Data: "k", Mode: 0o644},
				"build":            {Dir: true, Mode: 0o755},
				"build/out":        {Data: "o", Mode: 0o644},
				"rooted.txt":       {Data: "r", Mode: 0o644},
				"sub":              {Dir: true, Mode: 0o755},
				"sub/rooted.txt":   {Data: "r", Mode: 0o644},
				"sub/.gitignore":   {Data: "secret.txt\r\n", Mode: 0o644},
				"sub/secret.txt":   {Data: "s", Mode: 0o644},
				"sub/ok.txt":       {Data: "ok", Mode: 0o644},
				"sub/deep":         {Dir: true, Mode: 0o755},
				"sub/deep/x.log":   {Data: "x", Mode: 0o644},
				"other":            {Dir: true, Mode: 0o755},
				"other/secret.txt": {Data: "s", Mode: 0o644},
			}
			l := e.Acquire("ws", true, nil)
			WriteTree(t, l.Directory(), full)
			// An ignored symlink does not fail the save.
			if err := os.Symlink("keep.log", filepath.Join(l.Directory(), "build", "link")); err != nil {
				t.Fatal(err)
			}
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Gitignore: true}}); err != nil {
				t.Fatal(err)
			}
			want := Tree{}
			for _, p := range []string{".gitignore", "keep.log", "sub", "sub/rooted.txt", "sub/.gitignore", "sub/ok.txt", "sub/deep", "other", "other/secret.txt"} {
				want[p] = full[p]
			}
			if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
				t.Fatalf(".gitignore at save:\n%s", d)
			}
			// With an include list, .gitignore files are not applied.
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Gitignore: true, Include: []string{"*.log"}}}); err != nil {
				t.Fatal(err)
			}
			e.Release(l)
			want = Tree{"a.log": full["a.log"], "keep.log": full["keep.log"]}
			if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
				t.Fatalf(".gitignore with include:\n%s", d)
			}
		})

		t.Run("Rejected/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			prev := e.SaveTree("ws", Tree{"ok": {Data: "ok", Mode: 0o644}}, 3)
			cases := []struct {
				name, want string
				make       func(dir string) error
			}{
				{"symlink", "symbolic link", func(dir string) error { return os.Symlink("ok", filepath.Join(dir, "link")) }},
				{"dir-symlink", "symbolic link", func(dir string) error { return os.Symlink("/", filepath.Join(dir, "root")) }},
				{"fifo", "not a regular file", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644) }},
			}
			for _, c := range cases {
				l := e.Acquire("ws", true, Current)
				if err := c.make(l.Directory()); err != nil {
					t.Fatal(err)
				}
				err := l.Save(ctx, saveReq(3))
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: Save error %v, want %q", c.name, err, c.want)
				}
				// Excluding the entry makes the save succeed.
				name := map[string]string{"symlink": "link", "dir-symlink": "root", "fifo": "pipe"}[c.name]
				if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 3, Exclude: []string{name}}}); err != nil {
					t.Errorf("%s: excluded save: %v", c.name, err)
				}
				e.Release(l)
			}
			if x := e.StoredIndex("ws"); x.Current == prev || len(x.Revisions) != 3 {
				t.Fatalf("index %+v after %d excluded saves", x, len(cases))
			}
			if o := e.Orphans("ws"); len(o) != 0 {
				t.Fatalf("rejected saves left objects: %q", o)
			}
		})

		t.Run("Limits/"+format, func(t *testing.T) {
			st := newStorage(t)
			small := NewEnv(t, st, persist.Options{Format: format, MaxEntries: 4, MaxExtractedBytes: 100})
			big := NewEnv(t, st, persist.Options{Format: format})
			l := small.Acquire("ws", true, nil)
			WriteTree(t, l.Directory(), Tree{"a": {Data: "1", Mode: 0o644}, "b": {Data: "2", Mode: 0o644}, "c": {Data: "3", Mode: 0o644}, "d": {Data: "4", Mode: 0o644}, "e": {Data: "5", Mode: 0o644}})
			if err := l.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrLimitExceeded) {
				t.Fatalf("too many entries: %v", err)
			}
			ClearDir(t, l.Directory())
			WriteTree(t, l.Directory(), Tree{"a": {Data: strings.Repeat("x", 101), Mode: 0o644}})
			if err := l.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrLimitExceeded) {
				t.Fatalf("too many bytes: %v", err)
			}
			small.Release(l)
			if x := small.StoredIndex("ws"); x != nil {
				t.Fatalf("a rejected save published %+v", x)
			}
			// Restores are bounded too.
			big.SaveTree("ws", Tree{"a": {Data: strings.Repeat("x", 101), Mode: 0o644}}, 1)
			if _, err := small.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrLimitExceeded) {
				t.Fatalf("restore above byte limit: %v", err)
			}
			big.SaveTree("ws", Tree{"a": {Data: "1", Mode: 0o644}, "b": {Data: "2", Mode: 0o644}, "c": {Data: "3", Mode: 0o644}, "d": {Data: "4", Mode: 0o644}, "e": {Data: "5", Mode: 0o644}}, 1)
			if _, err := small.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrLimitExceeded) {
				t.Fatalf("restore above entry limit: %v", err)
			}
			small.AssertTempEmpty()
		})
	}

	t.Run("ArchiveBytesLimit", func(t *testing.T) {
		st := newStorage(t)
		small := NewEnv(t, st, persist.Options{MaxArchiveBytes: 200})
		big := NewEnv(t, st, persist.Options{})
		noise := make([]byte, 4096)
		for i := range noise {
			noise[i] = byte(i*7919 + i/3)
		}
		l := small.Acquire("ws", true, nil)
		WriteTree(t, l.Directory(), Tree{"noise": {Data: string(noise), Mode: 0o644}})
		if err := l.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrLimitExceeded) {
			t.Fatalf("archive above limit: %v", err)
		}
		small.Release(l)
		big.SaveTree("ws", Tree{"noise": {Data: string(noise), Mode: 0o644}}, 1)
		if _, err := small.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrLimitExceeded) {
			t.Fatalf("restoring an archive above limit: %v", err)
		}
	})

	t.Run("Conflict", func(t *testing.T) {
		e := NewEnv(t, newStorage(t), persist.Options{})
		l := e.Acquire("ws", true, nil)
		_, err := e.TryAcquire("ws", true, nil)
		var ce *eval.WorkspaceConflictError
		if !errors.As(err, &ce) || ce.WorkspaceID != "ws" {
			t.Fatalf("second locked Acquire: %v, want *eval.WorkspaceConflictError for ws", err)
		}
		if !strings.Contains(err.Error(), eval.WorkspaceConflictCode) {
			t.Errorf("conflict message %q lacks the code", err)
		}
		unlocked := e.Acquire("ws", false, nil) // lock=false takes no lock
		e.Release(unlocked)
		e.Release(l)
		again := e.Acquire("ws", true, nil)
		e.Release(again)
		e.AssertTempEmpty()
	})

	for _, format := range Formats {
		t.Run("StalePublication/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			base := e.SaveTree("ws", Tree{"f": {Data: "base", Mode: 0o644}}, 3)
			a := e.Acquire("ws", false, Current)
			b := e.Acquire("ws", false, Current)
			WriteTree(t, a.Directory(), Tree{"f": {Data: "from a", Mode: 0o644}})
			WriteTree(t, b.Directory(), Tree{"f": {Data: "from b", Mode: 0o644}})
			if err := a.Save(ctx, saveReq(3)); err != nil {
				t.Fatal(err)
			}
			err := b.Save(ctx, saveReq(3))
			if !errors.Is(err, persist.ErrPreconditionFailed) {
				t.Fatalf("stale save: %v, want ErrPreconditionFailed", err)
			}
			mustConflictFree(t, err)
			e.Release(a)
			e.Release(b)
			x := e.StoredIndex("ws")
			if x.Current != a.RevisionID() || len(x.Revisions) != 2 || x.Revisions[1].ID != base {
				t.Fatalf("index %+v after the stale save", x)
			}
			if o := e.Orphans("ws"); len(o) != 0 {
				t.Fatalf("the stale save left objects: %q", o)
			}
			if d := DiffTrees(Tree{"f": {Data: "from a", Mode: 0o644}}, e.Load("ws", Current)); d != "" {
				t.Fatal(d)
			}
			// Two first saves of a new workspace: the second finds an index.
			c := e.Acquire("new", false, Current)
			d := e.Acquire("new", false, Current)
			if err := c.Save(ctx, saveReq(1)); err != nil {
				t.Fatal(err)
			}
			if err := d.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrPreconditionFailed) {
				t.Fatalf("second first save: %v", err)
			}
			e.Release(c)
			e.Release(d)
		})
	}

	for _, format := range Formats {
		for _, step := range persist.Steps {
			for _, crash := range []bool{false, true} {
				mode := "fail"
				if crash {
					mode = "crash"
				}
				t.Run(fmt.Sprintf("Injection/%s/%s/%s", format, step, mode), func(t *testing.T) {
					testInjection(t, newStorage, format, step, crash)
				})
			}
		}
	}

	for _, format := range Formats {
		t.Run("Corruption/"+format, func(t *testing.T) {
			testCorruption(t, newStorage, format)
		})
	}

	t.Run("UnsafeArchives", func(t *testing.T) {
		testUnsafeArchives(t, newStorage)
	})

	RunDamage(t, newStorage)
	RunNames(t, newStorage)

	t.Run("FolderReuse", func(t *testing.T) {
		counting := NewCountingStorage(newStorage(t))
		e := NewEnv(t, counting, persist.Options{Format: persist.FormatFolder})
		tr := Tree{}
		var size int64
		for i := range 20 {
			data := strings.Repeat(fmt.Sprint(i, " "), 2000)
			tr[fmt.Sprintf("d%d/f%d", i%3, i)] = File{Data: data, Mode: 0o644}
			tr[fmt.Sprintf("d%d", i%3)] = File{Dir: true, Mode: 0o755}
			size += int64(len(data))
		}
		tr["dup-a"] = File{Data: "same content", Mode: 0o644}
		tr["dup-b"] = File{Data: "same content", Mode: 0o600}
		l := e.Acquire("ws", true, nil)
		WriteTree(t, l.Directory(), tr)
		if err := l.Save(ctx, saveReq(2)); err != nil {
			t.Fatal(err)
		}
		if counting.BytesWritten() < size {
			t.Fatalf("first save wrote %d bytes, want at least %d", counting.BytesWritten(), size)
		}
		// The same lease saves the unchanged tree again.
		counting.Reset()
		if err := l.Save(ctx, saveReq(2)); err != nil {
			t.Fatal(err)
		}
		e.Release(l)
		checkReuse(t, counting, size)
		// A fresh lease that restored the revision reuses it too.
		counting.Reset()
		l = e.Acquire("ws", true, Current)
		if err := l.Save(ctx, saveReq(2)); err != nil {
			t.Fatal(err)
		}
		e.Release(l)
		checkReuse(t, counting, size)
		// A lease that loaded nothing reuses the current revision.
		counting.Reset()
		l = e.Acquire("ws", true, nil)
		WriteTree(t, l.Directory(), tr)
		if err := l.Save(ctx, saveReq(2)); err != nil {
			t.Fatal(err)
		}
		e.Release(l)
		checkReuse(t, counting, size)
		if d := DiffTrees(tr, e.Load("ws", Current)); d != "" {
			t.Fatal(d)
		}
		if o := e.Orphans("ws"); len(o) != 0 {
			t.Fatalf("orphans %q", o)
		}
	})

	for _, format := range Formats {
		t.Run("ChangedDuringSave/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			base := e.SaveTree("ws", Tree{"f": {Data: "base", Mode: 0o644}}, 1)
			for _, change := range []string{"grow", "shrink", "rewrite"} {
				l := e.Acquire("ws", true, Current)
				file := filepath.Join(l.Directory(), "f")
				WriteTree(t, l.Directory(), Tree{"f": {Data: "snapshot content", Mode: 0o644}})
				e.SetHook(func(s persist.Step) error {
					if s != persist.StepAfterSnapshot {
						return nil
					}
					// Modify the file in place (the snapshot may share it).
					f, err := os.OpenFile(file, os.O_WRONLY, 0)
					if err != nil {
						return err
					}
					defer f.Close()
					switch change {
					case "grow":
						_, err = f.WriteAt([]byte(" and more"), 16)
					case "shrink":
						err = f.Truncate(4)
					default:
						_, err = f.WriteAt([]byte("SNAPSHOT"), 0)
					}
					return err
				})
				err := l.Save(ctx, saveReq(1))
				e.SetHook(nil)
				e.Release(l)
				x := e.StoredIndex("ws")
				if err == nil {
					// Only an archive may take a same-size rewrite as read.
					if format == persist.FormatFolder || change != "rewrite" {
						t.Fatalf("%s: a changed file was published", change)
					}
					if got := e.Load("ws", Current)["f"].Data; got != "snapshot content" && got != "SNAPSHOT content" {
						t.Fatalf("%s: published content %q", change, got)
					}
					base = x.Current
					continue
				}
				if !strings.Contains(err.Error(), "changed during the save") {
					t.Fatalf("%s: Save = %v", change, err)
				}
				if x.Current != base {
					t.Fatalf("%s: a failed save published", change)
				}
				if o := e.Orphans("ws"); len(o) != 0 {
					t.Fatalf("%s: orphans %q", change, o)
				}
			}
		})
	}

	t.Run("Cancellation", func(t *testing.T) {
		e := NewEnv(t, newStorage(t), persist.Options{})
		cctx, cancel := context.WithCancelCause(ctx)
		cause := errors.New("stop")
		cancel(cause)
		if _, err := e.Provider.Acquire(cctx, &eval.WorkspaceAcquireRequest{ID: "ws", Lock: true}); !errors.Is(err, cause) {
			t.Fatalf("Acquire with a done context: %v", err)
		}
		l := e.Acquire("ws", true, nil)
		WriteTree(t, l.Directory(), Tree{"f": {Data: "x", Mode: 0o644}})
		if err := l.Save(cctx, saveReq(1)); !errors.Is(err, cause) {
			t.Fatalf("Save with a done context: %v", err)
		}
		if err := l.Release(cctx); err != nil { // release works with a done context
			t.Fatal(err)
		}
		if x := e.StoredIndex("ws"); x != nil {
			t.Fatal("a cancelled save published")
		}
		e.Release(e.Acquire("ws", true, nil))
		e.AssertTempEmpty()
	})

	t.Run("InvalidRequests", func(t *testing.T) {
		e := NewEnv(t, newStorage(t), persist.Options{})
		for _, id := range []string{"", " padded", "tab\t"} {
			if _, err := e.TryAcquire(id, true, nil); err == nil {
				t.Errorf("id %q accepted", id)
			}
		}
		bad := persist.New(e.Storage, persist.Options{Format: "zip"})
		if _, err := bad.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws"}); err == nil {
			t.Error("format zip accepted")
		}
		l := e.Acquire("ws", true, nil)
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: -1}}); err == nil {
			t.Error("negative retention accepted")
		}
		e.Release(l)
	})
}

func checkReuse(t *testing.T, c *CountingStorage, size int64) {
	t.Helper()
	if c.Copies() < 20 {
		t.Errorf("unchanged save made %d copies, want at least 20", c.Copies())
	}
	if c.BytesWritten() >= size/4 {
		t.Errorf("unchanged save wrote %d bytes of a %d-byte tree (no reuse)", c.BytesWritten(), size)
	}
	if c.Writes() != 3 { // pending marker, manifest and index
		t.Errorf("unchanged save made %d writes, want 3 (pending marker, manifest, index)", c.Writes())
	}
}

// testInjection fails or crashes a save at step, then checks that the
// store is consistent: the index parses, current is the previous revision
// (before publication) or the new one (after), it restores, and a failed
// (not crashed) save leaves no orphans.
func testInjection(t *testing.T, newStorage NewStorageFunc, format string, step persist.Step, crash bool) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{Format: format})
	v1 := Tree{"keep.txt": {Data: "v1", Mode: 0o644}, "dir": {Dir: true, Mode: 0o755}, "dir/a": {Data: "a1", Mode: 0o600}, "dir/b": {Data: "b1", Mode: 0o644}}
	v2 := Tree{"keep.txt": {Data: "v2", Mode: 0o644}, "dir": {Dir: true, Mode: 0o755}, "dir/a": {Data: "a2", Mode: 0o600}, "dir/c": {Data: "c2", Mode: 0o644}}
	first := e.SaveTree("ws", v1, 1)

	injected := errors.New("injected failure")
	if crash {
		injected = fmt.Errorf("killed: %w", persist.ErrSimulatedCrash)
	}
	var fired atomic.Int32
	e.SetHook(func(s persist.Step) error {
		if s == step && fired.Add(1) == 1 {
			return injected
		}
		return nil
	})
	l := e.Acquire("ws", true, Current)
	ClearDir(t, l.Directory())
	WriteTree(t, l.Directory(), v2)
	err := l.Save(ctx, saveReq(1))
	e.SetHook(nil)
	if err == nil || !errors.Is(err, injected) {
		t.Fatalf("Save = %v, want the injected error", err)
	}
	mustConflictFree(t, err)
	published := step == persist.StepAfterPublication || step == persist.StepDuringPrune
	var pe *persist.PruneError
	if published && !crash && !errors.As(err, &pe) {
		t.Fatalf("failure after publication is %T, want *persist.PruneError", err)
	}
	e.Release(l)

	x := e.StoredIndex("ws")
	want, wantCurrent := v1, first
	if published {
		want, wantCurrent = v2, l.RevisionID()
	}
	if x == nil || x.Current != wantCurrent {
		t.Fatalf("current %v, want %s (published=%v)", x, wantCurrent, published)
	}
	if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
		t.Fatalf("restored tree after the injected failure:\n%s", d)
	}
	if !crash && !published {
		if o := e.Orphans("ws"); len(o) != 0 {
			t.Fatalf("the failed save left objects: %q", o)
		}
	}
	// The store keeps working: a later save publishes and prunes.
	e.SaveTree("ws", v1, 1)
	if x := e.StoredIndex("ws"); len(x.Revisions) != 1 {
		t.Fatalf("index after recovery %+v", x)
	}
	e.AssertTempEmpty()
}

// testCorruption damages stored state and expects *persist.CorruptError.
func testCorruption(t *testing.T, newStorage NewStorageFunc, format string) {
	expectCorrupt := func(t *testing.T, e *Env, load *eval.WorkspaceLoad) {
		t.Helper()
		_, err := e.TryAcquire("ws", true, load)
		if !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("Acquire = %v, want a corruption error", err)
		}
		mustConflictFree(t, err)
		var ce *persist.CorruptError
		if !errors.As(err, &ce) || ce.WorkspaceID != "ws" {
			t.Fatalf("error %T is not a *persist.CorruptError", err)
		}
		// The failed acquisition released the lock and its temp state.
		l, err := e.TryAcquire("ws", true, nil)
		mustConflictFree(t, err)
		if err == nil {
			e.Release(l)
		}
		e.AssertTempEmpty()
	}
	tree := Tree{"a.txt": {Data: strings.Repeat("content ", 500), Mode: 0o644}, "d": {Dir: true, Mode: 0o755}, "d/b.txt": {Data: "b", Mode: 0o644}}
	setup := func(t *testing.T) (*Env, *persist.Revision) {
		e := NewEnv(t, newStorage(t), persist.Options{Format: format})
		e.SaveTree("ws", tree, 1)
		x := e.StoredIndex("ws")
		return e, &x.Revisions[0]
	}
	indexes := map[string]string{
		"garbage":        "{not json",
		"empty":          "",
		"null":           "null",
		"version3":       `{"version":3,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"pins-in-v1":     `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","sha256":"` + strings.Repeat("a", 64) + `","size":3}]}`,
		"bad-sha256":     `{"version":2,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","sha256":"ABC","size":3}]}`,
		"size-no-sha256": `{"version":2,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","size":3}]}`,
		"zero-size":      `{"version":2,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","sha256":"` + strings.Repeat("a", 64) + `","size":0}]}`,
		"unknown-field":  `{"version":1,"current":"r","extra":1,"revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"current-absent": `{"version":1,"current":"x","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"bad-path":       `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/../r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"bad-date":       `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05Z"}]}`,
		"bad-format":     `{"version":1,"current":"r","revisions":[{"id":"r","format":"zip","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"duplicate":      `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"},{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"traversal-id":   `{"version":1,"current":"..","revisions":[{"id":"..","format":"archive","path":"revisions/...tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"trailing":       `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]} {}`,
	}
	for name, data := range indexes {
		t.Run("Index/"+name, func(t *testing.T) {
			e, _ := setup(t)
			e.Put("ws", persist.IndexPath, []byte(data))
			expectCorrupt(t, e, Current)
			expectCorrupt(t, e, nil) // the index is read even without load
		})
	}
	t.Run("Index/too-large", func(t *testing.T) {
		e, _ := setup(t)
		e.Put("ws", persist.IndexPath, bytes.Repeat([]byte(" "), persist.MaxIndexBytes+1))
		expectCorrupt(t, e, Current)
	})
	t.Run("MissingArtifact", func(t *testing.T) {
		e, rev := setup(t)
		if format == persist.FormatFolder {
			e.Remove("ws", rev.Path+"manifest.json")
		} else {
			e.Remove("ws", rev.Path)
		}
		expectCorrupt(t, e, Current)
	})
	if format == persist.FormatArchive {
		damage := map[string]func([]byte) []byte{
			"garbage":   func([]byte) []byte { return []byte("this is not a gzip stream") },
			"truncated": func(b []byte) []byte { return b[:len(b)/2] },
			"flipped": func(b []byte) []byte {
				c := bytes.Clone(b)
				c[len(c)/2] ^= 0xff
				return c
			},
			"bad-crc": func(b []byte) []byte {
				c := bytes.Clone(b)
				c[len(c)-6] ^= 0x01
				return c
			},
			"gzip-not-tar": func([]byte) []byte {
				var buf bytes.Buffer
				zw := gzip.NewWriter(&buf)
				zw.Write(bytes.Repeat([]byte("not a tar header "), 64))
				zw.Close()
				return buf.Bytes()
			},
		}
		for name, f := range damage {
			t.Run("Archive/"+name, func(t *testing.T) {
				e, rev := setup(t)
				e.Put("ws", rev.Path, f(e.Get("ws", rev.Path)))
				expectCorrupt(t, e, Current)
			})
		}
	} else {
		t.Run("Folder/missing-file", func(t *testing.T) {
			e, rev := setup(t)
			e.Remove("ws", rev.Path+"files/d/b.txt")
			expectCorrupt(t, e, Current)
		})
		t.Run("Folder/wrong-size", func(t *testing.T) {
			e, rev := setup(t)
			e.Put("ws", rev.Path+"files/a.txt", []byte("short"))
			expectCorrupt(t, e, Current)
		})
		t.Run("Folder/longer", func(t *testing.T) {
			e, rev := setup(t)
			e.Put("ws", rev.Path+"files/d/b.txt", []byte("bb"))
			expectCorrupt(t, e, Current)
		})
		t.Run("Folder/wrong-content", func(t *testing.T) {
			e, rev := setup(t)
			e.Put("ws", rev.Path+"files/d/b.txt", []byte("x"))
			expectCorrupt(t, e, Current)
		})
		manifests := map[string]string{
			"garbage":       "[",
			"traversal":     `{"version":1,"entries":[{"path":"../evil","type":"file","size":0,"mode":420}]}`,
			"absolute":      `{"version":1,"entries":[{"path":"/etc/evil","type":"file","size":0,"mode":420}]}`,
			"drive":         `{"version":1,"entries":[{"path":"C:/evil","type":"file","size":0,"mode":420}]}`,
			"symlink":       `{"version":1,"entries":[{"path":"l","type":"symlink","size":0,"mode":420}]}`,
			"mode":          `{"version":1,"entries":[{"path":"a","type":"file","size":0,"mode":4095}]}`,
			"missing-mode":  `{"version":1,"entries":[{"path":"a","type":"file","size":0}]}`,
			"dir-size":      `{"version":1,"entries":[{"path":"a","type":"directory","size":3,"mode":493}]}`,
			"below-file":    `{"version":1,"entries":[{"path":"a","type":"file","size":0,"mode":420},{"path":"a/b","type":"file","size":0,"mode":420}]}`,
			"duplicate":     `{"version":1,"entries":[{"path":"a","type":"file","size":0,"mode":420},{"path":"a","type":"file","size":0,"mode":420}]}`,
			"unknown-field": `{"version":1,"entries":[],"x":1}`,
		}
		for name, data := range manifests {
			t.Run("Manifest/"+name, func(t *testing.T) {
				e, rev := setup(t)
				e.Put("ws", rev.Path+"manifest.json", []byte(data))
				expectCorrupt(t, e, Current)
			})
		}
	}
}

// tarGz builds an archive from raw headers.
func tarGz(t *testing.T, hs []*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			io.WriteString(tw, strings.Repeat("x", int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// testUnsafeArchives publishes hostile archives and checks that restores
// reject them without writing outside the materialization.
func testUnsafeArchives(t *testing.T, newStorage NewStorageFunc) {
	cases := map[string][]*tar.Header{
		"traversal":   {{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "../escaped.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"nested-up":   {{Name: "./a/../../escaped.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"absolute":    {{Name: "/tmp/escaped.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"symlink":     {{Name: "./link", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777}},
		"hardlink":    {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "./b", Typeflag: tar.TypeLink, Linkname: "a"}},
		"device":      {{Name: "./dev", Typeflag: tar.TypeChar, Mode: 0o644}},
		"fifo":        {{Name: "./fifo", Typeflag: tar.TypeFifo, Mode: 0o644}},
		"duplicate":   {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"below-file":  {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "./a/b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"two-roots":   {{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: ".", Typeflag: tar.TypeDir, Mode: 0o755}},
		"setuid-mode": {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o4755 | 0o70000}},
		"empty":       {},
	}
	if runtime.GOOS == "windows" {
		// Elsewhere this is one file's name (RunNames restores it).
		cases["backslash"] = []*tar.Header{{Name: "./a\\..\\..\\x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}
	}
	for name, hs := range cases {
		t.Run(name, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{})
			id := "rev-" + name
			index, _ := json.Marshal(persist.Index{Version: 1, Current: id, Revisions: []persist.Revision{{ID: id, Format: persist.FormatArchive, Path: persist.RevisionPath(id, persist.FormatArchive), CreatedAt: time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}}})
			e.Put("ws", persist.RevisionPath(id, persist.FormatArchive), tarGz(t, hs))
			e.Put("ws", persist.IndexPath, index)
			_, err := e.TryAcquire("ws", true, Current)
			if !errors.Is(err, persist.ErrCorrupt) {
				t.Fatalf("Acquire = %v, want a corruption error", err)
			}
			e.AssertTempEmpty()
			if _, err := os.Lstat(filepath.Join(filepath.Dir(e.Temp), "escaped.txt")); err == nil {
				t.Fatal("an archive entry escaped the materialization")
			}
		})
	}
}

// RunDamage runs, for both formats, the damage tests of RunProvider: a
// missing or damaged index (nothing is deleted, the error says what is
// there, Check finds it, Recover brings it back), a swapped, truncated
// or missing revision (refused at load, found by Check). Storages whose
// whole RunProvider suite is too slow (a remote service) run it alone.
func RunDamage(t *testing.T, newStorage NewStorageFunc) {
	for _, format := range Formats {
		t.Run("Damage/"+format, func(t *testing.T) {
			testDamage(t, newStorage, format)
		})
	}
}

// testDamage damages a store with three retained revisions as people and
// faulty services do, and checks that nothing is deleted on a guess,
// that loads refuse what does not match the index, that Check finds each
// damage, and that Recover brings a lost index back.
func testDamage(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	trees := []Tree{
		{"a.txt": {Data: "first", Mode: 0o644}},
		{"a.txt": {Data: "second, longer", Mode: 0o644}, "d": {Dir: true, Mode: 0o755}},
		{"a.txt": {Data: "third", Mode: 0o644}, "d": {Dir: true, Mode: 0o755}, "d/b.txt": {Data: strings.Repeat("b", 3000), Mode: 0o600}},
	}
	setup := func(t *testing.T) (*Env, []string) {
		e := NewEnv(t, newStorage(t), persist.Options{Format: format})
		var ids []string
		for _, tr := range trees {
			ids = append(ids, e.SaveTree("ws", tr, 3))
		}
		return e, ids
	}
	objects := func(e *Env) []string {
		l := acquire(e.TB, e.Storage, "ws", false)
		defer release(e.TB, l)
		ps, err := l.List(ctx, "")
		if err != nil {
			e.TB.Fatal(err)
		}
		return ps
	}
	check := func(t *testing.T, e *Env, readData bool) persist.WorkspaceCheck {
		t.Helper()
		res, err := persist.Check(ctx, e.Storage, []string{"ws"}, persist.CheckOptions{ReadData: readData})
		if err != nil || len(res) != 1 {
			t.Fatalf("Check = %+v, %v", res, err)
		}
		return res[0]
	}
	hasProblem := func(c persist.WorkspaceCheck, kind string) bool {
		for _, p := range c.Problems {
			if p.Kind == kind {
				return true
			}
		}
		return false
	}

	t.Run("Sound", func(t *testing.T) {
		e, ids := setup(t)
		for _, rd := range []bool{false, true} {
			c := check(t, e, rd)
			if !c.OK() || c.Index != "ok" || c.Revisions != 3 || c.Current != ids[2] {
				t.Fatalf("Check(ReadData %v) of a sound store = %+v", rd, c)
			}
		}
		x := e.StoredIndex("ws")
		for _, r := range x.Revisions {
			if x.Version != persist.IndexVersion || !r.Pinned() {
				t.Fatalf("a saved revision is not pinned: %+v", x)
			}
		}
	})

	for _, how := range []string{"missing", "damaged"} {
		t.Run("Index/"+how, func(t *testing.T) {
			e, ids := setup(t)
			if how == "missing" {
				e.Remove("ws", persist.IndexPath)
			} else {
				e.Put("ws", persist.IndexPath, []byte(`{"version":2,"current":`))
			}
			before := objects(e)
			for _, lock := range []bool{true, false} {
				for _, load := range []*eval.WorkspaceLoad{Current, nil} {
					_, err := e.TryAcquire("ws", lock, load)
					var ie *persist.IndexError
					if !errors.As(err, &ie) || !errors.Is(err, persist.ErrCorrupt) || ie.Missing != (how == "missing") {
						t.Fatalf("Acquire(lock %v) with the index %s = %v, want an *IndexError", lock, how, err)
					}
					msg := err.Error()
					if !strings.Contains(msg, "nothing was loaded and nothing was deleted") || !strings.Contains(msg, "aml workspace recover") || !strings.Contains(msg, "workspace.json") {
						t.Fatalf("the error does not say what is there and what to do: %v", err)
					}
					if how == "missing" {
						for _, id := range ids {
							if !strings.Contains(msg, id) {
								t.Fatalf("the error does not name revision %s: %v", id, err)
							}
						}
					}
				}
			}
			if _, err := e.Provider.(persist.Sweeper).Sweep(ctx, "ws"); err == nil && how == "missing" {
				t.Fatal("a sweep of a workspace whose index is missing reported nothing")
			}
			if after := objects(e); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("objects were deleted on a guess:\nbefore %v\nafter  %v", before, after)
			}
			c := check(t, e, false)
			if c.OK() || !hasProblem(c, map[string]string{"missing": persist.ProblemIndexMissing, "damaged": persist.ProblemIndexDamaged}[how]) {
				t.Fatalf("Check did not find the %s index: %+v", how, c)
			}

			// Recover: the plan first, nothing written without consent.
			rec, err := persist.Recover(ctx, e.Storage, "ws", e.Temp, func(*persist.Recovery) bool { return false })
			if err != nil || rec.Written || rec.Index == nil || len(rec.Index.Revisions) != 3 {
				t.Fatalf("Recover without consent = %+v, %v", rec, err)
			}
			if after := objects(e); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("a declined recovery changed the store:\nbefore %v\nafter  %v", before, after)
			}
			rec, err = persist.Recover(ctx, e.Storage, "ws", e.Temp, nil)
			if err != nil || !rec.Written {
				t.Fatalf("Recover = %+v, %v", rec, err)
			}
			want := map[string]Tree{ids[0]: trees[0], ids[1]: trees[1], ids[2]: trees[2]}
			cur, ok := want[rec.Index.Current]
			if !ok {
				t.Fatalf("the recovered current revision %s is none of the saved ones %v", rec.Index.Current, ids)
			}
			if d := DiffTrees(cur, e.Load("ws", Current)); d != "" {
				t.Fatalf("the recovered current revision loads differently:\n%s", d)
			}
			for id, tr := range want {
				if d := DiffTrees(tr, e.Load("ws", &eval.WorkspaceLoad{Revision: id})); d != "" {
					t.Fatalf("recovered revision %s loads differently:\n%s", id, d)
				}
			}
			if c := check(t, e, true); !c.OK() {
				t.Fatalf("Check after Recover = %+v", c)
			}
			if _, err := persist.Recover(ctx, e.Storage, "ws", e.Temp, nil); err == nil || !strings.Contains(err.Error(), "nothing to recover") {
				t.Fatalf("Recover of a sound index = %v", err)
			}
			e.AssertTempEmpty()
		})
	}

	t.Run("SwappedRevision", func(t *testing.T) {
		e, ids := setup(t)
		x := e.StoredIndex("ws")
		cur, prev := x.Find(ids[2]), x.Find(ids[1])
		// The previous revision's content put in place of the current one.
		e.Put("ws", cur.PinnedPath(), e.Get("ws", prev.PinnedPath()))
		_, err := e.TryAcquire("ws", true, Current)
		var ce *persist.CorruptError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not match the index") || !strings.Contains(err.Error(), cur.PinnedPath()) {
			t.Fatalf("loading a swapped revision = %v, want it refused naming %s", err, cur.PinnedPath())
		}
		c := check(t, e, true)
		if !hasProblem(c, persist.ProblemRevisionMismatch) {
			t.Fatalf("Check did not find the swapped revision: %+v", c)
		}
		// The other revisions still load.
		if d := DiffTrees(trees[1], e.Load("ws", &eval.WorkspaceLoad{Revision: ids[1]})); d != "" {
			t.Fatalf("revision %s loads differently:\n%s", ids[1], d)
		}
		e.AssertTempEmpty()
	})

	t.Run("TruncatedRevision", func(t *testing.T) {
		e, ids := setup(t)
		x := e.StoredIndex("ws")
		cur := x.Find(ids[2])
		target := cur.PinnedPath()
		if format == persist.FormatFolder {
			target = cur.Path + "files/d/b.txt"
		}
		data := e.Get("ws", target)
		e.Put("ws", target, data[:len(data)/2])
		if _, err := e.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("loading a truncated revision = %v, want a corruption error", err)
		}
		c := check(t, e, false)
		kind := persist.ProblemRevisionMismatch
		if format == persist.FormatFolder {
			kind = persist.ProblemFileMismatch
		}
		if !hasProblem(c, kind) {
			t.Fatalf("Check without reading data did not find the truncated %s: %+v", target, c)
		}
	})

	t.Run("MissingRevision", func(t *testing.T) {
		e, ids := setup(t)
		x := e.StoredIndex("ws")
		e.Remove("ws", x.Find(ids[0]).PinnedPath())
		c := check(t, e, false)
		if !hasProblem(c, persist.ProblemRevisionMissing) {
			t.Fatalf("Check did not find the missing revision: %+v", c)
		}
	})

	// ReuseAfterSwap: an object of the current revision that the next save
	// would reuse (a folder revision's unchanged file) is swapped for other
	// bytes of its size, or truncated, behind aml's back; a run then saves
	// the right tree, by a lease that loaded nothing or one whose load
	// preceded the damage. The save must not inherit the damage: it either
	// publishes a revision that loads the run's content, or fails with a
	// corruption error and publishes nothing. Either way the store is sound
	// after it (retention 1 prunes the damaged revisions).
	for _, how := range []string{"swapped", "truncated"} {
		for _, when := range []string{"before-unloaded-lease", "during-run"} {
			t.Run("ReuseAfterSwap/"+how+"/"+when, func(t *testing.T) {
				e, ids := setup(t)
				cur := e.StoredIndex("ws").Find(ids[2])
				target := cur.PinnedPath()
				if format == persist.FormatFolder {
					target = cur.Path + "files/d/b.txt"
				}
				damage := func() {
					data := e.Get("ws", target)
					if how == "swapped" {
						data = bytes.Repeat([]byte("X"), len(data))
					} else {
						data = data[:len(data)/2]
					}
					e.Put("ws", target, data)
				}
				var l persist.Lease
				if when == "during-run" {
					l = e.Acquire("ws", true, Current)
					damage()
				} else {
					damage()
					l = e.Acquire("ws", true, nil)
					WriteTree(t, l.Directory(), trees[2])
				}
				err := l.Save(ctx, saveReq(1))
				saved := l.RevisionID()
				e.Release(l)
				x := e.StoredIndex("ws")
				if err != nil {
					if !errors.Is(err, persist.ErrCorrupt) {
						t.Fatalf("a save over a %s object failed without saying it is damaged: %v", how, err)
					}
					if x.Current != ids[2] {
						t.Fatalf("a failed save published %s", x.Current)
					}
					if o := e.Orphans("ws"); len(o) != 0 {
						t.Fatalf("a failed save left orphans %q", o)
					}
					return
				}
				if x.Current != saved || saved == ids[2] {
					t.Fatalf("the save reported success, current is %s, the lease stands on %s", x.Current, saved)
				}
				got, err := e.TryAcquire("ws", false, Current)
				if err != nil {
					t.Fatalf("the saved revision inherited the %s object and does not load: %v", how, err)
				}
				if d := DiffTrees(trees[2], ReadTree(t, got.Directory())); d != "" {
					e.Release(got)
					t.Fatalf("the saved revision loads differently:\n%s", d)
				}
				e.Release(got)
				if c := check(t, e, true); !c.OK() || c.Revisions != 1 || c.Current != saved {
					t.Fatalf("Check after the save = %+v", c)
				}
				if o := e.Orphans("ws"); len(o) != 0 {
					t.Fatalf("orphans %q", o)
				}
				e.AssertTempEmpty()
			})
		}
	}
}

// RunNames saves and restores, in both formats, names that are legal on
// Linux though not portable: a colon, a backslash, bytes that are not
// UTF-8 in a file's and a directory's name.
func RunNames(t *testing.T, newStorage NewStorageFunc) {
	if runtime.GOOS == "windows" {
		t.Skip("these names are not legal on Windows")
	}
	for _, format := range Formats {
		t.Run("Names/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{Format: format})
			tree := Tree{
				"a:b.txt":               {Data: "colon", Mode: 0o644},
				"back\\slash.txt":       {Data: "backslash", Mode: 0o644},
				"a\\..\\..\\x":          {Data: "not a way up", Mode: 0o644},
				"bad\xffname.txt":       {Data: "not UTF-8", Mode: 0o600},
				"dir\xfe":               {Dir: true, Mode: 0o755},
				"dir\xfe/inner\xfd.txt": {Data: "inside", Mode: 0o644},
				"é.txt":                 {Data: "UTF-8", Mode: 0o644},
				"line\nbreak\x01.txt":   {Data: "control characters", Mode: 0o644},
			}
			long := ""
			for i := 0; i < 4; i++ {
				long += strings.Repeat(string(rune('p'+i)), 200)
				tree[long] = File{Dir: true, Mode: 0o755}
				long += "/"
			}
			tree[long+"deep.txt"] = File{Data: "a path longer than an object key", Mode: 0o644}
			e.SaveTree("ws", tree, 1)
			if d := DiffTrees(tree, e.Load("ws", Current)); d != "" {
				t.Fatalf("the names did not survive a save and a load:\n%s", d)
			}
			res, err := persist.Check(context.Background(), e.Storage, []string{"ws"}, persist.CheckOptions{ReadData: true})
			if err != nil || len(res) != 1 || !res[0].OK() {
				t.Fatalf("Check: %+v, %v", res, err)
			}
		})
	}
}
