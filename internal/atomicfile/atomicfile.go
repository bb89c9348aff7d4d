// Package atomicfile writes files that readers, and a process killed in
// the middle of the write, see whole or not at all.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm through a temporary file in
// the same directory renamed over it: a reader, or what a kill leaves,
// sees the old content or the new one, never a part. The temporary file
// is removed when the write fails.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, perm)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, werr)
	}
	return nil
}
