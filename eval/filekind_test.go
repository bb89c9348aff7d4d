package eval

import (
	"io/fs"
	"testing"
)

func TestFileKind(t *testing.T) {
	for _, c := range []struct {
		m          fs.FileMode
		kind, info string
	}{
		{0o644, "regular file", "file"},
		{fs.ModeDir | 0o755, "directory", "directory"},
		{fs.ModeSymlink | 0o777, "symbolic link", "other"},
		{fs.ModeNamedPipe, "named pipe", "other"},
		{fs.ModeSocket, "socket", "other"},
		{fs.ModeDevice | fs.ModeCharDevice, "character device", "other"},
		{fs.ModeDevice, "device", "other"},
		{fs.ModeIrregular, "irregular file", "other"},
	} {
		if got := FileKind(c.m); got != c.kind {
			t.Errorf("FileKind(%v) = %q, want %q", c.m, got, c.kind)
		}
		if got := FileInfoKind(c.m); got != c.info {
			t.Errorf("FileInfoKind(%v) = %q, want %q", c.m, got, c.info)
		}
	}
}
