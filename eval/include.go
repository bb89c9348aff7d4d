package eval

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aml-go/aml/internal/filekind"
)

// Include reads one application-owned file (Src, resolved from the
// runtime's Cwd) into the prompt when it is evaluated: a Markdown heading
// and the file's UTF-8 text, or, when the file exceeds MaxBytes inside an
// agent, a read instruction naming a staged copy. Path (a file in the
// active workspace or sandbox) needs such a scope.
type Include struct {
	Src  string
	Path string
	// MaxBytes is the inline limit; 0 means unlimited.
	MaxBytes int64
	// Title replaces the heading text when non-nil.
	Title *string
	// NoTitle omits the heading.
	NoTitle  bool
	Position Position
}

// Kind implements Node.
func (*Include) Kind() string { return "include" }

// Pos implements Node.
func (n *Include) Pos() Position { return n.Position }

// includeCacheSize is the number of inspected file revisions a runtime
// keeps; includeContentLimit bounds the content it retains per revision.
const (
	includeCacheSize    = 32
	includeContentLimit = 10 << 20
)

type includeKey struct {
	path  string
	size  int64
	mtime int64
}

type includeEntry struct {
	key     includeKey
	lines   int
	content []byte // nil when over includeContentLimit
}

// includeCache is a small LRU of inspected file revisions, keyed by path,
// size and modification time. It is safe for concurrent use.
type includeCache struct {
	mu    sync.Mutex
	order *list.List
	items map[includeKey]*list.Element
}

func newIncludeCache() *includeCache {
	return &includeCache{order: list.New(), items: map[includeKey]*list.Element{}}
}

func (c *includeCache) get(k includeKey) (*includeEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*includeEntry), true
}

func (c *includeCache) put(e *includeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.key]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.items[e.key] = c.order.PushFront(e)
	for c.order.Len() > includeCacheSize {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*includeEntry).key)
	}
}

// cwd returns the runtime's base directory for application-owned reads.
func (d *domain) cwd() (string, error) {
	if d.rt.opts.Cwd != "" {
		return d.rt.opts.Cwd, nil
	}
	return os.Getwd()
}

// includeSource is where an include() reads from.
type includeSource struct {
	// name is the authored src or path, used in headings and errors.
	name string
	// arg is "src" or "path", for messages.
	arg string
	// fs identifies the filesystem in the cache key.
	fs   string
	path string
	stat func() (size int64, mtime int64, err error)
	read func() ([]byte, error)
	// open, when set, streams a host file, so that an oversized one is
	// checked and staged without holding it in memory.
	open func() (io.ReadCloser, error)
	// inPlace, when set, is the agent-visible location of a file left in
	// place when oversized (inside a sandbox); otherwise oversized files
	// are staged.
	inPlace string
}

// regularFileStat is an includeSource's stat of a file that a runtime
// described: its size and modification time (0 when unknown), or why it
// cannot be included.
func regularFileStat(fi FileInfo, err error) (int64, int64, error) {
	if err != nil {
		return 0, 0, err
	}
	if fi.Kind != "file" {
		return 0, 0, fmt.Errorf("must name a regular file, not a %s", fi.Kind)
	}
	var mt int64
	if !fi.ModTime.IsZero() {
		mt = fi.ModTime.UnixNano()
	}
	return fi.Size, mt, nil
}

// includeSourceOf resolves the file an include() reads: src from the
// runtime's working directory, path from the sandbox view, else the
// workspace materialization.
func (d *domain) includeSourceOf(ctx context.Context, n *Include, res resScope) (*includeSource, error) {
	if n.Src != "" && d.rt.opts.AppFiles != nil {
		fsys := d.rt.opts.AppFiles
		name, err := appFileName(n.Src)
		if err != nil {
			return nil, &EvaluationError{Msg: fmt.Sprintf("include(src=%q)", n.Src), Pos: n.Position, Err: err}
		}
		return &includeSource{name: n.Src, arg: "src", fs: "app", path: name,
			stat: func() (int64, int64, error) {
				info, err := fs.Stat(fsys, name)
				if err != nil {
					return 0, 0, err
				}
				if !info.Mode().IsRegular() {
					return 0, 0, fmt.Errorf("must name a regular file, not a %s", filekind.Coarse(info.Mode()))
				}
				return info.Size(), info.ModTime().UnixNano(), nil
			},
			read: func() ([]byte, error) { return fs.ReadFile(fsys, name) }}, nil
	}
	if n.Src != "" {
		base, err := d.cwd()
		if err != nil {
			return nil, &EvaluationError{Msg: "include(): cannot determine the working directory", Pos: n.Position, Err: err}
		}
		full := n.Src
		if !filepath.IsAbs(full) {
			full = filepath.Join(base, full)
		}
		return &includeSource{name: n.Src, arg: "src", fs: "host", path: full,
			stat: func() (int64, int64, error) {
				info, err := os.Stat(full)
				if err != nil {
					return 0, 0, err
				}
				if !info.Mode().IsRegular() {
					return 0, 0, fmt.Errorf("must name a regular file, not a %s", filekind.Coarse(info.Mode()))
				}
				return info.Size(), info.ModTime().UnixNano(), nil
			},
			read: func() ([]byte, error) { return os.ReadFile(full) },
			open: func() (io.ReadCloser, error) { return os.Open(full) }}, nil
	}
	p, err := CheckLogicalPath(n.Path, false)
	if err != nil {
		return nil, newError(n.Position, "include(path=...): "+err.Error())
	}
	switch {
	case res.sb != nil:
		v := res.sb
		lp := v.logical(p)
		src := &includeSource{name: n.Path, arg: "path", fs: "sandbox:" + v.lease.ID(), path: lp, inPlace: lp,
			stat: func() (int64, int64, error) { return regularFileStat(v.rt.Stat(ctx, lp)) },
			read: func() ([]byte, error) { return v.rt.ReadFile(ctx, lp) }}
		if fo, ok := v.rt.(FileOpener); ok {
			// Reads stop at their bound, whatever size the file claims.
			src.open = func() (io.ReadCloser, error) { return fo.OpenFile(ctx, lp) }
			if n.MaxBytes > 0 {
				src.read = func() ([]byte, error) { return readBounded(src.open, n.MaxBytes) }
			}
		}
		return src, nil
	case res.ws != nil:
		if wf, ok := res.ws.lease.(WorkspaceFiles); ok {
			src := &includeSource{name: n.Path, arg: "path", fs: "workspace:" + res.ws.lease.ID(), path: p,
				stat: func() (int64, int64, error) { return regularFileStat(wf.Stat(ctx, p)) },
				read: func() ([]byte, error) { return wf.ReadFile(ctx, p) }}
			if fo, ok := wf.(FileOpener); ok {
				// A workspace held elsewhere is read no further than the
				// bound, as a sandbox's is.
				src.open = func() (io.ReadCloser, error) { return fo.OpenFile(ctx, p) }
				if n.MaxBytes > 0 {
					src.read = func() ([]byte, error) { return readBounded(src.open, n.MaxBytes) }
				}
			}
			return src, nil
		}
		dir := res.ws.lease.Directory()
		return &includeSource{name: n.Path, arg: "path", fs: "workspace:" + dir, path: p,
			stat: func() (int64, int64, error) {
				info, err := readConfinedInfo(dir, p)
				if err != nil {
					return 0, 0, err
				}
				return info.Size(), info.ModTime().UnixNano(), nil
			},
			read: func() ([]byte, error) {
				data, _, err := readConfined(dir, p)
				return data, err
			},
			open: func() (io.ReadCloser, error) {
				r, f, _, err := openConfined(dir, p)
				if err != nil {
					return nil, err
				}
				return rootedFile{f, r}, nil
			}}, nil
	}
	return nil, newError(n.Position, "include(path=...) requires an enclosing workspace() or sandbox(); use src= for an application file read from the runtime's working directory")
}

// include renders an include() node. plan and agent are the nearest
// agent's plan and node, or nil outside an agent.
func (d *domain) include(ctx context.Context, n *Include, plan *agentPlan, agent *Agent, res resScope, ep *effectPath) (string, error) {
	src, err := d.includeSourceOf(ctx, n, res)
	if err != nil {
		return "", err
	}
	label := fmt.Sprintf("include(%s=%q)", src.arg, src.name)
	size, mtime, err := src.stat()
	if err != nil {
		return "", &EvaluationError{Msg: label + " cannot read the file", Pos: n.Position, Err: err}
	}
	oversized := n.MaxBytes > 0 && size > n.MaxBytes
	if oversized && plan == nil && src.inPlace == "" {
		return "", newError(n.Position, fmt.Sprintf("an oversized include() requires a containing agent(): %q is %d bytes, over max_bytes=%d; move the include into the agent that will read the staged file, or raise or remove max_bytes", src.name, size, n.MaxBytes))
	}
	if oversized && src.inPlace != "" && src.open != nil {
		// A file left in place in a sandbox is only checked and counted,
		// as a stream, up to maxCountBytes.
		if err := d.includeEffect(ep, n, label, digest("size:"+strconv.FormatInt(size, 10))); err != nil {
			return "", err
		}
		return d.includeInPlace(ctx, n, src, plan, agent, res, label, size)
	}
	if oversized && src.open != nil {
		// A streamed file is checked by its size: its content reaches the
		// agent as a staged file, not in the prompt.
		if err := d.includeEffect(ep, n, label, digest("size:"+strconv.FormatInt(size, 10))); err != nil {
			return "", err
		}
		return d.includeStream(ctx, n, src, plan, label, size)
	}
	// Revisions are cached by filesystem, path, size and modification
	// time; a filesystem that reports no modification time is not cached.
	key := includeKey{path: src.fs + "\x00" + src.path, size: size, mtime: mtime}
	entry, cached := d.rt.includes.get(key)
	var data []byte
	if cached && entry.content != nil {
		data = entry.content
	} else {
		data, err = src.read()
		if err != nil {
			return "", &EvaluationError{Msg: label + " cannot read the file", Pos: n.Position, Err: err}
		}
		if err := checkText(data); err != nil {
			return "", newError(n.Position, fmt.Sprintf("%s: %v", label, err))
		}
		entry = &includeEntry{key: key, lines: countLines(data)}
		if len(data) <= includeContentLimit {
			entry.content = data
		}
		if mtime != 0 {
			d.rt.includes.put(entry)
		}
	}
	if d.journal != nil {
		if err := d.includeEffect(ep, n, label, digest(string(data))); err != nil {
			return "", err
		}
	}
	heading := includeHeading(n, src.name)
	if !oversized {
		return heading + string(data), nil
	}
	where := src.inPlace
	if where == "" {
		if where, err = plan.stage(ctx, path.Base(filepath.ToSlash(src.path)), data); err != nil {
			return "", &EvaluationError{Msg: label + ": cannot stage the oversized file for the agent", Pos: n.Position, Err: err}
		}
	} else {
		// A file left in place in the sandbox is named relative to the
		// directory the agent will run in.
		where = relativeSlash(readerCwd(plan, agent, res.sb), where)
	}
	return fmt.Sprintf("%s`%s` is %s and %s, over the %s-byte inline limit, so it is not inlined. Read it from `%s`.",
		heading, src.name, plural(size, "byte"), plural(int64(entry.lines), "line"), groupDigits(n.MaxBytes), where), nil
}

// includeStream renders an oversized host file (include(src=) or a
// workspace path= outside a sandbox) without holding it in memory: it is
// read once as a stream, checked as UTF-8 text and counted, and copied
// into the agent's staging area as it goes (into a sandbox's staging only
// after it passed the check, through the runtime's complete-file API). A
// binary or non-UTF-8 file stops at its first bad byte.
func (d *domain) includeStream(ctx context.Context, n *Include, src *includeSource, plan *agentPlan, label string, size int64) (string, error) {
	rc, err := src.open()
	if err != nil {
		return "", &EvaluationError{Msg: label + " cannot read the file", Pos: n.Position, Err: err}
	}
	defer rc.Close()
	name := path.Base(filepath.ToSlash(src.path))
	var (
		lines int
		where string
	)
	s := plan.stagingArea()
	if s.rt == nil {
		// Host staging: copy straight into the staged file.
		f, full, err := plan.stageFile(ctx, name)
		if err != nil {
			return "", &EvaluationError{Msg: label + ": cannot stage the oversized file for the agent", Pos: n.Position, Err: err}
		}
		lines, err = copyText(ctx, f, rc)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return "", includeStreamError(n, label, err)
		}
		where = full
	} else {
		var buf bytes.Buffer
		if lines, err = copyText(ctx, &buf, rc); err != nil {
			return "", includeStreamError(n, label, err)
		}
		if where, err = plan.stage(ctx, name, buf.Bytes()); err != nil {
			return "", &EvaluationError{Msg: label + ": cannot stage the oversized file for the agent", Pos: n.Position, Err: err}
		}
	}
	heading := includeHeading(n, src.name)
	return fmt.Sprintf("%s`%s` is %s and %s, over the %s-byte inline limit, so it is not inlined. Read it from `%s`.",
		heading, src.name, plural(size, "byte"), plural(int64(lines), "line"), groupDigits(n.MaxBytes), where), nil
}

// includeHeading is the heading an include() puts before the file: its
// title=, else "Contents of `name`", or none with title=False.
func includeHeading(n *Include, name string) string {
	if n.NoTitle {
		return ""
	}
	title := "Contents of `" + name + "`"
	if n.Title != nil {
		title = *n.Title
	}
	return "## " + title + "\n\n"
}

// maxCountBytes bounds how much of an oversized file left in place in a
// sandbox is read to check it and count its lines.
const maxCountBytes = 64 << 20

// includeInPlace renders an oversized file left in place in a sandbox:
// it is read as a stream, at most maxCountBytes of it, checked as text and
// its lines counted ("at least" when the file is longer).
func (d *domain) includeInPlace(ctx context.Context, n *Include, src *includeSource, plan *agentPlan, agent *Agent, res resScope, label string, size int64) (string, error) {
	rc, err := src.open()
	if err != nil {
		return "", &EvaluationError{Msg: label + " cannot read the file", Pos: n.Position, Err: err}
	}
	defer rc.Close()
	lines, err := copyText(ctx, io.Discard, io.LimitReader(rc, maxCountBytes))
	if err != nil {
		return "", includeStreamError(n, label, err)
	}
	count := plural(int64(lines), "line")
	if size > maxCountBytes {
		count = "at least " + count + " (counted in its first " + groupDigits(maxCountBytes) + " bytes)"
	}
	heading := includeHeading(n, src.name)
	where := relativeSlash(readerCwd(plan, agent, res.sb), src.inPlace)
	return fmt.Sprintf("%s`%s` is %s and %s, over the %s-byte inline limit, so it is not inlined. Read it from `%s`.",
		heading, src.name, plural(size, "byte"), count, groupDigits(n.MaxBytes), where), nil
}

// readBounded reads a whole file through open, refusing one longer than
// limit bytes (a file that grew after it was measured).
func readBounded(open func() (io.ReadCloser, error), limit int64) ([]byte, error) {
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the file grew past max_bytes=%d while it was read", limit)
	}
	return data, nil
}

// errNotText marks content that is not UTF-8 text.
var errNotText = errors.New("not text")

func includeStreamError(n *Include, label string, err error) error {
	if errors.Is(err, errNotText) {
		return newError(n.Position, fmt.Sprintf("%s: %v", label, err))
	}
	return &EvaluationError{Msg: label + " cannot read the file", Pos: n.Position, Err: err}
}

// copyText copies r to w, checking as it goes that the content is UTF-8
// text (no NUL byte), and returns its line count. It stops at the first
// bad byte, and when ctx is done.
func copyText(ctx context.Context, w io.Writer, r io.Reader) (lines int, err error) {
	buf := make([]byte, 64<<10)
	var (
		carry []byte // an incomplete rune at the end of the last chunk
		off   int64  // offset of buf[0] (carry included) in the file
		last  byte
		seen  bool
	)
	for {
		if err := ctx.Err(); err != nil {
			return 0, context.Cause(ctx)
		}
		k := copy(buf, carry)
		m, rerr := r.Read(buf[k:])
		chunk := buf[:k+m]
		end := len(chunk)
		if rerr == nil {
			// Keep an incomplete rune at the end for the next chunk.
			for i := 1; i <= utf8.UTFMax && i <= len(chunk); i++ {
				if utf8.RuneStart(chunk[len(chunk)-i]) {
					if !utf8.FullRune(chunk[len(chunk)-i:]) {
						end = len(chunk) - i
					}
					break
				}
			}
		}
		body := chunk[:end]
		if i := bytes.IndexByte(body, 0); i >= 0 {
			return 0, fmt.Errorf("the file contains a NUL byte at offset %d: binary files cannot be included: %w", off+int64(i), errNotText)
		}
		for i := 0; i < len(body); {
			ru, size := utf8.DecodeRune(body[i:])
			if ru == utf8.RuneError && size <= 1 {
				return 0, fmt.Errorf("the file is not valid UTF-8 (invalid byte at offset %d): %w", off+int64(i), errNotText)
			}
			i += size
		}
		if len(body) > 0 {
			if _, err := w.Write(body); err != nil {
				return 0, err
			}
			lines += bytes.Count(body, []byte{'\n'})
			last, seen = body[len(body)-1], true
		}
		off += int64(len(body))
		carry = append(carry[:0], chunk[end:]...)
		if rerr == io.EOF {
			if len(carry) > 0 {
				return 0, fmt.Errorf("the file is not valid UTF-8 (invalid byte at offset %d): %w", off, errNotText)
			}
			if seen && last != '\n' {
				lines++
			}
			return lines, nil
		}
		if rerr != nil {
			return 0, rerr
		}
	}
}

// rootedFile closes a file opened through an os.Root, and the root.
type rootedFile struct {
	*os.File
	root *os.Root
}

func (f rootedFile) Close() error {
	err := f.File.Close()
	f.root.Close()
	return err
}

// checkText rejects content that is not UTF-8 text.
func checkText(data []byte) error {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return fmt.Errorf("the file contains a NUL byte at offset %d: binary files cannot be included", i)
	}
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("the file is not valid UTF-8 (invalid byte at offset %d)", i)
		}
		i += size
	}
	return nil
}

func countLines(data []byte) int {
	if len(data) == 0 {
		return 0
	}
	n := bytes.Count(data, []byte{'\n'})
	if data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// plural formats a count of unit, with thousands separators.
func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return groupDigits(n) + " " + unit + "s"
}

// groupDigits formats n with thousands separators: 12,345.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b []byte
	pre := len(s) % 3
	if pre > 0 {
		b = append(b, s[:pre]...)
	}
	for i := pre; i < len(s); i += 3 {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, s[i:i+3]...)
	}
	return string(b)
}

// readerCwd returns the lease-relative directory from which the reader of
// an in-place file in view v resolves paths: the effective cwd of the
// agent (its cwd=, else its sandbox's cwd) when it runs in the same lease,
// else v's own cwd.
func readerCwd(plan *agentPlan, agent *Agent, v *sbView) string {
	if plan != nil && plan.sb != nil && sameValue(plan.sb.lease, v.lease) {
		cwd := plan.sb.cwd
		if agent != nil && agent.Cwd != "" {
			if c, err := CheckLogicalPath(agent.Cwd, true); err == nil {
				cwd = c
			}
		}
		return path.Join(plan.sb.root, cwd)
	}
	return path.Join(v.root, v.cwd)
}

// relativeSlash returns target relative to base; both are clean,
// slash-separated paths relative to the same root ("." for the root).
func relativeSlash(base, target string) string {
	split := func(p string) []string {
		if p == "." || p == "" {
			return nil
		}
		return strings.Split(p, "/")
	}
	b, t := split(base), split(target)
	i := 0
	for i < len(b) && i < len(t) && b[i] == t[i] {
		i++
	}
	parts := make([]string, 0, len(b)-i+len(t)-i)
	for range b[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, t[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}
