package temporal

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aml-go/aml/eval"
)

// Staging is an agent's staging area as it travels to the worker that
// runs the session: the directory's path where the evaluator made it,
// which the request names, and its regular files.
type Staging struct {
	Root  string `json:"root"`
	Files []File `json:"files"`
}

// MaxStagingBytes bounds what an agent outside a sandbox may have staged
// when its session runs on another worker.
const MaxStagingBytes = 64 << 20

// readStaging reads the staging directory dir.
func readStaging(dir string) (*Staging, error) {
	st := &Staging{Root: dir}
	total := 0
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		if !de.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += len(data); total > MaxStagingBytes {
			return fmt.Errorf("more than %d MiB was staged for the agent", MaxStagingBytes>>20)
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		st.Files = append(st.Files, File{Path: filepath.ToSlash(rel), Data: data, Exec: info.Mode().Perm()&0o100 != 0})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// restage writes st below a new private directory of this worker and
// returns it with the function that renames the workflow's paths to it
// in a text.
func restage(st *Staging) (string, func(string) string, error) {
	dir, err := os.MkdirTemp("", "aml-agent-")
	if err != nil {
		return "", nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	defer root.Close()
	for _, f := range st.Files {
		if !fs.ValidPath(f.Path) || f.Path == "." {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("staged file %q is not a relative path", f.Path)
		}
		if d := path.Dir(f.Path); d != "." {
			if err := root.MkdirAll(d, 0o700); err != nil {
				os.RemoveAll(dir)
				return "", nil, err
			}
		}
		mode := os.FileMode(0o600)
		if f.Exec {
			mode = 0o700
		}
		if err := root.WriteFile(f.Path, f.Data, mode); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
	}
	rename := func(s string) string {
		if st.Root == "" {
			return s
		}
		return strings.ReplaceAll(s, st.Root, dir)
	}
	return dir, rename, nil
}

// renameSkills renames the paths of skills staged again.
func renameSkills(skills []eval.AgentSkill, rename func(string) string) []eval.AgentSkill {
	out := make([]eval.AgentSkill, len(skills))
	for i, sk := range skills {
		sk.Home, sk.Dir, sk.SkillFile = rename(sk.Home), rename(sk.Dir), rename(sk.SkillFile)
		out[i] = sk
	}
	return out
}
