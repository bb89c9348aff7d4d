package persisttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

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
	for _, format := range Formats {
		t.Run("RoundTrip/"+format, func(t *testing.T) {
			testRoundTrip(t, newStorage, format)
		})
	}

	t.Run("LeaseShape", func(t *testing.T) {
		testLeaseShape(t, newStorage)
	})

	t.Run("MixedFormats", func(t *testing.T) {
		testMixedFormats(t, newStorage)
	})

	for _, format := range Formats {
		t.Run("Revisions/"+format, func(t *testing.T) {
			testRevisions(t, newStorage, format)
		})

		t.Run("Retention/"+format, func(t *testing.T) {
			testRetention(t, newStorage, format)
		})

		t.Run("Selection/"+format, func(t *testing.T) {
			testSelection(t, newStorage, format)
		})

		t.Run("Gitignore/"+format, func(t *testing.T) {
			testGitignore(t, newStorage, format)
		})

		t.Run("Rejected/"+format, func(t *testing.T) {
			testRejected(t, newStorage, format)
		})

		t.Run("Limits/"+format, func(t *testing.T) {
			testLimits(t, newStorage, format)
		})
	}

	t.Run("ArchiveBytesLimit", func(t *testing.T) {
		testArchiveBytesLimit(t, newStorage)
	})

	t.Run("Conflict", func(t *testing.T) {
		testConflict(t, newStorage)
	})

	for _, format := range Formats {
		t.Run("StalePublication/"+format, func(t *testing.T) {
			testStalePublication(t, newStorage, format)
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
		testFolderReuse(t, newStorage)
	})

	for _, format := range Formats {
		t.Run("ChangedDuringSave/"+format, func(t *testing.T) {
			testChangedDuringSave(t, newStorage, format)
		})
	}

	t.Run("Cancellation", func(t *testing.T) {
		testCancellation(t, newStorage)
	})

	t.Run("InvalidRequests", func(t *testing.T) {
		testInvalidRequests(t, newStorage)
	})
}
