package filekind

import (
	"io/fs"
	"testing"
)

func TestName(t *testing.T) {
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
		if got := Name(c.m); got != c.kind {
			t.Errorf("Name(%v) = %q, want %q", c.m, got, c.kind)
		}
		if got := Info(c.m); got != c.info {
			t.Errorf("Info(%v) = %q, want %q", c.m, got, c.info)
		}
	}
}
