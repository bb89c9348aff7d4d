// Package scratch makes the private temporary directories of one aml
// process (file stagings, agent state directories) in a way that lets what
// a killed process left behind be found and removed.
//
// Every directory D made by MkdirTemp has a marker file "D.owner" beside
// it, written before D exists, that records the process that made it
// (procscope.Process). Sweep removes the directories whose marker names a
// process of this machine that no longer exists; the first MkdirTemp of a
// process sweeps the temporary directory once. Directories of live
// processes, of other machines and without a marker are kept. Every
// function is safe for concurrent use.
package scratch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/internal/procscope"
)

// MarkerSuffix ends the name of a directory's owner marker: the marker
// of directory D is "D" + MarkerSuffix.
const MarkerSuffix = ".owner"

// Prefix starts the name of every scratch directory.
const Prefix = "aml-"

// owner is the content of a marker.
type owner struct {
	procscope.Process
	CreatedAt time.Time `json:"createdAt"`
}

var sweepOnce sync.Once

// MkdirTemp creates a new private (0700) directory in os.TempDir() whose
// name starts with prefix (which must start with Prefix), records this
// process as its owner and returns its path. Remove it with RemoveAll.
func MkdirTemp(prefix string) (string, error) {
	if !strings.HasPrefix(prefix, Prefix) || strings.ContainsAny(prefix, `/\*`) {
		return "", fmt.Errorf("scratch: prefix %q must start with %q and name no directory", prefix, Prefix)
	}
	parent := os.TempDir()
	sweepOnce.Do(func() {
		for _, d := range Parents() {
			_, _ = Sweep(d)
		}
	})
	data, err := Marker()
	if err != nil {
		return "", err
	}
	for range 10 {
		f, err := os.CreateTemp(parent, prefix+"*"+MarkerSuffix)
		if err != nil {
			return "", err
		}
		marker := f.Name()
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(marker)
			return "", werr
		}
		dir := strings.TrimSuffix(marker, MarkerSuffix)
		err = os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		_ = os.Remove(marker)
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("scratch: no free directory name for %q in %s", prefix, parent)
}

// Marker returns the content of an owner marker naming this process, for
// a scratch directory made by other means (in a sandbox whose /tmp is the
// host's).
func Marker() ([]byte, error) {
	return json.Marshal(owner{Process: procscope.Self(), CreatedAt: time.Now().UTC()})
}

// Parents are the directories that hold scratch directories: the
// temporary directory and, where it differs, /tmp (where state
// directories of agents in a local sandbox are made).
func Parents() []string {
	dirs := []string{os.TempDir()}
	if runtime.GOOS != "windows" {
		if a, b := filepath.Clean(dirs[0]), "/tmp"; a != b {
			if _, err := os.Stat(b); err == nil {
				dirs = append(dirs, b)
			}
		}
	}
	return dirs
}

// RemoveAll removes a directory made by MkdirTemp and then its marker.
func RemoveAll(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Remove(dir + MarkerSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Result reports what a sweep removed.
type Result struct {
	// Removed are the directories removed.
	Removed []string
	// Bytes is the total size of the regular files they held.
	Bytes int64
}

// Sweep removes the scratch directories in parent whose owner is a
// process of this machine that no longer exists, with their markers, and
// markers left without a directory by such a process.
func Sweep(parent string) (Result, error) {
	var res Result
	markers, err := filepath.Glob(filepath.Join(parent, Prefix+"*"+MarkerSuffix))
	if err != nil {
		return res, err
	}
	var errs []error
	for _, m := range markers {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var o owner
		if json.Unmarshal(data, &o) != nil || !o.Gone() {
			continue
		}
		dir := strings.TrimSuffix(m, MarkerSuffix)
		size, isDir := treeSize(dir)
		if err := RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if isDir {
			res.Removed = append(res.Removed, dir)
			res.Bytes += size
		}
	}
	return res, errors.Join(errs...)
}

// treeSize is the total size of the regular files below dir, and whether
// dir is a directory.
func treeSize(dir string) (int64, bool) {
	info, err := os.Lstat(dir)
	if err != nil || !info.IsDir() {
		return 0, false
	}
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, true
}
