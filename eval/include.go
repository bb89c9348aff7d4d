package eval

import (
	"bytes"
	"container/list"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"unicode/utf8"
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

// include renders an include() node. plan is the nearest agent plan, or
// nil outside an agent.
func (d *domain) include(n *Include, plan *agentPlan, pl place) (string, error) {
	if n.Path != "" {
		if !pl.sandbox {
			return "", newError(n.Position, "include(path=...) requires an enclosing workspace() or sandbox(); use src= for an application file read from the runtime's working directory")
		}
	}
	base, err := d.cwd()
	if err != nil {
		return "", &EvaluationError{Msg: "include(): cannot determine the working directory", Pos: n.Position, Err: err}
	}
	full := n.Src
	if !filepath.IsAbs(full) {
		full = filepath.Join(base, full)
	}
	info, err := os.Stat(full)
	if err != nil {
		return "", &EvaluationError{Msg: fmt.Sprintf("include(src=%q) cannot read the file", n.Src), Pos: n.Position, Err: err}
	}
	if !info.Mode().IsRegular() {
		return "", newError(n.Position, fmt.Sprintf("include(src=%q) must name a regular file, not a %s", n.Src, fileKind(info)))
	}
	key := includeKey{path: full, size: info.Size(), mtime: info.ModTime().UnixNano()}
	oversized := n.MaxBytes > 0 && info.Size() > n.MaxBytes
	if oversized && plan == nil {
		return "", newError(n.Position, fmt.Sprintf("an oversized include() requires a containing agent(): %q is %d bytes, over max_bytes=%d; move the include into the agent that will read the staged file, or raise or remove max_bytes", n.Src, info.Size(), n.MaxBytes))
	}
	entry, cached := d.rt.includes.get(key)
	var data []byte
	if cached && entry.content != nil {
		data = entry.content
	} else {
		// Host files are read completely: inlining and staging both need
		// the bytes.
		data, err = os.ReadFile(full)
		if err != nil {
			return "", &EvaluationError{Msg: fmt.Sprintf("include(src=%q) cannot read the file", n.Src), Pos: n.Position, Err: err}
		}
		if err := checkText(data); err != nil {
			return "", newError(n.Position, fmt.Sprintf("include(src=%q): %v", n.Src, err))
		}
		entry = &includeEntry{key: key, lines: countLines(data)}
		if len(data) <= includeContentLimit {
			entry.content = data
		}
		d.rt.includes.put(entry)
	}
	heading := ""
	if !n.NoTitle {
		title := "Contents of `" + n.Src + "`"
		if n.Title != nil {
			title = *n.Title
		}
		heading = "## " + title + "\n\n"
	}
	if !oversized {
		return heading + string(data), nil
	}
	staged, err := plan.stage(filepath.Base(full), data)
	if err != nil {
		return "", &EvaluationError{Msg: fmt.Sprintf("include(src=%q): cannot stage the oversized file for the agent", n.Src), Pos: n.Position, Err: err}
	}
	return fmt.Sprintf("%s`%s` is %s bytes and %s lines, over the %s-byte inline limit, so it is not inlined. Read it from `%s`.",
		heading, n.Src, groupDigits(info.Size()), groupDigits(int64(entry.lines)), groupDigits(n.MaxBytes), staged), nil
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

func fileKind(info os.FileInfo) string {
	switch m := info.Mode(); {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
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

// staging is an agent's invocation-private, writable directory for
// oversized includes and skills. It is created on first use and removed
// exactly once when the agent's session ends, on every path.
type staging struct {
	mu   sync.Mutex
	dir  string
	n    int
	done bool
}

// stage writes data under the agent's staging root and returns the
// absolute path of the copy.
func (p *agentPlan) stage(name string, data []byte) (string, error) {
	if p.staging == nil {
		p.staging = &staging{}
	}
	dir, err := p.staging.root()
	if err != nil {
		return "", err
	}
	p.staging.mu.Lock()
	p.staging.n++
	n := p.staging.n
	p.staging.mu.Unlock()
	sub := filepath.Join(dir, "includes", strconv.Itoa(n))
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(sub, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// root returns the staging directory, creating it when needed.
func (s *staging) root() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return "", fmt.Errorf("the agent's staging area was already released")
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "aml-agent-")
		if err != nil {
			return "", err
		}
		s.dir = dir
	}
	return s.dir, nil
}

// release removes the staging directory; later calls do nothing.
func (s *staging) release() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	if s.dir == "" {
		return nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing the agent's staging area %s: %w", s.dir, err)
	}
	return nil
}
