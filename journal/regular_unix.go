//go:build unix

package journal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openRegular opens the file at path with flag and returns it only when
// it is a regular file, else an error wrapping ErrNotRegular that names
// path and what it is. It opens without blocking (O_NONBLOCK), so that
// opening a FIFO with no writer returns at once, and fstats what it
// opened before anything reads it; with follow unset a symbolic link is
// refused too (O_NOFOLLOW). The returned file is in blocking mode.
func openRegular(path string, flag int, follow bool) (*os.File, error) {
	flag |= unix.O_NONBLOCK | unix.O_CLOEXEC
	if !follow {
		flag |= unix.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, whyNotOpened(path, follow, err)
	}
	if err := checkOpened(f, path); err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot use %s: %w", path, err)
	}
	return f, nil
}
