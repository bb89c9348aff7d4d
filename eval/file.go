package eval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/aml-go/aml/internal/filekind"
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
		var werr error
		if wf, ok := res.ws.lease.(WorkspaceFiles); ok {
			werr = wf.WriteFile(ctx, p, data)
		} else {
			werr = writeConfined(res.ws.lease.Directory(), p, data)
		}
		if werr != nil {
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
	if fsys := d.rt.opts.AppFiles; fsys != nil {
		name, err := appFileName(src)
		if err != nil {
			return nil, err
		}
		info, err := fs.Stat(fsys, name)
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is a %s, not a regular file", src, filekind.Coarse(info.Mode()))
		}
		return fs.ReadFile(fsys, name)
	}
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
		return nil, fmt.Errorf("%s is a %s, not a regular file", src, filekind.Coarse(info.Mode()))
	}
	return os.ReadFile(full)
}

// appFileName is the name in Options.AppFiles of the application file
// src: relative, slash-separated, inside the working directory.
func appFileName(src string) (string, error) {
	name := path.Clean(filepath.ToSlash(src))
	if filepath.IsAbs(src) || !fs.ValidPath(name) || name == "." {
		return "", fmt.Errorf("%s is not a relative path inside the working directory: this runtime reads application files from a bundle (Options.AppFiles), which holds only those", src)
	}
	return name, nil
}

// The evaluator's own access to a workspace materialization (file() and
// include(path=) outside any sandbox) goes through os.Root: every path is
// resolved component by component below the root by the kernel's *at
// calls, so a symbolic link (or a directory swapped for one while the run
// works) can never lead outside it. There is no check-then-open.

// writeConfined atomically replaces root/p with data, creating parent
// directories, without writing through symbolic links: the content goes
// to a temporary file beside the destination, which is then renamed over
// it (rename replaces a link instead of following it).
func writeConfined(root, p string, data []byte) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	if info, err := r.Lstat(p); err == nil {
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: file() does not write through links", p)
		case !info.Mode().IsRegular():
			return fmt.Errorf("%s is a %s, not a file", p, filekind.Coarse(info.Mode()))
		}
	}
	dir := path.Dir(p)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return confinedError(p, err)
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".aml-file-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return confinedError(p, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = r.Rename(tmp, p)
	}
	if werr != nil {
		_ = r.Remove(tmp)
		return confinedError(p, werr)
	}
	return nil
}

// openConfined opens root/p for reading through os.Root; it must be a
// regular file. The caller closes both returned values.
func openConfined(root, p string) (*os.Root, *os.File, os.FileInfo, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, nil, err
	}
	f, err := r.Open(p)
	if err != nil {
		r.Close()
		return nil, nil, nil, confinedError(p, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		r.Close()
		return nil, nil, nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		r.Close()
		return nil, nil, info, fmt.Errorf("%s is a %s, not a regular file", p, filekind.Coarse(info.Mode()))
	}
	return r, f, info, nil
}

// readConfinedInfo describes root/p, a regular file below root.
func readConfinedInfo(root, p string) (os.FileInfo, error) {
	r, f, info, err := openConfined(root, p)
	if err != nil {
		return info, err
	}
	f.Close()
	r.Close()
	return info, nil
}

// readConfined reads root/p, a regular file below root.
func readConfined(root, p string) ([]byte, os.FileInfo, error) {
	r, f, info, err := openConfined(root, p)
	if err != nil {
		return nil, info, err
	}
	defer r.Close()
	defer f.Close()
	data, err := io.ReadAll(f)
	return data, info, err
}

// confinedError names the path of a failed confined access; an attempt to
// leave the root says so.
func confinedError(p string, err error) error {
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%s resolves outside its root (through a symbolic link): %w", p, err)
	}
	return err
}

// DirFiles returns the evaluator's own access to the files of a
// workspace materialization at dir, as file() and include(path=) use it
// outside any sandbox: every path resolves below dir through os.Root, so
// no link leads outside it; a write replaces one whole regular file and
// never writes through a link; Stat and reads accept only a regular file.
// An executor that holds a workspace in another process (a Temporal
// worker) serves the evaluator's WorkspaceFiles calls with it, so that
// they succeed and fail as a local run's do. It is safe for concurrent
// use.
func DirFiles(dir string) interface {
	WorkspaceFiles
	FileOpener
} {
	return dirFiles(dir)
}

// dirFiles is DirFiles.
type dirFiles string

func (d dirFiles) WriteFile(_ context.Context, p string, data []byte) error {
	return writeConfined(string(d), p, data)
}

func (d dirFiles) Stat(_ context.Context, p string) (FileInfo, error) {
	info, err := readConfinedInfo(string(d), p)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Kind: "file", Size: info.Size(), ModTime: info.ModTime()}, nil
}

func (d dirFiles) ReadFile(_ context.Context, p string) ([]byte, error) {
	data, _, err := readConfined(string(d), p)
	return data, err
}

func (d dirFiles) OpenFile(_ context.Context, p string) (io.ReadCloser, error) {
	r, f, _, err := openConfined(string(d), p)
	if err != nil {
		return nil, err
	}
	return rootedFile{f, r}, nil
}
