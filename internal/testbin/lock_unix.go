//go:build unix

package testbin

import (
	"fmt"
	"os"
	"syscall"
)

// lock takes an exclusive lock on the file at p (made when missing),
// waiting for other processes that hold it.
func lock(p string) (unlock func(), err error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	return func() { f.Close() }, nil
}
