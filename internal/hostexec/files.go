package hostexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/filekind"
	"github.com/aml-go/aml/internal/scratch"
)

// usable reports why the host cannot serve an operation now, if it
// cannot.
func (h *Host) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local sandbox: %w", context.Cause(ctx))
	}
	if h.isReleased() {
		return ErrReleased
	}
	return nil
}

// ReadFile returns the complete regular file at the logical path below
// the root. Symbolic links are followed only while they stay inside the
// root. Safe for concurrent use.
func (r *Runtime) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := r.host.usable(ctx); err != nil {
		return nil, err
	}
	rel, err := cleanLogical(p, "path")
	if err != nil {
		return nil, err
	}
	return readConfined(r.host.root, r.host.rootReal, rel, p)
}

// OpenFile implements eval.FileOpener: the regular file at the logical
// path below the root, opened for a streamed read through os.Root. Safe
// for concurrent use; the returned file is the caller's.
func (r *Runtime) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := r.host.usable(ctx); err != nil {
		return nil, err
	}
	rel, err := cleanLogical(p, "path")
	if err != nil {
		return nil, err
	}
	if err := checkInside(r.host.rootReal, rel, "path"); err != nil {
		return nil, err
	}
	f, err := r.host.root.OpenFile(rel, readFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("local sandbox read %q: %w", p, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("local sandbox read %q: %w", p, err)
	}
	return f, nil
}

var _ eval.FileOpener = (*Runtime)(nil)

// Stat describes the entry at the logical path below the root, following
// symbolic links that stay inside the root. Safe for concurrent use.
func (r *Runtime) Stat(ctx context.Context, p string) (eval.FileInfo, error) {
	if err := r.host.usable(ctx); err != nil {
		return eval.FileInfo{}, err
	}
	rel, err := cleanLogical(p, "path")
	if err != nil {
		return eval.FileInfo{}, err
	}
	if err := checkInside(r.host.rootReal, rel, "path"); err != nil {
		return eval.FileInfo{}, err
	}
	fi, err := r.host.root.Stat(rel)
	if err != nil {
		return eval.FileInfo{}, fmt.Errorf("local sandbox stat %q: %w", p, err)
	}
	return eval.FileInfo{Kind: eval.FileKind(filekind.Info(fi.Mode())), Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// WriteFile atomically replaces the regular file at the logical path
// below the root with data, creating missing parent directories. It
// rejects read-only access (wrapping eval.ErrReadOnly), a destination that
// is a symbolic link (dangling or not) or anything but a regular file, and
// a path whose directories resolve outside the root. An existing file
// keeps its permission bits. Safe for concurrent use: concurrent writers
// of one path leave one of their contents, never a mix.
func (r *Runtime) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := r.host.usable(ctx); err != nil {
		return err
	}
	if r.access != eval.ReadWrite {
		return fmt.Errorf("local sandbox write %q: %w", p, eval.ErrReadOnly)
	}
	rel, err := cleanLogical(p, "path")
	if err != nil {
		return err
	}
	return writeConfined(r.host.root, r.host.rootReal, rel, p, data)
}

// readConfined reads the regular file rel below the directory root (whose
// real path is base).
func readConfined(root *os.Root, base, rel, logical string) ([]byte, error) {
	if err := checkInside(base, rel, "path"); err != nil {
		return nil, err
	}
	f, err := root.OpenFile(rel, readFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("local sandbox read %q: %w", logical, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("local sandbox read %q: %w", logical, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("local sandbox read %q: not a regular file", logical)
	}
	// The size only sizes the first buffer, up to a bound: a sparse file
	// may claim terabytes that the read never reaches.
	buf := make([]byte, 0, min(fi.Size(), 1<<20)+1) // +1 reads EOF without growing
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return nil, fmt.Errorf("local sandbox read %q: %w", logical, err)
		}
	}
}

// writeConfined atomically replaces the regular file rel below the
// directory root (whose real path is base): it writes a temporary file in
// the destination's directory and renames it over the destination, all
// through os.Root, so no symbolic link leads outside root.
func writeConfined(root *os.Root, base, rel, logical string, data []byte) error {
	if err := checkInside(base, rel, "path"); err != nil {
		return err
	}
	dir, name := path.Dir(rel), path.Base(rel)
	parent := root
	if dir != "." {
		if err := root.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("local sandbox write %q: %w", logical, err)
		}
		var err error
		if parent, err = root.OpenRoot(dir); err != nil {
			return fmt.Errorf("local sandbox write %q: %w", logical, err)
		}
		defer parent.Close()
	}
	perm, keep := fs.FileMode(0o666), false
	switch fi, err := parent.Lstat(name); {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("local sandbox write %q: destination is a symbolic link", logical)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("local sandbox write %q: destination is not a regular file", logical)
	case err == nil:
		perm, keep = fi.Mode().Perm(), true
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("local sandbox write %q: %w", logical, err)
	}
	tmp := tempName()
	f, err := parent.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("local sandbox write %q: %w", logical, err)
	}
	_, err = f.Write(data)
	if err == nil && keep {
		err = f.Chmod(perm) // undo the umask for a replaced file
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = parent.Rename(tmp, name)
	}
	if err != nil {
		_ = parent.Remove(tmp)
		return fmt.Errorf("local sandbox write %q: %w", logical, err)
	}
	return nil
}

// tempName returns a fresh name for a temporary file.
func tempName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return ".aml-write-" + hex.EncodeToString(b[:]) + ".tmp"
}

// CreateFileStaging creates a private (0700) temporary directory outside
// the host's directory. It works under read-only access. Release of the
// host removes every staging it still owns. Safe for concurrent use, as
// is the returned staging.
func (r *Runtime) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	h := r.host
	if err := h.usable(ctx); err != nil {
		return nil, err
	}
	dir, err := scratch.MkdirTemp("aml-agent-")
	if err != nil {
		return nil, fmt.Errorf("local sandbox staging: %w", err)
	}
	fail := func(err error) (eval.FileStaging, error) {
		_ = scratch.RemoveAll(dir)
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fail(fmt.Errorf("local sandbox staging: %w", err))
	}
	real, err := realPath(abs)
	if err != nil {
		return fail(fmt.Errorf("local sandbox staging: %w", err))
	}
	if within(h.boundary, real) {
		return fail(fmt.Errorf("local sandbox staging directory %q lies inside the workspace; point TMPDIR outside it", real))
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return fail(fmt.Errorf("local sandbox staging: %w", err))
	}
	s := &staging{host: h, dir: real, root: root}
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		_ = root.Close()
		return fail(ErrReleased)
	}
	h.stagings[s] = struct{}{}
	h.mu.Unlock()
	return s, nil
}

// staging is one file staging directory. It is safe for concurrent use.
type staging struct {
	host     *Host
	dir      string
	root     *os.Root
	released atomic.Bool
	once     sync.Once
	err      error
}

var _ eval.FileStaging = (*staging)(nil)

// Root returns the absolute host path of the staging directory.
func (s *staging) Root() string { return s.dir }

// WriteFile atomically replaces the file at the relative slash-separated
// path below Root, with the confinement rules of the runtime's WriteFile.
func (s *staging) WriteFile(ctx context.Context, rel string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local sandbox staging: %w", context.Cause(ctx))
	}
	if s.released.Load() {
		return fmt.Errorf("local sandbox staging: %w", ErrReleased)
	}
	clean, err := cleanLogical(rel, "staging path")
	if err != nil {
		return err
	}
	return writeConfined(s.root, s.dir, clean, rel, data)
}

// Release removes the staging directory; repeat-safe, every call returns
// the first call's result.
func (s *staging) Release(context.Context) error {
	s.once.Do(func() {
		s.released.Store(true)
		_ = s.root.Close()
		if err := scratch.RemoveAll(s.dir); err != nil {
			s.err = fmt.Errorf("local sandbox staging release: %w", err)
		}
		s.host.forgetStaging(s)
	})
	return s.err
}
