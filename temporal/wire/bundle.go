package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
)

// MaxBundleBytes bounds the sources a bundle holds in all: a workflow and
// its modules are text, and a bundle travels in a run's input.
const MaxBundleBytes = 16 << 20

// Bundle is a workflow file and every module it loads, directly or
// through other modules, each named by the path that loading it from the
// bundle asks for and pinned by the SHA-256 of its content. It is what a
// run carries so that workers need no copy of the files: Pack builds it
// on the submitter, FS serves it to starlib.LoadFile on a worker. A
// Bundle is a value: it is not modified after Pack, and safe for
// concurrent reads.
type Bundle struct {
	// Entry is the entry file's name in the bundle: the path the
	// submitter gave Pack, slash-separated, so that positions in errors
	// and traces name the files as aml run names them.
	Entry string `json:"entry"`
	// Files are the entry and its modules, sorted by path.
	Files []File `json:"files"`
	// Data are the application files that the sources name with a
	// string literal in file(src=), include(src=) and skill(), by that
	// path (relative to the submitter's working directory, which those
	// reads resolve from), sorted by path: workflow code reads them from
	// here (eval.Options.AppFiles).
	Data []File `json:"data,omitempty"`
	// Missing are the paths such literals name that did not exist on
	// the submitter, sorted: reading one fails as it fails there.
	Missing []string `json:"missing,omitempty"`
}

// File is one source of a Bundle.
type File struct {
	// Path is slash-separated: a source's is the path that loading it
	// from the entry asks for (the entry's directory joined with the
	// load() name, which may climb with ../); a data file's is relative
	// to the submitter's working directory.
	Path string `json:"path"`
	// SHA256 is the hex SHA-256 of Data.
	SHA256 string `json:"sha256"`
	Data   []byte `json:"data"`
	// Exec marks a data file its owner may execute (a skill package's
	// script).
	Exec bool `json:"exec,omitempty"`
	// Dir marks a data directory that is not packed (a file() or
	// include() names a directory), Link a symbolic link (in a skill
	// package, or the package itself) and its target: both hold no
	// data, so that reading them fails as it fails on the submitter.
	Dir  bool   `json:"dir,omitempty"`
	Link string `json:"link,omitempty"`
}

// PackError is a load() that Pack could not follow: the file and position
// of the statement, the module it names, and why.
type PackError struct {
	File      string
	Line, Col int32
	Module    string
	Err       error
}

func (e *PackError) Error() string {
	if e.Module == "" {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d:%d: load(%q) cannot be packed: %v", e.File, e.Line, e.Col, e.Module, e.Err)
}

func (e *PackError) Unwrap() error { return e.Err }

// Pack reads the workflow file entry and, following its load() statements
// (which Starlark requires to be string literals), every module it loads,
// and returns them as a Bundle. Standard modules (@std/…) are part of
// every worker and are not packed. Nothing is executed.
//
// The application files that the sources name with a string literal in
// file(src=) or include(src=) are packed too (Bundle.Data), read from the
// working directory as aml run reads them; a literal that names no
// readable regular file is left out, and the run reports it where aml run
// would.
func Pack(entry string) (*Bundle, error) {
	p := &packer{dir: filepath.Dir(entry), seen: map[string]bool{}, seenData: map[string]bool{}}
	b := &Bundle{Entry: filepath.ToSlash(entry)}
	if err := p.add(entry, b.Entry, "", 0, 0, ""); err != nil {
		return nil, err
	}
	b.Files, b.Data, b.Missing = p.files, p.data, p.missing
	byPath := func(a, b File) int { return strings.Compare(a.Path, b.Path) }
	slices.SortFunc(b.Files, byPath)
	slices.SortFunc(b.Data, byPath)
	slices.Sort(b.Missing)
	return b, nil
}

// addData packs the application files the source f names with a literal
// src= of file() or include().
func (p *packer) addData(file string, f *syntax.File) error {
	var err error
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || err != nil {
			return err == nil
		}
		fn, ok := call.Fn.(*syntax.Ident)
		if !ok || (fn.Name != "file" && fn.Name != "include" && fn.Name != "skill") {
			return true
		}
		for i, arg := range call.Args {
			var lit *syntax.Literal
			if bin, ok := arg.(*syntax.BinaryExpr); ok && bin.Op == syntax.EQ {
				if key, ok := bin.X.(*syntax.Ident); ok && key.Name == "src" {
					lit, _ = bin.Y.(*syntax.Literal)
				}
			} else if i == 0 && fn.Name == "skill" {
				lit, _ = arg.(*syntax.Literal) // skill("dir")
			}
			if lit == nil {
				continue
			}
			src, ok := lit.Value.(string)
			name := path.Clean(filepath.ToSlash(src))
			if !ok || filepath.IsAbs(src) || !fs.ValidPath(name) || name == "." || p.seenData[name] {
				continue
			}
			p.seenData[name] = true
			if err = p.addDataPath(name, fn.Name == "skill"); err != nil {
				pos := lit.TokenPos
				err = &PackError{File: file, Line: pos.Line, Col: pos.Col, Module: src, Err: err}
				return false
			}
		}
		return true
	})
	return err
}

// addDataPath packs what a literal src= names as the run will read it:
// for file() and include() (which follow a symbolic link), the regular
// file, or the mark of a directory; for skill() (which refuses links),
// the package directory with its files and the links in it. A name that
// does not exist is recorded as missing; one that cannot be read is left
// out, for the run to report.
func (p *packer) addDataPath(name string, skill bool) error {
	stat := os.Stat
	if skill {
		stat = os.Lstat
	}
	info, err := stat(filepath.FromSlash(name))
	if errors.Is(err, fs.ErrNotExist) {
		p.missing = append(p.missing, name)
		return nil
	}
	if err != nil {
		return nil
	}
	add := func(name string, mode fs.FileMode) error {
		data, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			return nil
		}
		if p.total += len(data); p.total > MaxBundleBytes {
			return fmt.Errorf("with the files it reads, the workflow exceeds %d MiB", MaxBundleBytes>>20)
		}
		sum := sha256.Sum256(data)
		p.data = append(p.data, File{Path: name, SHA256: hex.EncodeToString(sum[:]), Data: data, Exec: mode.Perm()&0o100 != 0})
		return nil
	}
	link := func(name string) {
		target, err := os.Readlink(filepath.FromSlash(name))
		if err == nil {
			p.data = append(p.data, File{Path: name, SHA256: emptySHA256, Link: target})
		}
	}
	switch {
	case info.Mode().IsRegular():
		return add(name, info.Mode())
	case info.Mode()&fs.ModeSymlink != 0:
		link(name)
		return nil
	case !info.IsDir():
		return nil
	case !skill:
		// file() and include() refuse a directory: its mark suffices.
		p.data = append(p.data, File{Path: name, SHA256: emptySHA256, Dir: true})
		return nil
	}
	return filepath.WalkDir(filepath.FromSlash(name), func(f string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(f)
		switch {
		case de.IsDir():
			return nil
		case p.seenData[rel]:
			return nil
		}
		p.seenData[rel] = true
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			link(rel)
			return nil
		case !de.Type().IsRegular():
			return nil // a FIFO or a device: the run reports what it finds missing
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		return add(rel, info.Mode())
	})
}

// ProviderError is a provider that a function body makes in a way that
// cannot travel to a worker: its factory is given a function. A worker
// makes a provider that a function body made from its factory call and
// literal arguments (see starlib.FactoryCall); a function is not data.
// Pack refuses such a workflow, naming the call.
type ProviderError struct {
	File      string
	Line, Col int32
	// Factory is the builtin, Param the argument that is a function.
	Factory, Param string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s(%s=) is called in a function body with a function, which cannot travel to a Temporal worker (a worker makes a provider a function body made from its factory call and literal arguments): make the provider at the top level of the file", e.File, e.Line, e.Col, e.Factory, e.Param)
}

// refuseStayingProviders finds, in the function bodies of f, the calls of
// provider factories given a function (a provider that cannot travel).
// A deterministic_agent()'s respond= is allowed: its sessions compute in
// workflow code, where the function is.
func refuseStayingProviders(file string, f *syntax.File) error {
	var err error
	inBody := 0
	var walk func(n syntax.Node) bool
	walk = func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.DefStmt:
			inBody++
			for _, st := range n.Body {
				syntax.Walk(st, walk)
			}
			inBody--
			return false
		case *syntax.LambdaExpr:
			inBody++
			syntax.Walk(n.Body, walk)
			inBody--
			return false
		case *syntax.CallExpr:
			fn, ok := n.Fn.(*syntax.Ident)
			if !ok || inBody == 0 || fn.Name == "deterministic_agent" {
				return true
			}
			b, ok := starlib.Lookup(fn.Name)
			if !ok || b.Group != "providers" {
				return true
			}
			for i, arg := range n.Args {
				name := ""
				val := arg
				if bin, ok := arg.(*syntax.BinaryExpr); ok && bin.Op == syntax.EQ {
					if key, ok := bin.X.(*syntax.Ident); ok {
						name, val = key.Name, bin.Y
					}
				} else if i < len(b.Params) {
					name = b.Params[i].Name
				}
				if name == "" || !takesFunction(b, name) {
					continue
				}
				if lit, ok := val.(*syntax.Ident); ok && lit.Name == "None" {
					continue
				}
				pos := n.Lparen
				err = &ProviderError{File: file, Line: pos.Line, Col: pos.Col, Factory: fn.Name, Param: name}
				return false
			}
		}
		return true
	}
	syntax.Walk(f, walk)
	return err
}

// takesFunction reports whether b's parameter name takes a function.
func takesFunction(b *starlib.Builtin, name string) bool {
	for _, p := range b.Params {
		if p.Name == name {
			return strings.Contains(p.Type, "callable")
		}
	}
	return false
}

// emptySHA256 is the digest of no data: that of a directory's or a
// link's entry.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

type packer struct {
	dir      string
	seen     map[string]bool
	files    []File
	seenData map[string]bool
	data     []File
	missing  []string
	total    int
}

// add packs the file at disk path file under key, then the modules it
// loads; from, line, col and module locate the load() that named it.
func (p *packer) add(file, key, from string, line, col int32, module string) error {
	if p.seen[key] {
		return nil
	}
	p.seen[key] = true
	fail := func(err error) error {
		if from == "" {
			return &PackError{File: file, Err: err}
		}
		return &PackError{File: from, Line: line, Col: col, Module: module, Err: err}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fail(err)
	}
	if p.total += len(data); p.total > MaxBundleBytes {
		return fail(fmt.Errorf("the workflow and its modules exceed %d MiB", MaxBundleBytes>>20))
	}
	sum := sha256.Sum256(data)
	p.files = append(p.files, File{Path: key, SHA256: hex.EncodeToString(sum[:]), Data: data})
	f, err := starlib.FileOptions.Parse(file, data, 0)
	if err != nil {
		// The load itself reports the syntax error, with its position.
		return nil
	}
	if err := p.addData(file, f); err != nil {
		return err
	}
	if err := refuseStayingProviders(file, f); err != nil {
		return err
	}
	for _, stmt := range f.Stmts {
		ld, ok := stmt.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		name, _ := ld.Module.Value.(string)
		if strings.HasPrefix(name, "@") {
			continue
		}
		pos := ld.Module.TokenPos
		if err := p.add(starlib.ModuleFile(file, name), path.Join(path.Dir(key), name), file, pos.Line, pos.Col, name); err != nil {
			return err
		}
	}
	return nil
}

// Digest is the bundle's content address: the SHA-256 of its entry and of
// each file's path and digest, in order. Two bundles with the same digest
// load the same program.
func (b *Bundle) Digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "entry %q\n", b.Entry)
	for _, f := range b.Files {
		fmt.Fprintf(h, "%s %q\n", f.SHA256, f.Path)
	}
	for _, f := range b.Data {
		fmt.Fprintf(h, "data %s %q %t %t %q\n", f.SHA256, f.Path, f.Exec, f.Dir, f.Link)
	}
	for _, m := range b.Missing {
		fmt.Fprintf(h, "missing %q\n", m)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks that the bundle is well formed: its entry is one of its
// files, paths are unique and sorted, and every file's content matches
// its digest. A bundle that arrives from elsewhere is verified before it
// is loaded.
func (b *Bundle) Verify() error {
	if b == nil {
		return errors.New("no workflow bundle")
	}
	total, hasEntry := 0, false
	for i, f := range b.Files {
		if i > 0 && b.Files[i-1].Path >= f.Path {
			return fmt.Errorf("workflow bundle: files are not sorted by path, or %q is listed twice", f.Path)
		}
		sum := sha256.Sum256(f.Data)
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			return fmt.Errorf("workflow bundle: %s does not match its digest %s", f.Path, f.SHA256)
		}
		total += len(f.Data)
		hasEntry = hasEntry || f.Path == b.Entry
	}
	for i, f := range b.Data {
		if i > 0 && b.Data[i-1].Path >= f.Path {
			return fmt.Errorf("workflow bundle: data files are not sorted by path, or %q is listed twice", f.Path)
		}
		if !fs.ValidPath(f.Path) {
			return fmt.Errorf("workflow bundle: data file %q is not a relative path", f.Path)
		}
		if (f.Dir || f.Link != "") && (len(f.Data) > 0 || f.Exec || (f.Dir && f.Link != "")) {
			return fmt.Errorf("workflow bundle: data entry %q is a directory or link with data", f.Path)
		}
		sum := sha256.Sum256(f.Data)
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			return fmt.Errorf("workflow bundle: data file %s does not match its digest %s", f.Path, f.SHA256)
		}
		total += len(f.Data)
	}
	for i, m := range b.Missing {
		if (i > 0 && b.Missing[i-1] >= m) || !fs.ValidPath(m) {
			return fmt.Errorf("workflow bundle: missing path %q is not a sorted, unique, relative path", m)
		}
	}
	if !hasEntry {
		return fmt.Errorf("workflow bundle: its entry %q is not among its files", b.Entry)
	}
	if total > MaxBundleBytes {
		return fmt.Errorf("workflow bundle: %d bytes of sources exceed %d MiB", total, MaxBundleBytes>>20)
	}
	return nil
}

// FS returns the bundle's files as a file system for
// starlib.LoadOptions.FS: starlib.LoadFile(b.Entry, LoadOptions{FS:
// b.FS()}) loads the program that Pack read. It serves the names loading
// asks for (which may start with ../), and nothing else.
func (b *Bundle) FS() fs.FS { return bundleFS{b.Files, "module"} }

// DataFS returns the bundle's application files (Data) as a file system
// for eval.Options.AppFiles. dir is the submitter's working directory
// (RunInput.Cwd): a file the sources named that did not exist there is
// reported as missing there, as aml run reports it.
func (b *Bundle) DataFS(dir string) fs.FS {
	d := dataFS{files: map[string]*File{}, dirs: map[string][]fs.DirEntry{".": nil}, missing: map[string]bool{}, dir: dir}
	for _, m := range b.Missing {
		d.missing[m] = true
	}
	for i := range b.Data {
		f := &b.Data[i]
		if f.Dir {
			if _, ok := d.dirs[f.Path]; !ok {
				d.dirs[f.Path] = nil
			}
		} else {
			d.files[f.Path] = f
		}
		// Each directory above the entry lists what is below it.
		child, entry := f.Path, fs.DirEntry(fs.FileInfoToDirEntry(dataInfo{f: f}))
		for {
			dir := path.Dir(child)
			_, known := d.dirs[dir]
			d.dirs[dir] = append(d.dirs[dir], entry)
			if known || dir == "." {
				break
			}
			child, entry = dir, fs.FileInfoToDirEntry(dataInfo{dir: dir})
		}
	}
	for _, es := range d.dirs {
		slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	}
	return d
}

// dataFS serves a bundle's application files with their directories, and
// says what travels with a run when a file is not among them. It
// implements fs.StatFS and fs.ReadLinkFS, so that the run's stat and
// lstat of a name behave as the submitter's did.
type dataFS struct {
	files   map[string]*File
	dirs    map[string][]fs.DirEntry
	missing map[string]bool
	dir     string
}

// notFound is the error of a name the bundle does not hold: as on the
// submitter when it did not exist there, else what travels with a run.
func (d dataFS) notFound(op, name string) error {
	if d.missing[name] || d.missingBelow(name) {
		p := filepath.FromSlash(name)
		if d.dir != "" {
			p = filepath.Join(d.dir, p)
		}
		return &fs.PathError{Op: op, Path: p, Err: syscall.ENOENT}
	}
	return &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: the workflow bundle holds no such file (only files and skill packages that file(src=), include(src=) and skill() name with a string literal travel with a run)", fs.ErrNotExist)}
}

// missingBelow reports whether a directory above name was missing.
func (d dataFS) missingBelow(name string) bool {
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if d.missing[dir] {
			return true
		}
	}
	return false
}

// resolve follows name (a link to a packed file or directory, within the
// bundle) to what it names.
func (d dataFS) resolve(name string) string {
	for range 40 {
		f := d.files[name]
		if f == nil || f.Link == "" || path.IsAbs(f.Link) {
			return name
		}
		name = path.Join(path.Dir(name), filepath.ToSlash(f.Link))
	}
	return name
}

func (d dataFS) open(op, name string) (fs.File, error) {
	name = d.resolve(name)
	if f := d.files[name]; f != nil && f.Link == "" {
		return &dataFile{info: dataInfo{f: f}, r: bytes.NewReader(f.Data)}, nil
	}
	if es, ok := d.dirs[name]; ok {
		return &dataFile{info: dataInfo{dir: name}, entries: es}, nil
	}
	return nil, d.notFound(op, name)
}

// Open implements fs.FS.
func (d dataFS) Open(name string) (fs.File, error) { return d.open("open", name) }

// Stat implements fs.StatFS, following links.
func (d dataFS) Stat(name string) (fs.FileInfo, error) {
	f, err := d.open("stat", name)
	if err != nil {
		return nil, err
	}
	return f.Stat()
}

// Lstat implements fs.ReadLinkFS: a link is described, not followed.
func (d dataFS) Lstat(name string) (fs.FileInfo, error) {
	if f := d.files[name]; f != nil && f.Link != "" {
		return dataInfo{f: f}, nil
	}
	f, err := d.open("lstat", name)
	if err != nil {
		return nil, err
	}
	return f.Stat()
}

// ReadLink implements fs.ReadLinkFS.
func (d dataFS) ReadLink(name string) (string, error) {
	if f := d.files[name]; f != nil && f.Link != "" {
		return f.Link, nil
	}
	if _, err := d.Lstat(name); err != nil {
		return "", err
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.New("not a symbolic link")}
}

// dataFile is an open data file or directory.
type dataFile struct {
	info    dataInfo
	r       *bytes.Reader
	entries []fs.DirEntry
	read    int
}

func (f *dataFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *dataFile) Close() error               { return nil }
func (f *dataFile) Read(p []byte) (int, error) {
	if f.r == nil {
		return 0, &fs.PathError{Op: "read", Path: f.info.dir, Err: errors.New("is a directory")}
	}
	return f.r.Read(p)
}

// ReadDir implements fs.ReadDirFile.
func (f *dataFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := f.entries[f.read:]
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	if n > 0 && n < len(rest) {
		rest = rest[:n]
	}
	f.read += len(rest)
	return rest, nil
}

// dataInfo describes a data file or link (f) or a directory (dir, or f
// marked Dir).
type dataInfo struct {
	f   *File
	dir string
}

func (i dataInfo) Name() string {
	if i.f != nil {
		return path.Base(i.f.Path)
	}
	return path.Base(i.dir)
}
func (i dataInfo) Size() int64 {
	if i.f != nil {
		return int64(len(i.f.Data))
	}
	return 0
}
func (i dataInfo) Mode() fs.FileMode {
	switch {
	case i.f == nil || i.f.Dir:
		return fs.ModeDir | 0o555
	case i.f.Link != "":
		return fs.ModeSymlink | 0o777
	case i.f.Exec:
		return 0o555
	}
	return 0o444
}
func (i dataInfo) ModTime() time.Time { return time.Time{} }
func (i dataInfo) IsDir() bool        { return i.f == nil || i.f.Dir }
func (i dataInfo) Sys() any           { return nil }

var (
	_ fs.StatFS     = dataFS{}
	_ fs.ReadLinkFS = dataFS{}
)

type bundleFS struct {
	files []File
	// what names the kind of file in a not-found error.
	what string
}

func (f bundleFS) lookup(name string) (*File, bool) {
	i, ok := slices.BinarySearchFunc(f.files, name, func(e File, name string) int { return strings.Compare(e.Path, name) })
	if !ok {
		return nil, false
	}
	return &f.files[i], true
}

// ReadFile implements fs.ReadFileFS; the caller may modify the result.
func (f bundleFS) ReadFile(name string) ([]byte, error) {
	file, ok := f.lookup(name)
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: the workflow bundle holds no such %s", fs.ErrNotExist, f.what)}
	}
	return bytes.Clone(file.Data), nil
}

// Open implements fs.FS.
func (f bundleFS) Open(name string) (fs.File, error) {
	file, ok := f.lookup(name)
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: the workflow bundle holds no such %s", fs.ErrNotExist, f.what)}
	}
	return &openFile{f: file, r: bytes.NewReader(file.Data)}, nil
}

type openFile struct {
	f *File
	r *bytes.Reader
}

func (o *openFile) Stat() (fs.FileInfo, error) { return fileInfo{o.f}, nil }
func (o *openFile) Read(p []byte) (int, error) { return o.r.Read(p) }
func (o *openFile) Close() error               { return nil }

var _ io.Reader = (*openFile)(nil)

type fileInfo struct{ f *File }

func (i fileInfo) Name() string       { return path.Base(i.f.Path) }
func (i fileInfo) Size() int64        { return int64(len(i.f.Data)) }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
