package journal

import (
	"errors"
	"fmt"
	"github.com/aml-go/aml/internal/filekind"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is wrapped by the errors of Open, ReadEffects and Prune,
// by Summary.ReadErr, and by the error of LoadKey, when a run's
// journal.log (or the key file) is not a regular file: a named pipe, a
// device, a socket, a directory, or, for journal.log, a symbolic link.
// Such a file is refused before anything reads it, so a hostile run
// directory cannot make a command wait forever (on a FIFO) or read
// without end (from /dev/zero).
var ErrNotRegular = errors.New("not a regular file")

// notRegular is the error for path, whose type is mode.
func notRegular(path string, mode fs.FileMode) error {
	return fmt.Errorf("%s is a %s, %w", path, filekind.Name(mode), ErrNotRegular)
}

// openLog opens a run's journal.log with flag (os.O_RDONLY, or
// os.O_RDWR|os.O_APPEND), refusing one that is not a regular file or
// that is a symbolic link (see openRegular): aml writes a run's journal
// as a regular file in the run's directory, never as a link.
func openLog(path string, flag int) (*os.File, error) {
	f, err := openRegular(path, flag, false)
	if errors.Is(err, ErrNotRegular) {
		return nil, fmt.Errorf("%w; aml writes a run's journal.log as a regular file, so %s holds no run aml recorded: move it out of the journal directory", err, filepath.Dir(path))
	}
	return f, err
}

// checkOpened refuses f, just opened from path, when it is not a regular
// file; it closes f then.
func checkOpened(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("cannot stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return notRegular(path, fi.Mode())
	}
	return nil
}

// whyNotOpened explains a failed open of path: when what is there is not
// a regular file (or, with follow unset, is a symbolic link), the error
// says so; else openErr.
func whyNotOpened(path string, follow bool, openErr error) error {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	if fi, err := stat(path); err == nil && !fi.Mode().IsRegular() {
		return notRegular(path, fi.Mode())
	}
	return openErr
}
