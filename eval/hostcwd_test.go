package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// TestHostScriptCwdSymlinkEscape: a host script(cwd=) that names a
// symbolic link to a directory outside the runtime's directory is
// refused, by the same real-path rule as every other path.
func TestHostScriptCwdSymlinkEscape(t *testing.T) {
	top := t.TempDir()
	dir, outside := filepath.Join(top, "work"), filepath.Join(top, "outside")
	for _, d := range []string{filepath.Join(dir, "inside"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../outside", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	rt, _ := eval.New(eval.Options{Cwd: dir, Host: host(t)})
	_, err := rt.Evaluate(context.Background(), &eval.Script{Command: "pwd", Cwd: "link", Position: pos(3)})
	if err == nil || !strings.Contains(err.Error(), "t.star:3:1: script()") {
		t.Fatalf("a cwd through a link out of the runtime's directory: %v", err)
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), "outside") && !strings.Contains(err.Error(), "escapes") {
		t.Fatalf("the error does not say the cwd leaves the directory: %v", err)
	}
	got, err := rt.Evaluate(context.Background(), &eval.Script{Command: "pwd", Cwd: "inside"})
	if err != nil || !strings.HasSuffix(strings.TrimSpace(got), "inside") {
		t.Fatalf("an inside cwd: %q, %v", got, err)
	}
}
