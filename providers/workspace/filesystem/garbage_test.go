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
		time.Sleep(time.Duration(i) * 10 * time.Millisecond)
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

	p := persist.New(s, persist.Options{TemporaryDirectory: temp})
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
	live.stdin.Close()
}
