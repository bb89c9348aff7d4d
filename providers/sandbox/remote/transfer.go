package remote

import (
	"archive/tar"
	"bytes"
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
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/internal/scratch"
)

// hydrate transfers the root subtree into the guest root: a tar stream
// of the host directory is uploaded to a unique archive below /tmp, and a
// remote shell makes the guest root, clears what it holds (the
// directory itself stays: it may be a mount point, as Modal's /workspace
// can be), extracts the archive and removes it.
func (p *Provider) hydrate(ctx context.Context, b *box) error {
	archive := "/tmp/aml-workspace-" + uuid.NewString() + ".tar"
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTree(pw, b.dir)) }()
	err := b.m.Upload(ctx, archive, pr)
	pr.CloseWithError(errors.New("upload ended"))
	if err != nil {
		return fmt.Errorf("uploading the workspace %s: %w", b.dir, err)
	}
	return b.rt.shell(ctx, "extracting the workspace into "+b.root,
		`mkdir -p -- "$1" && cd -- "$1" && rm -rf -- ./* ./.[!.]* ./..?* && tar -xf "$2" -C . && rm -f -- "$2"`, b.root, archive)
}

// writeTree writes the tree below dir as a tar stream: directories,
// regular files and symbolic links (as links, never followed); other
// kinds (sockets, FIFOs, devices) are left out. Files are read through a
// handle on dir, so a link planted below it never leads out.
func writeTree(w io.Writer, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	buf := make([]byte, 64<<10)
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		info, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = root.Readlink(rel); err != nil {
				return err
			}
		case info.IsDir(), info.Mode().IsRegular():
		default:
			return nil
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = rel, 0, 0, "", ""
		h.Format = tar.FormatPAX
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := root.OpenFile(rel, os.O_RDONLY|noFollow, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.CopyBuffer(tw, io.LimitReader(f, h.Size), buf)
		if err == nil && n != h.Size {
			err = fmt.Errorf("%s changed while it was archived", rel)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// reconcile mirrors the guest root into the host directory of the root
// subtree: the remote tree is archived, downloaded (streamed) and
// extracted into a private host directory, then additions, changes and
// deletions are applied to the source. A failed transfer changes nothing
// in the source.
func (p *Provider) reconcile(ctx context.Context, b *box) error {
	archive := "/tmp/aml-reconcile-" + uuid.NewString() + ".tar"
	if err := b.rt.shell(ctx, "archiving "+b.root, `tar -cf "$2" -C "$1" .`, b.root, archive); err != nil {
		return err
	}
	rc, err := b.m.Download(ctx, archive)
	if err != nil {
		return fmt.Errorf("downloading %s: %w", archive, err)
	}
	defer rc.Close()
	tmp, err := scratch.MkdirTemp("aml-reconcile-")
	if err != nil {
		return err
	}
	defer scratch.RemoveAll(tmp)
	got, err := extract(rc, tmp, b.dir)
	if err != nil {
		return fmt.Errorf("extracting the remote tree: %w", err)
	}
	return mirror(tmp, b.dir, got)
}

// extract writes the tar stream r below dir through a handle on it
// (entries that would leave it are refused) and returns the kind of every
// path of the archive. Directories, regular files, symbolic links and hard
// links are made; other kinds are left out. A regular file that same
// holds already as it is (same size, modification time to the second and
// mode) is not written: the mirror leaves it as it is.
func extract(r io.Reader, dir, same string) (map[string]fs.FileMode, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	have, err := os.OpenRoot(same)
	if err != nil {
		return nil, err
	}
	defer have.Close()
	got := map[string]fs.FileMode{}
	// made are the directories known to exist below dir: with got, all
	// that exists there (dir starts empty), so that no entry costs a
	// lookup or a walk of its parents.
	made := map[string]bool{}
	ensureDir := func(d string) error {
		if d == "." || made[d] {
			return nil
		}
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for ; d != "." && !made[d]; d = path.Dir(d) {
			made[d] = true
		}
		return nil
	}
	// realDir tells whether a directory of the source is one, and so are
	// its parents: a file of the source reached through a link is not the
	// one at the same path once the mirror replaced the link.
	realDirs := map[string]bool{".": true}
	var realDir func(d string) bool
	realDir = func(d string) bool {
		ok, known := realDirs[d]
		if !known {
			info, err := have.Lstat(d)
			ok = err == nil && info.IsDir() && realDir(path.Dir(d))
			realDirs[d] = ok
		}
		return ok
	}
	var bufs [2][]byte // extractFile's, shared by all entries
	bufs[0], bufs[1] = make([]byte, 64<<10), make([]byte, 64<<10)
	tr := tar.NewReader(r)
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirs []dirTime
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || name == "" {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(name, 0) {
			return nil, fmt.Errorf("archive entry %q leaves the tree", h.Name)
		}
		if err := ensureDir(path.Dir(name)); err != nil {
			return nil, err
		}
		if _, seen := got[name]; (seen || made[name]) && h.Typeflag != tar.TypeDir {
			if err := root.RemoveAll(name); err != nil {
				return nil, err
			}
			clear(made) // what was below name is gone too
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := ensureDir(name); err != nil {
				return nil, err
			}
			if err := root.Chmod(name, mode|0o700); err != nil {
				return nil, err
			}
			got[name] = fs.ModeDir
			dirs = append(dirs, dirTime{name, h.ModTime})
		case tar.TypeReg:
			same := have
			if !realDir(path.Dir(name)) {
				same = nil // nothing to compare with
			}
			if err := extractFile(root, same, name, h, tr, bufs); err != nil {
				return nil, err
			}
			got[name] = 0
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, name); err != nil {
				return nil, err
			}
			got[name] = fs.ModeSymlink
		case tar.TypeLink:
			target := path.Clean(strings.TrimPrefix(h.Linkname, "./"))
			if got[target] != 0 || target == "." {
				return nil, fmt.Errorf("archive hard link %q names %q, not a file of the archive", h.Name, h.Linkname)
			}
			if _, ok := got[target]; !ok {
				return nil, fmt.Errorf("archive hard link %q names %q, not a file of the archive", h.Name, h.Linkname)
			}
			// A copy, not a link: the mirror writes files one by one. The
			// target was left out when the source holds it unchanged.
			from := root
			if _, err := root.Lstat(target); err != nil {
				from = have
			}
			if err := copyFile(from, root, target, name); err != nil {
				return nil, err
			}
			got[name] = 0
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t)
	}
	return got, nil
}

// extractFile writes the regular file name of the archive (h, its
// content in tr) below root, unless have holds it with the same mode and
// the same bytes; then the entry is only read through. The
// content is compared, never guessed from sizes and times: a file the
// sandbox rewrote in the second it was hydrated, with as many bytes,
// differs. What was compared equal before a difference is copied from
// have's file.
func extractFile(root, have *os.Root, name string, h *tar.Header, tr io.Reader, bufs [2][]byte) error {
	mode := fs.FileMode(h.Mode) & fs.ModePerm
	var src *os.File
	if have != nil {
		if info, err := have.Lstat(name); err == nil && info.Mode().IsRegular() && info.Size() == h.Size && info.Mode().Perm() == mode {
			if f, err := have.OpenFile(name, os.O_RDONLY|noFollow, 0); err == nil {
				src = f
				defer src.Close()
			}
		}
	}
	var equal int64    // bytes of the entry equal to src's first ones
	var pending []byte // bytes read from tr after them, not yet written
	if src != nil {
		a, b := bufs[0], bufs[1]
		for {
			n, err := tr.Read(a)
			if n > 0 {
				if m, _ := io.ReadFull(src, b[:n]); m != n || !bytes.Equal(a[:n], b[:n]) {
					pending = a[:n]
					break
				}
				equal += int64(n)
			}
			if err == io.EOF {
				if equal == h.Size {
					return nil
				}
				break
			}
			if err != nil {
				return err
			}
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, mode|0o600)
	if err != nil {
		return err
	}
	if equal > 0 {
		if _, err = src.Seek(0, io.SeekStart); err == nil {
			var n int64
			n, err = io.CopyN(f, src, equal)
			if err == nil && n != equal {
				err = fmt.Errorf("%s changed while the mirror read it", name)
			}
		}
	}
	if err == nil && len(pending) > 0 {
		_, err = f.Write(pending)
	}
	if err == nil {
		_, err = io.Copy(f, tr)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(name, mode|0o600)
	}
	if err == nil {
		err = root.Chtimes(name, h.ModTime, h.ModTime)
	}
	return err
}

// copyFile copies the regular file from (below src) to to (below dst).
func copyFile(src, dst *os.Root, from, to string) error {
	in, err := src.OpenFile(from, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := dst.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, info.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dst.Chtimes(to, info.ModTime(), info.ModTime())
	}
	return err
}

// mirror makes dst hold what src holds: additions and changes are
// written (each file replaced by a rename, never through a link), and
// what dst holds of the kinds a transfer carries (directories, regular
// files, links) but src does not is deleted (a directory that holds
// what no transfer carries stays, with it). Every regular file of src
// replaces its copy (extract left out those dst holds as they are). kinds
// is what extract returned for src.
func mirror(src, dst string, kinds map[string]fs.FileMode) error {
	from, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	// Additions and changes, parents first (the walk's order).
	err = fs.WalkDir(from.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." {
			return err
		}
		info, err := from.Lstat(rel)
		if err != nil {
			return err
		}
		have, herr := to.Lstat(rel)
		switch {
		case info.IsDir():
			if herr == nil && !have.IsDir() {
				if err := to.RemoveAll(rel); err != nil {
					return err
				}
				herr = fs.ErrNotExist
			}
			if herr != nil {
				if err := to.Mkdir(rel, info.Mode().Perm()); err != nil {
					return err
				}
			} else if have.Mode().Perm() != info.Mode().Perm() {
				if err := to.Chmod(rel, info.Mode().Perm()); err != nil {
					return err
				}
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := from.Readlink(rel)
			if err != nil {
				return err
			}
			if herr == nil && have.Mode()&fs.ModeSymlink != 0 {
				if old, err := to.Readlink(rel); err == nil && old == target {
					return nil
				}
			}
			if herr == nil {
				if err := to.RemoveAll(rel); err != nil {
					return err
				}
			}
			return to.Symlink(target, rel)
		case info.Mode().IsRegular():
			// extract wrote only what differs from dst: it replaces.
			if herr == nil && have.IsDir() {
				if err := to.RemoveAll(rel); err != nil {
					return err
				}
			}
			return replaceFile(from, to, rel, info)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Deletions: what the transfer would have carried and src lacks.
	var gone []string
	err = fs.WalkDir(to.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." {
			return err
		}
		t := d.Type()
		if t != 0 && t != fs.ModeDir && t != fs.ModeSymlink {
			return nil // sockets, FIFOs, devices: never transferred
		}
		if _, ok := kinds[rel]; ok {
			return nil
		}
		gone = append(gone, rel)
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, rel := range gone {
		if err := removeCarried(to, rel); err != nil {
			return err
		}
	}
	return nil
}

// removeCarried removes rel below to and, when it is a directory, what a
// transfer carries below it (directories, regular files, links): a FIFO,
// a socket or a device stays, and so do the directories holding one.
func removeCarried(to *os.Root, rel string) error {
	info, err := to.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !info.IsDir():
		return to.Remove(rel)
	}
	entries, err := fs.ReadDir(to.FS(), rel)
	if err != nil {
		return err
	}
	kept := false
	for _, e := range entries {
		child := path.Join(rel, e.Name())
		if t := e.Type(); t != 0 && t != fs.ModeDir && t != fs.ModeSymlink {
			kept = true
			continue
		}
		if err := removeCarried(to, child); err != nil {
			return err
		}
		if e.IsDir() {
			if _, err := to.Lstat(child); err == nil {
				kept = true
			}
		}
	}
	if kept {
		return nil
	}
	return to.Remove(rel)
}

// replaceFile copies rel from src to dst through a temporary file in the
// destination's directory renamed over it.
func replaceFile(from, to *os.Root, rel string, info fs.FileInfo) error {
	in, err := from.OpenFile(rel, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(rel), ".aml-mirror-"+hex.EncodeToString(rnd[:]))
	out, err := to.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, info.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = to.Chmod(tmp, info.Mode().Perm())
	}
	if err == nil {
		err = to.Chtimes(tmp, info.ModTime(), info.ModTime())
	}
	if err == nil {
		err = to.Rename(tmp, rel)
	}
	if err != nil {
		_ = to.Remove(tmp)
	}
	return err
}
