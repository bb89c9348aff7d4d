package persisttest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// RunProvider's checks of leases: their shape, locks, saves that race
// another save or a change of their files, cancellation and invalid
// requests.

// testLeaseShape checks a lease's id and materialization, the provider's
// name, and what a released lease still does.
func testLeaseShape(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()
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
}

// testConflict checks that a second locked Acquire fails with a
// *eval.WorkspaceConflictError and that an unlocked one takes no lock.
func testConflict(t *testing.T, newStorage NewStorageFunc) {
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
}

// testStalePublication checks that a save over a superseded current
// revision fails with ErrPreconditionFailed and leaves nothing behind.
func testStalePublication(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
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
}

// testChangedDuringSave checks that a file changed after the snapshot
// fails the save (an archive may take a same-size rewrite as read) and
// publishes nothing.
func testChangedDuringSave(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
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
}

// testCancellation checks that Acquire and Save stop with a done
// context's cause and that Release still works.
func testCancellation(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()
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
}

// testInvalidRequests checks that invalid ids, formats and retentions
// are refused.
func testInvalidRequests(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{})
	for _, id := range []string{"", " padded", "tab\t"} {
		if _, err := e.TryAcquire(id, true, nil); err == nil {
			t.Errorf("id %q accepted", id)
		}
	}
	bad := persist.New(e.Storage, persist.Options{StoreOptions: persist.StoreOptions{Format: "zip"}})
	if _, err := bad.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws"}); err == nil {
		t.Error("format zip accepted")
	}
	l := e.Acquire("ws", true, nil)
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: -1}}); err == nil {
		t.Error("negative retention accepted")
	}
	e.Release(l)
}
