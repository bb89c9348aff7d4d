package persist

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// Entry types of snapshots and manifests.
const (
	typeFile = "file"
	typeDir  = "directory"
)

// maxGitignoreBytes bounds one .gitignore file read during a save.
const maxGitignoreBytes = 1 << 20

// entry is one selected snapshot, archive or manifest entry.
type entry struct {
	Path    string
	Type    string
	Size    int64
	Mode    fs.FileMode // permission bits only
	ModTime time.Time   // zero when unknown
	SHA256  string      // hex, folder format only
}

// selection chooses the entries of a snapshot.
type selection struct {
	include   []string // nil selects everything
	exclude   []string
	gitignore bool // apply .gitignore files (only when include is nil)
}

// matchAny reports whether rel or one of its ancestor directories matches a
// pattern: a pattern that matches a directory selects its whole subtree.
func matchAny(patterns []string, rel string) bool {
	if len(patterns) == 0 {
		return false
	}
	for p := rel; ; {
		for _, pat := range patterns {
			if ok, _ := doublestar.Match(pat, p); ok {
				return true
			}
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// selects reports whether the selection keeps rel on its own (a directory
// is also kept when it has a kept descendant).
func (s selection) selects(rel string) bool {
	if matchAny(s.exclude, rel) {
		return false
	}
	return s.include == nil || matchAny(s.include, rel)
}

// validateEntryPath rejects empty, absolute, NUL, and empty, "." or ".."
// segment paths, and, on Windows, where they name something else than a
// file, drive letters and backslashes. Names the platform allows (a:b.txt
// and a\b on Linux, bytes that are not UTF-8) are kept.
func validateEntryPath(p string) error {
	bad := p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") ||
		runtime.GOOS == "windows" && (strings.Contains(p, "\\") || len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z'))
	if !bad {
		for _, seg := range strings.Split(p, "/") {
			if seg == "" || seg == "." || seg == ".." {
				bad = true
				break
			}
		}
	}
	if bad {
		return fmt.Errorf("unsafe path %q", p)
	}
	return nil
}

// sortEntries orders by depth, then path.
func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int {
		if d := strings.Count(a.Path, "/") - strings.Count(b.Path, "/"); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
}

// limits bound a snapshot or an extraction.
type limits struct {
	maxEntries int   // counting rootEntries
	maxBytes   int64 // file bytes
	rootEntry  int   // 1 when an archive root entry counts
}

func (o Options) limits(format string) limits {
	l := limits{maxEntries: o.MaxEntries, maxBytes: o.MaxExtractedBytes}
	if format == FormatArchive {
		l.rootEntry = 1
	}
	return l
}

// walker scans a materialized tree for a snapshot.
type walker struct {
	ctx   context.Context
	root  string
	sel   selection
	lim   limits
	out   []entry
	bytes int64
}

// scan selects entries of root (dotfiles included, symlinks not followed).
// Selected symlinks and special files are errors; so are unsafe names.
func scan(ctx context.Context, root string, sel selection, lim limits) ([]entry, error) {
	w := &walker{ctx: ctx, root: root, sel: sel, lim: lim}
	if err := w.dir("", nil, nil); err != nil {
		return nil, err
	}
	sortEntries(w.out)
	return w.out, nil
}

func (w *walker) add(e entry) error {
	w.out = append(w.out, e)
	if len(w.out)+w.lim.rootEntry > w.lim.maxEntries {
		return limitf("workspace snapshot exceeds %d entries", w.lim.maxEntries)
	}
	w.bytes += e.Size
	if w.bytes > w.lim.maxBytes {
		return limitf("workspace snapshot exceeds %d bytes", w.lim.maxBytes)
	}
	return nil
}

// dir scans one directory; segs are its path segments and ignores the
// .gitignore patterns in force, outermost first. It reports whether it
// added any entry.
func (w *walker) dir(rel string, segs []string, ignores []gitignore.Pattern) error {
	if err := context.Cause(w.ctx); w.ctx.Err() != nil {
		return err
	}
	abs := filepath.Join(w.root, filepath.FromSlash(rel))
	if w.sel.gitignore && w.sel.include == nil {
		ps, err := readGitignore(filepath.Join(abs, ".gitignore"), segs)
		if err != nil {
			return err
		}
		if len(ps) > 0 {
			ignores = append(slices.Clip(ignores), ps...)
		}
	}
	des, err := os.ReadDir(abs)
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		childSegs := append(slices.Clip(segs), name)
		isDir := de.IsDir()
		if len(ignores) > 0 && gitignore.NewMatcher(ignores).Match(childSegs, isDir) {
			continue
		}
		if matchAny(w.sel.exclude, childRel) {
			continue // an excluded directory's subtree is excluded too
		}
		self := w.sel.include == nil || matchAny(w.sel.include, childRel)
		if isDir {
			before := len(w.out)
			if err := w.dir(childRel, childSegs, ignores); err != nil {
				return err
			}
			if self || len(w.out) > before {
				if err := validateEntryPath(childRel); err != nil {
					return fmt.Errorf("workspace snapshot: %w", err)
				}
				info, err := de.Info()
				if err != nil {
					return err
				}
				if err := w.add(entry{Path: childRel, Type: typeDir, Mode: info.Mode().Perm(), ModTime: info.ModTime()}); err != nil {
					return err
				}
			}
			continue
		}
		if !self {
			continue
		}
		if err := validateEntryPath(childRel); err != nil {
			return fmt.Errorf("workspace snapshot: %w", err)
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("workspace snapshot: %q is a symbolic link; symbolic links are not supported (exclude it or replace it with a copy)", childRel)
		case !info.Mode().IsRegular():
			return fmt.Errorf("workspace snapshot: %q is not a regular file or directory (%s); special files are not supported", childRel, info.Mode().Type())
		}
		if err := w.add(entry{Path: childRel, Type: typeFile, Size: info.Size(), Mode: info.Mode().Perm(), ModTime: info.ModTime()}); err != nil {
			return err
		}
	}
	return nil
}

// readGitignore parses one .gitignore file (a missing, non-regular or
// symlinked one gives no patterns); domain is its directory's segments.
func readGitignore(file string, domain []string) ([]gitignore.Pattern, error) {
	info, err := os.Lstat(file)
	if err != nil || !info.Mode().IsRegular() {
		return nil, nil
	}
	if info.Size() > maxGitignoreBytes {
		return nil, fmt.Errorf("workspace snapshot: %s exceeds %d bytes", file, maxGitignoreBytes)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxGitignoreBytes)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, `\#`) || strings.HasPrefix(line, `\!`) {
			line = line[1:]
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps, sc.Err()
}

// copySnapshot fills dst (created) with the selected entries of src and
// sets their sizes (and hashes) from the snapshot, so that later uploads
// read a stable set of files even if src is renamed or deleted meanwhile.
// A file is hard-linked when possible (an upload verifies that its size
// and hash did not change), else copied; directories are created 0700,
// modes live in the entries.
func copySnapshot(ctx context.Context, src, dst string, es []entry, lim limits, hash bool) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	var total int64
	buf := make([]byte, 256<<10)
	for i := range es {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		e := &es[i]
		target := filepath.Join(dst, filepath.FromSlash(e.Path))
		if e.Type == typeDir {
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return err
		}
		from := filepath.Join(src, filepath.FromSlash(e.Path))
		var (
			n   int64
			sum string
			err error
		)
		if os.Link(from, target) == nil {
			n, sum, err = inspectFile(target, lim.maxBytes-total, buf, hash)
		} else {
			n, sum, err = copyFile(from, target, lim.maxBytes-total, buf, hash)
		}
		if err != nil {
			return fmt.Errorf("workspace snapshot: %s: %w", e.Path, err)
		}
		total += n
		e.Size, e.SHA256 = n, sum
	}
	return nil
}

// inspectFile checks that a snapshot link is a regular file within budget
// and returns its size and (when hash) its hex sha256.
func inspectFile(file string, budget int64, buf []byte, hash bool) (int64, string, error) {
	info, err := os.Lstat(file)
	if err != nil {
		return 0, "", err
	}
	if !info.Mode().IsRegular() {
		return 0, "", fmt.Errorf("is no longer a regular file")
	}
	if !hash {
		if info.Size() > budget {
			return 0, "", limitf("workspace snapshot exceeds the byte limit")
		}
		return info.Size(), "", nil
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(f, budget+1), buf)
	if err != nil {
		return 0, "", err
	}
	if n > budget {
		return 0, "", limitf("workspace snapshot exceeds the byte limit")
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies src to a new file dst, refusing more than budget bytes,
// and returns the size and (when hash) the hex sha256 of what was copied.
func copyFile(src, dst string, budget int64, buf []byte, hash bool) (int64, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	if info, err := in.Stat(); err != nil {
		return 0, "", err
	} else if !info.Mode().IsRegular() {
		return 0, "", fmt.Errorf("is no longer a regular file")
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, "", err
	}
	var w io.Writer = out
	h := sha256.New()
	if hash {
		w = io.MultiWriter(out, h)
	}
	n, err := io.CopyBuffer(w, io.LimitReader(in, budget+1), buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, "", err
	}
	if n > budget {
		return 0, "", limitf("workspace snapshot exceeds the byte limit")
	}
	sum := ""
	if hash {
		sum = hex.EncodeToString(h.Sum(nil))
	}
	return n, sum, nil
}

// selectEntries applies sel (without .gitignore) to a restored tree's
// entries: an entry is kept when neither it nor an ancestor matches an
// exclude and (with include) it or an ancestor matches an include; a
// directory is also kept when it has a kept descendant.
func selectEntries(es []entry, sel selection) []entry {
	keep := make(map[string]bool, len(es))
	for _, e := range es {
		if sel.selects(e.Path) {
			keep[e.Path] = true
		}
	}
	for _, e := range es {
		if !keep[e.Path] {
			continue
		}
		for p := path.Dir(e.Path); p != "."; p = path.Dir(p) {
			if matchAny(sel.exclude, p) {
				break
			}
			keep[p] = true
		}
	}
	var out []entry
	for _, e := range es {
		if keep[e.Path] {
			out = append(out, e)
		}
	}
	return out
}

// moveSelected moves the selected entries of src (a restored tree) into dst.
func moveSelected(ctx context.Context, src, dst string, es []entry) error {
	for _, e := range es { // parents first
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		target := filepath.Join(dst, filepath.FromSlash(e.Path))
		if e.Type == typeDir {
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(src, filepath.FromSlash(e.Path)), target); err != nil {
			return err
		}
	}
	return nil
}

// applyModes sets the recorded permission bits (and modification times,
// when known) of restored entries, deepest first so that a read-only
// directory is finished last. Directories of a restored tree missing from
// es keep 0755.
func applyModes(root string, es []entry) error {
	known := make(map[string]bool, len(es))
	for _, e := range es {
		known[e.Path] = true
	}
	// Implicit parents (not recorded) become 0755.
	for _, e := range es {
		for p := path.Dir(e.Path); p != "."; p = path.Dir(p) {
			if known[p] {
				break
			}
			known[p] = true
			if err := os.Chmod(filepath.Join(root, filepath.FromSlash(p)), 0o755); err != nil {
				return err
			}
		}
	}
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i]
		target := filepath.Join(root, filepath.FromSlash(e.Path))
		if err := os.Chmod(target, e.Mode); err != nil {
			return err
		}
		if !e.ModTime.IsZero() {
			if err := os.Chtimes(target, e.ModTime, e.ModTime); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAll removes a local tree, making read-only directories writable
// first when plain removal fails.
func removeAll(dir string) error {
	if dir == "" {
		return nil
	}
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
