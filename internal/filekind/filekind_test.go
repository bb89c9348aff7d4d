package filekind

import (
	"io/fs"
	"testing"
)

func TestName(t *testing.T) {
	for _, c := range []struct {
		m                  fs.FileMode
		kind, coarse, info string
	}{
		{0o644, "regular file", "regular file", "file"},
		{fs.ModeDir | 0o755, "directory", "directory", "directory"},
		{fs.ModeSymlink | 0o777, "symbolic link", "symbolic link", "other"},
		{fs.ModeNamedPipe, "named pipe", "named pipe", "other"},
		{fs.ModeSocket, "socket", "socket", "other"},
		{fs.ModeDevice | fs.ModeCharDevice, "character device", "device", "other"},
		{fs.ModeDevice, "device", "device", "other"},
		{fs.ModeIrregular, "irregular file", "special file", "other"},
		// Coarse calls only what has ModeDevice a device.
		{fs.ModeCharDevice, "character device", "special file", "other"},
	} {
		if got := Name(c.m); got != c.kind {
			t.Errorf("Name(%v) = %q, want %q", c.m, got, c.kind)
		}
		if got := Coarse(c.m); got != c.coarse {
			t.Errorf("Coarse(%v) = %q, want %q", c.m, got, c.coarse)
		}
		if got := Info(c.m); got != c.info {
			t.Errorf("Info(%v) = %q, want %q", c.m, got, c.info)
		}
	}
}
