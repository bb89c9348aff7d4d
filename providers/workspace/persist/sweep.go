package persist

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aml-go/aml/providers/workspace/internal/lockfile"
)

// ownerFile, in the root of every materialization, names the process
// that made it and the workspace it holds, so that what a killed process
// left behind can be told from what a live one is using.
const ownerFile = "owner.json"

// materializationOwner is the content of ownerFile.
type materializationOwner struct {
	lockfile.Process
	// Store identifies the storage (adapter name and location).
	Store string `json:"store"`
	// Workspace is the workspace id.
	Workspace string    `json:"workspace"`
	CreatedAt time.Time `json:"createdAt"`
}

func writeOwner(root, store, id string) error {
	data, err := json.Marshal(materializationOwner{Process: lockfile.Self(), Store: store, Workspace: id, CreatedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, ownerFile), data, 0o600)
}

// storeKey identifies the provider's storage: its adapter name and, when
// the adapter has one, its directory.
func (p *provider) storeKey() string {
	key := p.storage.Name()
	if d, ok := p.storage.(interface{ Directory() string }); ok {
		key += ":" + d.Directory()
	}
	return key
}

// Sweep reports what a sweep removed.
type Sweep struct {
	// Removed are the paths removed.
	Removed []string
	// Bytes is their total size.
	Bytes int64
}

// Sweeper is implemented by the workspace providers New returns: it
// removes what processes that no longer exist left behind (see Sweep).
type Sweeper interface {
	// Sweep removes the garbage of workspace id, or of every workspace
	// of the storage when id is "": the materializations that a process
	// of this machine that no longer exists made (what a killed run left
	// in the temporary directory, snapshots included). Materializations of
	// live processes, of other machines and of unknown owners are kept.
	// Acquire sweeps the workspace it acquires.
	Sweep(ctx context.Context, id string) (Sweep, error)
}

var _ Sweeper = (*provider)(nil)

// Sweep implements Sweeper.
func (p *provider) Sweep(ctx context.Context, id string) (Sweep, error) {
	return p.SweepMaterializations(id)
}

// SweepMaterializations removes the dead materializations of workspace
// id ("" for all).
func (p *provider) SweepMaterializations(id string) (Sweep, error) {
	var sw Sweep
	dirs, err := filepath.Glob(filepath.Join(p.opts.TemporaryDirectory, "aml-workspace-*"))
	if err != nil {
		return sw, err
	}
	key := p.storeKey()
	var errs []error
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		var o materializationOwner
		if json.Unmarshal(data, &o) != nil || o.Store != key || (id != "" && o.Workspace != id) || !o.Process.Gone() {
			continue
		}
		size := treeSize(d)
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		sw.Removed = append(sw.Removed, d)
		sw.Bytes += size
	}
	return sw, errors.Join(errs...)
}

// treeSize is the total size of the regular files below dir.
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
