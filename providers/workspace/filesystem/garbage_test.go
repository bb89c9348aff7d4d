package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
)

// garbage counts the materializations in temp and their bytes.
func garbage(t *testing.T, temp string) (int, int64) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(temp, "aml-workspace-*"))
	var size int64
	for _, d := range dirs {
		_ = filepath.Walk(d, func(_ string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				size += info.Size()
			}
			return nil
		})
	}
	return len(dirs), size
}

// TestCrashGarbageSwept: a process SIGKILLed in the middle of a save
// leaves its materialization (and snapshot) in the temporary directory;
// the next acquisition of the same workspace removes it, so after many
// kills only the last one's remains, and a live process's is kept.
func TestCrashGarbageSwept(t *testing.T) {
	const kills = 10
	dir := filepath.Join(t.TempDir(), "store")
	temp := t.TempDir()
	s, _ := NewStorage(dir)
	e := persisttest.NewEnv(t, s, persist.Options{})
	e.SaveTree("ws", generation(0, crashFiles, crashFileSize), 2)
	for i := 0; i < kills; i++ {
		h := startHelper(t, "save-loop", dir, temp, persist.FormatArchive, "")
		for seen := 0; seen < 2; {
			if line := h.next(t); strings.HasPrefix(line, "saving ") {
				seen++
			}
		}
		time.Sleep(time.Duration(i) * 10 * time.Millisecond) // the stimulus: the kill point within the save
		h.kill(t)
	}
	n, size := garbage(t, temp)
	t.Logf("after %d kills: %d materializations, %d MB left in the temporary directory", kills, n, size>>20)
	if n != 1 || size == 0 {
		t.Fatalf("%d materializations (%d bytes) after %d kills, want only the last killed one's: each acquisition sweeps what its dead predecessor left", n, size, kills)
	}

	// A live holder of another workspace keeps its materialization.
	live := startHelper(t, "hold-other", dir, temp, persist.FormatArchive, "")
	if line := live.next(t); line != "acquired" {
		t.Fatalf("live helper: %s", line)
	}

	tmps := func() (n int) {
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && tmpPattern.MatchString(info.Name()) {
				n++
			}
			return nil
		})
		return n
	}
	t.Logf("in the store: %d unpublished revision objects, %d temporary uploads", len(e.Orphans("ws")), tmps())

	// The temporary uploads of the dead writers name them and go at once;
	// one of a live writer and a recent one that names no writer stay
	// (until they are TemporaryAge old).
	seg, _ := s.WorkspaceDirectory("ws")
	keep := []string{
		filepath.Join(seg, "revisions", ".0b8a6f3e-4c1d-4e0f-9a5b-2c3d4e5f6a7b"+tmpSuffix()),
		filepath.Join(seg, "workspace.json.0b8a6f3e-4c1d-4e0f-9a5b-2c3d4e5f6a7c.tmp"),
	}
	for _, k := range keep {
		if err := os.WriteFile(k, []byte("in progress"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := persist.New(s, persist.Options{StoreOptions: persist.StoreOptions{TemporaryDirectory: temp}})
	l, err := p.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "ws", EvaluationID: "sweep", Lock: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, size = garbage(t, temp)
	t.Logf("after the next acquisition: %d materializations, %d bytes", n, size)
	if n != 1 {
		t.Fatalf("%d materializations remain, want only the live holder's", n)
	}
	if o, n := e.Orphans("ws"), tmps(); len(o) != 0 || n != len(keep) {
		t.Fatalf("after the next acquisition with the lock: unpublished revision objects %q, %d temporary uploads (want only the %d kept)", o, n, len(keep))
	}
	for _, k := range keep {
		if _, err := os.Stat(k); err != nil {
			t.Errorf("%s was removed: %v", k, err)
		}
	}
	live.stdin.Close()
}

// TestUnpublishedRevisionSwept: a save killed after its artifact was
// uploaded but before publication leaves an unpublished revision (and its
// pending marker) in the store; the next acquisition with the lock
// removes it, and the current revision still restores.
func TestUnpublishedRevisionSwept(t *testing.T) {
	for _, format := range persisttest.Formats {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			temp := t.TempDir()
			s, _ := NewStorage(dir)
			e := persisttest.NewEnv(t, s, persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
			e.SaveTree("ws", generation(0, crashFiles, crashFileSize), 2)
			h := startHelper(t, "save-loop", dir, temp, format, string(persist.StepAfterArtifactUpload))
			for {
				if line := h.next(t); strings.HasPrefix(line, "at ") {
					break
				}
			}
			h.kill(t)
			orphans := e.Orphans("ws")
			t.Logf("after the kill: %d unpublished revision objects", len(orphans))
			if len(orphans) == 0 {
				t.Fatal("the killed save left no unpublished revision")
			}
			p := persist.New(s, persist.Options{StoreOptions: persist.StoreOptions{Format: format, TemporaryDirectory: temp}})
			l, err := p.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "ws", EvaluationID: "sweep", Lock: true, Load: &eval.WorkspaceLoad{Revision: "current"}})
			if err != nil {
				t.Fatal(err)
			}
			g, ok := treeGeneration(persisttest.ReadTree(t, l.Directory()))
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			if o := e.Orphans("ws"); len(o) != 0 {
				t.Fatalf("unpublished revision objects left: %q", o)
			}
			if g != 0 || !ok {
				t.Fatalf("current restored generation %d (complete %v), want 0", g, ok)
			}
		})
	}
}

// TestWorkspacesLister: the store lists the ids of its workspaces, also
// ids that needed escaping, and ignores directories that are not the
// encoding of an id.
func TestWorkspacesLister(t *testing.T) {
	dir := t.TempDir()
	s, _ := NewStorage(dir)
	e := persisttest.NewEnv(t, s, persist.Options{})
	ids := []string{"a/b", "plain", "with space"}
	for _, id := range ids {
		e.SaveTree(id, persisttest.Tree{"f": {Data: id, Mode: 0o644}}, 1)
	}
	for _, junk := range []string{"not%zzvalid", "lower%2fhex", "..%2E"} {
		if err := os.Mkdir(filepath.Join(dir, junk), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Workspaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != strings.Join(ids, "|") {
		t.Fatalf("Workspaces() = %q, want %q", got, ids)
	}
	if got, err := (&Storage{root: filepath.Join(dir, "missing")}).Workspaces(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("a missing store: %q, %v", got, err)
	}
}
