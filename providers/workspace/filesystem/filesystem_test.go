package filesystem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

func newStorage(tb testing.TB) persist.Storage {
	s, err := NewStorage(filepath.Join(tb.TempDir(), "store"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestStorageContract(t *testing.T) { persisttest.RunStorage(t, newStorage) }

func TestProvider(t *testing.T) { persisttest.RunProvider(t, newStorage) }

func TestNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet")
	p, err := New(Options{Directory: dir, StoreOptions: persist.StoreOptions{Format: "folder", TemporaryDirectory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != Name {
		t.Fatalf("name %q", p.Name())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("New touched the directory: %v", err)
	}
	for _, o := range []Options{{}, {Directory: " padded"}, {Directory: dir, StoreOptions: persist.StoreOptions{Format: "zip"}}, {Directory: dir, StoreOptions: persist.StoreOptions{MaxEntries: -1}}, {Directory: dir, StoreOptions: persist.StoreOptions{TemporaryDirectory: "x "}}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	s, _ := NewStorage("relative/store")
	if !filepath.IsAbs(s.Directory()) {
		t.Fatalf("directory %q not resolved", s.Directory())
	}
}

func TestLayout(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "store")
	s, _ := NewStorage(root)
	for _, format := range persisttest.Formats {
		e := persisttest.NewEnv(t, s, persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
		id := "team/review 42." + format
		tree := persisttest.Tree{"a.txt": {Data: "a", Mode: 0o644}, "d": {Dir: true, Mode: 0o755}, "d/b.txt": {Data: "b", Mode: 0o600}}
		rev := e.SaveTree(id, tree, 2)
		seg := filepath.Join(root, "team%2Freview%2042."+format)
		if _, err := os.Stat(filepath.Join(seg, "workspace.json")); err != nil {
			t.Fatal(err)
		}
		if format == persist.FormatArchive {
			if _, err := os.Stat(filepath.Join(seg, "revisions", rev+".tar.gz")); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, p := range []string{"manifest.json", "files/a.txt", "files/d/b.txt"} {
			if _, err := os.Stat(filepath.Join(seg, "revisions", rev, filepath.FromSlash(p))); err != nil {
				t.Fatal(err)
			}
		}
		// An unchanged save hard-links the previous revision's files.
		l := e.Acquire(id, true, persisttest.Current)
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 2}}); err != nil {
			t.Fatal(err)
		}
		e.Release(l)
		a, _ := os.Stat(filepath.Join(seg, "revisions", rev, "files", "a.txt"))
		b, _ := os.Stat(filepath.Join(seg, "revisions", l.RevisionID(), "files", "a.txt"))
		if a == nil || b == nil || !os.SameFile(a, b) {
			t.Fatal("unchanged file was not hard-linked from the previous revision")
		}
		// Pruning the older revision keeps the linked content.
		l = e.Acquire(id, true, persisttest.Current)
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}}); err != nil {
			t.Fatal(err)
		}
		e.Release(l)
		if _, err := os.Stat(filepath.Join(seg, "revisions", rev)); !os.IsNotExist(err) {
			t.Fatalf("pruned revision directory remains: %v", err)
		}
		if d := persisttest.DiffTrees(tree, e.Load(id, persisttest.Current)); d != "" {
			t.Fatal(d)
		}
	}
}

func TestLeftoversAreNotObjects(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	e := persisttest.NewEnv(t, s, persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatFolder}})
	tree := persisttest.Tree{"a": {Data: "a", Mode: 0o644}}
	rev := e.SaveTree("ws", tree, 1)
	seg, _ := s.(*Storage).WorkspaceDirectory("ws")
	// What a killed writer leaves: temporary files and a partial revision.
	for _, p := range []string{
		"workspace.json.0b8a6f3e-4c1d-4e0f-9a5b-2c3d4e5f6a7b.tmp",
		"revisions/" + rev + "/files/a.0b8a6f3e-4c1d-4e0f-9a5b-2c3d4e5f6a7c.tmp",
	} {
		os.WriteFile(filepath.Join(seg, filepath.FromSlash(p)), []byte("partial"), 0o644)
	}
	l, err := s.Acquire(ctx, persist.StorageAcquireRequest{ID: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	listed, _ := l.List(ctx, "")
	for _, p := range listed {
		if strings.HasSuffix(p, ".tmp") || strings.HasPrefix(p, ".") {
			t.Errorf("List returned %q", p)
		}
	}
	if _, err := l.Write(ctx, ".lock", strings.NewReader("x"), persist.WriteOptions{ContentLength: 1}); err == nil {
		t.Error("the adapter's lock file is writable as an object")
	}
	if d := persisttest.DiffTrees(tree, e.Load("ws", persisttest.Current)); d != "" {
		t.Fatal(d)
	}
}

func TestStaleLockTakeover(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	e := persisttest.NewEnv(t, s, persist.Options{})
	base := e.SaveTree("ws", persisttest.Tree{"f": {Data: "base", Mode: 0o644}}, 1)
	old := e.Acquire("ws", true, persisttest.Current)
	_, err := e.TryAcquire("ws", true, nil)
	var ce *eval.WorkspaceConflictError
	if !errors.As(err, &ce) || ce.WorkspaceID != "ws" {
		t.Fatalf("healthy lock: %v, want *eval.WorkspaceConflictError", err)
	}
	seg, _ := s.(*Storage).WorkspaceDirectory("ws")
	lock := filepath.Join(seg, lockName)
	past := time.Now().Add(-LockStale - time.Minute)
	if err := os.Chtimes(lock, past, past); err != nil {
		t.Fatal(err)
	}
	taker := e.Acquire("ws", true, persisttest.Current)
	persisttest.WriteTree(t, old.Directory(), persisttest.Tree{"f": {Data: "stale owner", Mode: 0o644}})
	err = old.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}})
	if err == nil || !strings.Contains(err.Error(), "compromised") || errors.As(err, &ce) {
		t.Fatalf("save after losing the lock: %v", err)
	}
	if err := old.Release(ctx); err == nil || !strings.Contains(err.Error(), "compromised") {
		t.Fatalf("release after losing the lock: %v", err)
	}
	if x := e.StoredIndex("ws"); x.Current != base {
		t.Fatal("the stale owner published")
	}
	if o := e.Orphans("ws"); len(o) != 0 {
		t.Fatalf("orphans %q", o)
	}
	persisttest.WriteTree(t, taker.Directory(), persisttest.Tree{"f": {Data: "taker", Mode: 0o644}})
	if err := taker.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}}); err != nil {
		t.Fatal(err)
	}
	e.Release(taker)
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("lock remains after release: %v", err)
	}
}

func TestIndexLock(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	e := persisttest.NewEnv(t, s, persist.Options{})
	e.SaveTree("ws", persisttest.Tree{"f": {Data: "base", Mode: 0o644}}, 1)
	seg, _ := s.(*Storage).WorkspaceDirectory("ws")
	// A crashed writer's index lock: fresh, then stale.
	ilock := filepath.Join(seg, indexLockName)
	os.WriteFile(ilock, []byte(`{"token":"crashed","pid":-1}`), 0o644)
	l := e.Acquire("ws", false, persisttest.Current)
	defer e.Release(l)
	// The save's deadline runs from its last step before publication, so
	// it expires while the save waits for the index lock, not in an
	// earlier phase that a loaded machine made slow.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var armed atomic.Bool
	e.SetHook(func(s persist.Step) error {
		if s == persist.StepBeforePublication && !armed.Swap(true) {
			time.AfterFunc(100*time.Millisecond, func() { cancel(context.DeadlineExceeded) })
		}
		return nil
	})
	err := l.Save(sctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}})
	e.SetHook(nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("save while the index lock is held: %v", err)
	}
	if !armed.Load() {
		t.Fatal("the save never reached publication")
	}
	past := time.Now().Add(-IndexLockStale - time.Second)
	os.Chtimes(ilock, past, past)
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}}); err != nil {
		t.Fatalf("save after the index lock went stale: %v", err)
	}
	if _, err := os.Stat(ilock); !os.IsNotExist(err) {
		t.Fatalf("index lock remains: %v", err)
	}
}

// TestUnlock: a live holder's lock is removed only with force (and the
// holder then finds its lock lost); a workspace with no lock is an error.
func TestUnlock(t *testing.T) {
	st, err := NewStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true, EvaluationID: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Unlock(ctx, "w", false); !errors.Is(err, persist.ErrLockHeld) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("unlocking a live holder's lock: %v", err)
	}
	holder, err := st.Unlock(ctx, "w", true)
	if err != nil || !strings.Contains(holder, "holder") {
		t.Fatalf("unlocking with force: %q, %v", holder, err)
	}
	if err := l.(persist.LockChecker).CheckLock(ctx); err == nil {
		t.Error("the holder of a removed lock still thinks it holds it")
	}
	_ = l.Release(ctx)
	if _, err := st.Unlock(ctx, "w", false); err == nil || !strings.Contains(err.Error(), "has no writer lock") {
		t.Fatalf("unlocking a workspace with no lock: %v", err)
	}
}
