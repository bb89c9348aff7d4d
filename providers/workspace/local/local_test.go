package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/internal/lockfile"
)

var ctx = context.Background()

func acquire(t *testing.T, p eval.WorkspaceProvider, lock bool) eval.WorkspaceLease {
	t.Helper()
	l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws", EvaluationID: "e", Lock: lock, Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDirectMaterialization(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "repo")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "existing.txt"), []byte("kept"), 0o644)
	link := filepath.Join(parent, "alias")
	os.Symlink(dir, link)
	p, err := New(Options{Directory: link})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != Name {
		t.Fatal(p.Name())
	}
	l := acquire(t, p, true)
	if l.Directory() != dir {
		t.Fatalf("Directory %q, want the resolved %q", l.Directory(), dir)
	}
	if !strings.HasPrefix(l.ID(), "local-") {
		t.Fatalf("lease id %q", l.ID())
	}
	if _, err := os.Stat(dir + ".lock"); err != nil {
		t.Fatalf("lock beside the directory: %v", err)
	}
	os.WriteFile(filepath.Join(l.Directory(), "new.txt"), []byte("direct"), 0o644)
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1, Include: []string{"nothing"}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	for _, f := range []string{"existing.txt", "new.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(dir + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("lock remains after release: %v", err)
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{}); err == nil {
		t.Fatal("Save after Release succeeded")
	}
}

func TestConflict(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "repo")
	os.Mkdir(dir, 0o755)
	os.Symlink(dir, filepath.Join(parent, "alias"))
	a, _ := New(Options{Directory: dir})
	b, _ := New(Options{Directory: filepath.Join(parent, "alias")})
	l := acquire(t, a, true)
	// Another provider on the same physical directory, another id.
	_, err := b.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "other-id", Lock: true})
	var ce *eval.WorkspaceConflictError
	if !errors.As(err, &ce) || ce.WorkspaceID != "other-id" {
		t.Fatalf("second writer: %v, want *eval.WorkspaceConflictError", err)
	}
	// lock=false takes no lock.
	u := acquire(t, b, false)
	if err := u.Save(ctx, eval.WorkspaceSaveRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := u.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l = acquire(t, b, true)
	l.Release(ctx)
}

func TestStaleLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	os.Mkdir(dir, 0o755)
	p, _ := New(Options{Directory: dir})
	old := acquire(t, p, true)
	past := time.Now().Add(-lockfile.DefaultStale - time.Minute)
	if err := os.Chtimes(dir+".lock", past, past); err != nil {
		t.Fatal(err)
	}
	taker := acquire(t, p, true)
	err := old.Save(ctx, eval.WorkspaceSaveRequest{})
	if !errors.Is(err, lockfile.ErrCompromised) {
		t.Fatalf("Save with a lost lock: %v", err)
	}
	var ce *eval.WorkspaceConflictError
	if errors.As(err, &ce) {
		t.Fatal("lost lock reported as a conflict")
	}
	if err := old.Release(ctx); !errors.Is(err, lockfile.ErrCompromised) {
		t.Fatalf("Release with a lost lock: %v", err)
	}
	if err := taker.Save(ctx, eval.WorkspaceSaveRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := taker.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	parent := t.TempDir()
	if _, err := New(Options{}); err == nil {
		t.Error("empty directory accepted")
	}
	missing := filepath.Join(parent, "missing")
	p, err := New(Options{Directory: missing})
	if err != nil {
		t.Fatal(err) // no I/O at construction
	}
	if _, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws", Lock: true}); err == nil {
		t.Error("missing directory accepted")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("Acquire created the directory")
	}
	file := filepath.Join(parent, "file")
	os.WriteFile(file, nil, 0o644)
	p, _ = New(Options{Directory: file})
	if _, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws", Lock: true}); err == nil {
		t.Error("a file accepted as the directory")
	}
	p, _ = New(Options{Directory: parent})
	if _, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws", Lock: true, Load: &eval.WorkspaceLoad{Revision: "r1"}}); err == nil {
		t.Error("a named revision accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Acquire(cctx, &eval.WorkspaceAcquireRequest{ID: "ws", Lock: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Acquire: %v", err)
	}
	if _, err := os.Stat(parent + ".lock"); !os.IsNotExist(err) {
		t.Error("a failed Acquire left its lock")
	}
}
