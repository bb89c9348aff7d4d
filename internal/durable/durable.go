// Package durable holds the file-system steps that make a write survive a
// crash. Its functions are safe for concurrent use.
package durable

import (
	"errors"
	"os"
	"runtime"
	"syscall"
)

// SyncDir fsyncs the directory dir, making the entries created, renamed
// or removed in it durable. A file system that cannot fsync a directory
// (EINVAL), and Windows, where a directory cannot be opened for it, make
// it a no-op: there the entries are as durable as that system allows.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
}
