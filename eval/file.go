package eval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// writeFileNode runs a file() node: it replaces one complete file in the
// nearest active filesystem, the sandbox's first, else the workspace
// materialization.
func (d *domain) writeFileNode(ctx context.Context, n *File, children []byte, res resScope, parentSpan string) error {
	p, err := CheckLogicalPath(n.Path, false)
	if err != nil {
		return newError(n.Position, "file(path=...): "+err.Error())
	}
	data := children
	if n.Src != "" {
		if data, err = d.readAppFile(n.Src); err != nil {
			return &EvaluationError{Msg: fmt.Sprintf("file(src=%q)", n.Src), Pos: n.Position, Err: err}
		}
	}
	if !utf8.Valid(data) {
		return newError(n.Position, fmt.Sprintf("file(path=%q): the content is not valid UTF-8", n.Path))
	}
	var content attrs
	if d.trace.captures() {
		content = attrs{"content", string(data)}
	}
	sp := d.trace.startSpan(parentSpan, "file", p, n.Position, attrs{"bytes", int64(len(data))}, content)
	switch {
	case res.sb != nil:
		v := res.sb
		if v.access == ReadOnly {
			err = newError(n.Position, fmt.Sprintf("file(path=%q) cannot write through a read-only sandbox(); give the sandbox access = \"read-write\"", n.Path))
		} else if werr := v.rt.WriteFile(ctx, v.logical(p), data); werr != nil {
			err = &EvaluationError{Msg: fmt.Sprintf("file(path=%q) could not be written in the sandbox", n.Path), Pos: n.Position, Err: werr}
		}
	case res.ws != nil:
		if werr := writeConfined(res.ws.lease.Directory(), p, data); werr != nil {
			err = &EvaluationError{Msg: fmt.Sprintf("file(path=%q) could not be written in the workspace", n.Path), Pos: n.Position, Err: werr}
		}
	default:
		err = newError(n.Position, "file() requires an enclosing workspace() or sandbox(): it writes into the nearest active filesystem")
	}
	sp.end(err, nil, nil)
	return err
}

// readAppFile reads an application-owned regular file resolved from the
// runtime's working directory.
func (d *domain) readAppFile(src string) ([]byte, error) {
	base, err := d.cwd()
	if err != nil {
		return nil, err
	}
	full := src
	if !filepath.IsAbs(full) {
		full = filepath.Join(base, full)
	}
	info, err := os.Stat(full)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s, not a regular file", src, fileKind(info))
	}
	return os.ReadFile(full)
}

// errEscape is wrapped by paths that resolve outside their root.
var errEscape = errors.New("path escapes its root")

// confined resolves logical path p below root on the host, following
// symbolic links only while they stay inside root. The final component
// need not exist.
func confined(root, p string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	cur := realRoot
	parts := strings.Split(p, "/")
	for i, part := range parts {
		next := filepath.Join(cur, part)
		info, err := os.Lstat(next)
		if errors.Is(err, os.ErrNotExist) {
			// The rest does not exist yet: nothing can escape through it.
			return filepath.Join(append([]string{cur}, parts[i:]...)...), nil
		}
		if err != nil {
			return "", err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			resolved, err := filepath.EvalSymlinks(next)
			if err != nil {
				return "", fmt.Errorf("%s: a dangling or unreadable symbolic link: %w", p, errEscape)
			}
			if !within(realRoot, resolved) {
				return "", fmt.Errorf("%s resolves outside its root: %w", p, errEscape)
			}
			next = resolved
		}
		cur = next
	}
	return cur, nil
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// writeConfined atomically replaces root/p with data, creating parent
// directories, without writing through symbolic links.
func writeConfined(root, p string, data []byte) error {
	full, err := confined(root, p)
	if err != nil {
		return err
	}
	if info, err := os.Lstat(full); err == nil {
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: file() does not write through links", p)
		case !info.Mode().IsRegular():
			return fmt.Errorf("%s is a %s, not a file", p, fileKind(info))
		}
	}
	dir := filepath.Dir(full)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The directories just created are real directories; re-check that the
	// parent still resolves inside the root before writing.
	realRoot, _ := filepath.EvalSymlinks(root)
	if realDir, err := filepath.EvalSymlinks(dir); err != nil || !within(realRoot, realDir) {
		return fmt.Errorf("%s resolves outside its root: %w", p, errEscape)
	}
	tmp, err := os.CreateTemp(dir, ".aml-file-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), full); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// readConfinedInfo resolves root/p, refusing links that leave root, and
// describes it; it must be a regular file.
func readConfinedInfo(root, p string) (string, os.FileInfo, error) {
	full, err := confined(root, p)
	if err != nil {
		return "", nil, err
	}
	info, err := os.Stat(full)
	if err != nil {
		return "", nil, err
	}
	if !info.Mode().IsRegular() {
		return "", info, fmt.Errorf("%s is a %s, not a regular file", p, fileKind(info))
	}
	return full, info, nil
}

// readConfined reads root/p, refusing links that leave root.
func readConfined(root, p string) ([]byte, os.FileInfo, error) {
	full, info, err := readConfinedInfo(root, p)
	if err != nil {
		return nil, info, err
	}
	data, err := os.ReadFile(full)
	return data, info, err
}
