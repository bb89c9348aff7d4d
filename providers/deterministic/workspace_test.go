package deterministic_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

func newWorkspace(t *testing.T) (*deterministic.Workspace, string) {
	t.Helper()
	tmp := t.TempDir()
	w, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	return w, tmp
}

func acquireWS(t *testing.T, w *deterministic.Workspace, req *eval.WorkspaceAcquireRequest) eval.WorkspaceLease {
	t.Helper()
	l, err := w.Acquire(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func current(id string) *eval.WorkspaceAcquireRequest {
	return &eval.WorkspaceAcquireRequest{ID: id, EvaluationID: "ev", Load: &eval.WorkspaceLoad{Revision: "current"}, Lock: true}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func TestWorkspaceSaveRestoreRelease(t *testing.T) {
	w, tmp := newWorkspace(t)
	ctx := context.Background()
	if w.Name() != deterministic.DefaultWorkspaceName {
		t.Fatalf("name %q", w.Name())
	}
	if w.Files("w") != nil || w.Revisions("w") != nil {
		t.Fatal("files of an unsaved workspace")
	}
	l := acquireWS(t, w, current("w"))
	if l.ID() != "deterministic-workspace-1" || filepath.Dir(l.Directory()) != tmp {
		t.Fatalf("id %q dir %q", l.ID(), l.Directory())
	}
	if n := entries(t, l.Directory()); n != 0 {
		t.Fatalf("new workspace has %d entries", n)
	}
	writeFiles(t, l.Directory(), map[string]string{"a.txt": "A", "src/main.go": "package main", ".hidden": "h"})
	if err := os.Chmod(filepath.Join(l.Directory(), "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(l.Directory(), "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	save := eval.WorkspaceSaveRequest{Outcome: "success", SavePolicy: eval.SavePolicy{Retention: 1, Gitignore: true}}
	if err := l.Save(ctx, save); err != nil {
		t.Fatal(err)
	}
	dir := l.Directory()
	for range 2 {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory kept: %v", err)
	}
	if err := l.Save(ctx, save); !errors.Is(err, deterministic.ErrReleased) {
		t.Fatalf("save after release: %v", err)
	}
	want := map[string]string{"a.txt": "A", "src/main.go": "package main", ".hidden": "h"}
	if got := w.Files("w"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files %v", got)
	}

	r := acquireWS(t, w, current("w"))
	if got := readTree(t, r.Directory()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v", got)
	}
	if fi, err := os.Stat(filepath.Join(r.Directory(), "empty")); err != nil || !fi.IsDir() {
		t.Fatalf("empty directory not restored: %v", err)
	}
	if runtime.GOOS != "windows" {
		if fi, _ := os.Stat(filepath.Join(r.Directory(), "a.txt")); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", fi.Mode())
		}
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}

	empty := acquireWS(t, w, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true})
	if n := entries(t, empty.Directory()); n != 0 {
		t.Fatalf("Load nil materialized %d entries", n)
	}
	empty.Release(ctx)

	if !slices.Equal(w.Releases(), []string{"deterministic-workspace-1", "deterministic-workspace-2", "deterministic-workspace-3"}) {
		t.Fatalf("releases %v", w.Releases())
	}
	saves := w.Saves()
	if len(saves) != 1 || saves[0].LeaseID != "deterministic-workspace-1" || saves[0].Revision != "1" || !saves[0].Request.Gitignore {
		t.Fatalf("saves %+v", saves)
	}
	if n := entries(t, tmp); n != 0 {
		t.Fatalf("%d leftovers in the temp dir", n)
	}
}

func TestWorkspaceConflict(t *testing.T) {
	w, tmp := newWorkspace(t)
	ctx := context.Background()
	first := acquireWS(t, w, current("w"))
	_, err := w.Acquire(ctx, current("w"))
	var ce *eval.WorkspaceConflictError
	if !errors.As(err, &ce) || ce.WorkspaceID != "w" {
		t.Fatalf("want a conflict, got %v", err)
	}
	other := acquireWS(t, w, current("other"))
	unlocked := acquireWS(t, w, &eval.WorkspaceAcquireRequest{ID: "w"})
	if err := unlocked.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Acquire(ctx, current("w")); !errors.As(err, &ce) {
		t.Fatalf("releasing an unlocked lease dropped the lock: %v", err)
	}
	first.Release(ctx)
	again := acquireWS(t, w, current("w"))
	again.Release(ctx)
	other.Release(ctx)
	if n := entries(t, tmp); n != 0 {
		t.Fatalf("%d leftovers", n)
	}
	if len(w.Acquisitions()) != 6 {
		t.Fatalf("acquisitions %d", len(w.Acquisitions()))
	}
}

func TestWorkspaceRevisionsAndRetention(t *testing.T) {
	w, tmp := newWorkspace(t)
	ctx := context.Background()
	l := acquireWS(t, w, current("w"))
	for i, retention := range []int{0, 3, 2} {
		writeFiles(t, l.Directory(), map[string]string{"n.txt": fmt.Sprint(i + 1)})
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{Outcome: "failure", SavePolicy: eval.SavePolicy{Retention: retention}}); err != nil {
			t.Fatal(err)
		}
	}
	l.Release(ctx)
	if got := w.Revisions("w"); !slices.Equal(got, []string{"3", "2"}) {
		t.Fatalf("revisions %v", got)
	}
	r := acquireWS(t, w, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{Revision: "2"}, Lock: true})
	if got := readTree(t, r.Directory()); got["n.txt"] != "2" {
		t.Fatalf("revision 2: %v", got)
	}
	r.Release(ctx)
	if _, err := w.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{Revision: "1"}, Lock: true}); err == nil {
		t.Fatal("a pruned revision was restored")
	}
	if _, err := w.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "fresh", Load: &eval.WorkspaceLoad{Revision: "7"}, Lock: true}); err == nil {
		t.Fatal("a missing revision of a new id was restored")
	}
	// The failed acquisitions released the lock and removed their directory.
	acquireWS(t, w, current("w")).Release(ctx)
	acquireWS(t, w, current("fresh")).Release(ctx)
	if n := entries(t, tmp); n != 0 {
		t.Fatalf("%d leftovers", n)
	}
	if err := acquireWS(t, w, current("w")).Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: -1}}); err == nil {
		t.Fatal("negative retention accepted")
	}
}

func TestWorkspaceIncludeExclude(t *testing.T) {
	w, _ := newWorkspace(t)
	ctx := context.Background()
	l := acquireWS(t, w, current("w"))
	writeFiles(t, l.Directory(), map[string]string{
		"a.txt": "a", "b.log": "b", "src/x.go": "x", "src/y.txt": "y", "node_modules/m/i.js": "m", "docs/d.md": "d",
	})
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Exclude: []string{"node_modules", "*.log"}}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(w.Files("w")); got != "map[a.txt:a docs/d.md:d src/x.go:x src/y.txt:y]" {
		t.Fatalf("exclude: %s", got)
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Include: []string{"src", "*.txt"}, Exclude: []string{"src/*.txt"}}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(w.Files("w")); got != "map[a.txt:a src/x.go:x]" {
		t.Fatalf("include: %s", got)
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Exclude: []string{"/abs"}}}); err == nil {
		t.Fatal("absolute glob accepted")
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Include: []string{"["}}}); err == nil {
		t.Fatal("malformed glob accepted")
	}
	l.Release(ctx)

	r := acquireWS(t, w, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{Revision: "current", Exclude: []string{"src"}}, Lock: true})
	if got := fmt.Sprint(readTree(t, r.Directory())); got != "map[a.txt:a]" {
		t.Fatalf("load exclude: %s", got)
	}
	r.Release(ctx)
	if _, err := w.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{Include: []string{`a\b`}}}); err == nil {
		t.Fatal("backslash glob accepted")
	}
}

func TestWorkspaceRejectsSymlinks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	w, _ := newWorkspace(t)
	ctx := context.Background()
	l := acquireWS(t, w, current("w"))
	defer l.Release(ctx)
	if err := os.Symlink("/etc/passwd", filepath.Join(l.Directory(), "link")); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{}); err == nil {
		t.Fatal("a symlink was saved")
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Exclude: []string{"link"}}}); err != nil {
		t.Fatalf("an excluded symlink failed the save: %v", err)
	}
}

func TestWorkspaceStaleSave(t *testing.T) {
	w, _ := newWorkspace(t)
	ctx := context.Background()
	unlocked := acquireWS(t, w, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{}})
	locked := acquireWS(t, w, current("w"))
	if err := locked.Save(ctx, eval.WorkspaceSaveRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := locked.Save(ctx, eval.WorkspaceSaveRequest{}); err != nil {
		t.Fatalf("a second save of the same lease: %v", err)
	}
	err := unlocked.Save(ctx, eval.WorkspaceSaveRequest{})
	var ce *eval.WorkspaceConflictError
	if !errors.Is(err, deterministic.ErrStaleRevision) || errors.As(err, &ce) {
		t.Fatalf("stale save: %v", err)
	}
	locked.Release(ctx)
	unlocked.Release(ctx)
}

func TestWorkspaceRejects(t *testing.T) {
	w, _ := newWorkspace(t)
	for _, req := range []*eval.WorkspaceAcquireRequest{nil, {ID: ""}, {ID: " x"}, {ID: "a\x00"}} {
		if _, err := w.Acquire(context.Background(), req); err == nil {
			t.Errorf("%+v accepted", req)
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if _, err := w.Acquire(ctx, current("w")); !errors.Is(err, cause) {
		t.Fatalf("pre-cancelled: %v", err)
	}
	l := acquireWS(t, w, current("w"))
	defer l.Release(context.Background())
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{}); !errors.Is(err, cause) {
		t.Fatalf("pre-cancelled save: %v", err)
	}
	if err := l.Save(context.Background(), eval.WorkspaceSaveRequest{Outcome: "maybe"}); err == nil {
		t.Fatal("bad outcome accepted")
	}
	if len(w.Acquisitions()) != 1 || len(w.Saves()) != 0 {
		t.Fatalf("recorded %d acquisitions, %d saves", len(w.Acquisitions()), len(w.Saves()))
	}
	if _, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{Name: "x "}); err == nil {
		t.Fatal("bad name accepted")
	}
}

func TestWorkspaceAcquisitionsAreCopies(t *testing.T) {
	w, _ := newWorkspace(t)
	req := &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{Revision: "current", Include: []string{"a"}}}
	l := acquireWS(t, w, req)
	defer l.Release(context.Background())
	req.Load.Include[0] = "mutated"
	got := w.Acquisitions()
	if got[0].Load.Include[0] != "a" {
		t.Fatal("recorded request shares the caller's slice")
	}
	got[0].Load.Revision = "mutated"
	if w.Acquisitions()[0].Load.Revision != "current" {
		t.Fatal("Acquisitions shares the recorded request")
	}
}

func TestWorkspaceConcurrent(t *testing.T) {
	w, tmp := newWorkspace(t)
	ctx := context.Background()
	var conflicts sync.Map
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			id := fmt.Sprintf("w%d", i%4)
			l, err := w.Acquire(ctx, current(id))
			var ce *eval.WorkspaceConflictError
			if errors.As(err, &ce) {
				conflicts.Store(i, true)
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			if err := os.WriteFile(filepath.Join(l.Directory(), "f"), []byte(id), 0o644); err != nil {
				t.Error(err)
			}
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{}); err != nil {
				t.Error(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		id := fmt.Sprintf("w%d", i)
		if f := w.Files(id); f != nil && f["f"] != id {
			t.Fatalf("%s: %v", id, f)
		}
	}
	if n := entries(t, tmp); n != 0 {
		t.Fatalf("%d leftovers", n)
	}
}
