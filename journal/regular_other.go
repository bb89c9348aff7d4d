//go:build !unix

package journal

import (
	"os"
)

// openRegular opens the file at path with flag and returns it only when
// it is a regular file, else an error wrapping ErrNotRegular that names
// path and what it is; with follow unset a symbolic link is refused too.
// Without O_NOFOLLOW the link check is made before the open.
func openRegular(path string, flag int, follow bool) (*os.File, error) {
	if !follow {
		if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
			return nil, notRegular(path, fi.Mode())
		}
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, whyNotOpened(path, follow, err)
	}
	if err := checkOpened(f, path); err != nil {
		return nil, err
	}
	return f, nil
}
