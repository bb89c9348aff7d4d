package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file holds the new content with the mode asked for, and
// no temporary file is left, neither after a write nor after one that
// failed (its directory is gone).
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.golden")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	info, _ := os.Stat(p)
	if err != nil || string(b) != "new" || info.Mode().Perm() != 0o644 {
		t.Fatalf("%q %v %v", b, info.Mode(), err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("left %v", left)
	}
	if err := Write(filepath.Join(dir, "missing", "b"), []byte("x"), 0o644); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("left %v", left)
	}
}
