// Package durable writes files that survive a crash whole or not at all.
// A write goes to a temporary file in the target's directory, is fsynced,
// renamed (or hard-linked) to the target, and the directory is fsynced:
// a reader, or what a crash leaves, sees the old content or the new one,
// never a part. Its functions are safe for concurrent use; concurrent
// writes of one path leave one of them whole.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Options says how Write writes a file. The zero value replaces the file,
// giving it mode 0, through a temporary file named "."+name+".*".
type Options struct {
	// Perm is the mode of the written file. It is applied exactly (the
	// umask does not narrow it) unless Umask is set.
	Perm fs.FileMode
	// Umask narrows Perm by the process's umask, as os.OpenFile does.
	Umask bool
	// Temp is the pattern of the temporary file's name in the target's
	// directory, as for os.CreateTemp: the last "*" is replaced by a
	// random string. Empty means "."+filepath.Base(path)+".*". A caller
	// that removes what a killed process left sets it to what it removes.
	Temp string
	// Exclusive makes Write fail, with an error wrapping fs.ErrExist,
	// when the target exists instead of replacing it: the temporary file
	// is hard-linked to the target, which never replaces what is there,
	// so of concurrent writers exactly one wins.
	Exclusive bool
	// LinkFallback, with Exclusive, makes Write create the target in place
	// (with O_EXCL) where the file system cannot hard-link. A reader, or a
	// crash, may then see the file partly written.
	LinkFallback bool
}

// WriteFile replaces the file at path with data, giving it exactly the
// mode perm, durably and atomically: see Write. It is safe for concurrent
// use.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, data, Options{Perm: perm})
}

// Write writes data to the file at path as o says: to a temporary file in
// the same directory, fsynced, renamed over path (or hard-linked to it,
// with o.Exclusive), and the directory fsynced. The temporary file is
// removed on every failure path. The error names path (or its directory,
// when only syncing it failed) and wraps its cause. It is safe for
// concurrent use.
func Write(path string, data []byte, o Options) error {
	dir := filepath.Dir(path)
	pattern := o.Temp
	if pattern == "" {
		pattern = "." + filepath.Base(path) + ".*"
	}
	f, err := createTemp(dir, pattern, o.Perm)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	tmp := f.Name()
	err = fill(f, data, o)
	if err == nil {
		if o.Exclusive {
			err = os.Link(tmp, path)
		} else {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil || o.Exclusive {
		os.Remove(tmp)
	}
	if err != nil {
		if o.Exclusive && o.LinkFallback && !errors.Is(err, fs.ErrExist) {
			return writeInPlace(path, data, o)
		}
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("cannot sync %s: %w", dir, err)
	}
	return nil
}

// writeInPlace creates path with O_EXCL and writes data in it, synced; a
// failed write removes it.
func writeInPlace(path string, data []byte, o Options) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, o.Perm)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := fill(f, data, o); err != nil {
		os.Remove(path)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("cannot sync %s: %w", filepath.Dir(path), err)
	}
	return nil
}

// fill writes data to f, sets its mode, fsyncs and closes it.
func fill(f *os.File, data []byte, o Options) error {
	_, err := f.Write(data)
	if err == nil && !o.Umask {
		err = f.Chmod(o.Perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// createTemp creates a new file in dir named by pattern (as for
// os.CreateTemp) with mode perm narrowed by the umask.
func createTemp(dir, pattern string, perm fs.FileMode) (*os.File, error) {
	if strings.ContainsRune(pattern, os.PathSeparator) || strings.ContainsRune(pattern, '/') {
		return nil, &fs.PathError{Op: "createtemp", Path: pattern, Err: errors.New("pattern contains path separator")}
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 10000 {
			continue
		}
		return f, err
	}
}

// SyncDir fsyncs the directory dir, making the entries created, renamed
// or removed in it durable. A file system that cannot fsync a directory
// (EINVAL), and Windows, where a directory cannot be opened for it, make
// it a no-op: there the entries are as durable as that system allows. It
// is safe for concurrent use.
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
