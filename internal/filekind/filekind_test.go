//go:build unix

package filekind_test

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/aml-go/aml/internal/filekind"
)

// TestOf names real entries made on disk, so the names follow what Lstat
// reports rather than hand-built modes.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink("f", link); err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{file: "regular file", dir: "directory", link: "symbolic link"}
	if runtime.GOOS != "windows" {
		fifo := filepath.Join(dir, "p")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		entries[fifo] = "named pipe"
		sock := filepath.Join(dir, "s")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		entries[sock] = "socket"
		entries["/dev/null"] = "character device"
	}
	for path, want := range entries {
		info, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := filekind.Of(info.Mode()); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if got := filekind.Of(fs.ModeDevice); got != "device" {
		t.Errorf("block device: %q", got)
	}
	if got := filekind.Of(fs.ModeIrregular); got != "irregular file" {
		t.Errorf("irregular: %q", got)
	}
}
