//go:build linux

package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aml-go/aml/eval"
)

// swapWorkspace materializes every workspace() in one directory.
type swapWorkspace struct{ dir string }

func (w swapWorkspace) Name() string { return "fixed" }
func (w swapWorkspace) Acquire(context.Context, *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	return swapLease(w), nil
}

type swapLease struct{ dir string }

func (l swapLease) ID() string                                            { return "fixed" }
func (l swapLease) Directory() string                                     { return l.dir }
func (l swapLease) Save(context.Context, eval.WorkspaceSaveRequest) error { return nil }
func (l swapLease) Release(context.Context) error                         { return nil }

// TestConfinementUnderSymlinkSwaps: while a directory of the workspace
// and a symbolic link to a directory outside it are exchanged atomically
// in a loop, file() and include(path=) under the workspace (no sandbox)
// never write or read outside the root.
func TestConfinementUnderSymlinkSwaps(t *testing.T) {
	const runs = 600
	top := t.TempDir()
	root, outside := filepath.Join(top, "root"), filepath.Join(top, "outside")
	for _, d := range []string{filepath.Join(root, "d"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "d", "secret.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("OUTSIDE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d, e := filepath.Join(root, "d"), filepath.Join(root, "e")
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, e, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("renameat2: %v", err)
				return
			}
		}
	}()
	rt, err := eval.New(eval.Options{WorkspaceProvider: swapWorkspace{root}})
	if err != nil {
		t.Fatal(err)
	}
	escapes, completed := 0, 0
	for i := 0; i < runs; i++ {
		out, err := rt.Evaluate(context.Background(), &eval.Workspace{Children: []any{
			&eval.File{Path: "d/written.txt", Children: []any{"x"}},
			&eval.Include{Path: "d/secret.txt", NoTitle: true},
		}})
		if err == nil {
			completed++
		}
		if strings.Contains(out, "OUTSIDE") {
			escapes++
		}
		if _, err := os.Stat(filepath.Join(outside, "written.txt")); err == nil {
			escapes++
			os.Remove(filepath.Join(outside, "written.txt"))
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d escapes in %d runs with the directory swapped for a link (%d runs completed, the others were refused)", escapes, runs, completed)
	if escapes != 0 {
		t.Fatalf("%d of %d runs read or wrote outside the workspace root", escapes, runs)
	}
}
