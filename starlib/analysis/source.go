package analysis

import (
	"errors"
	"unicode/utf8"

	"go.starlark.net/syntax"
)

// Lines maps between byte offsets of a source text and Starlark
// positions (1-based lines, 1-based rune columns). A Lines is immutable
// and safe for concurrent use.
type Lines struct {
	src    []byte
	starts []int // byte offset of each line's first byte
}

// NewLines indexes src. Lines end at "\n"; a "\r" before it belongs to
// the line's end, as the Starlark scanner counts.
func NewLines(src []byte) *Lines {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return &Lines{src: src, starts: starts}
}

// Count returns the number of lines (a text ending in "\n" has an empty
// last line).
func (l *Lines) Count() int { return len(l.starts) }

// Line returns the text of the 1-based line n without its line ending,
// or "" when there is no such line.
func (l *Lines) Line(n int) []byte {
	if n < 1 || n > len(l.starts) {
		return nil
	}
	start, end := l.starts[n-1], len(l.src)
	if n < len(l.starts) {
		end = l.starts[n] - 1
	}
	if end > start && l.src[end-1] == '\r' {
		end--
	}
	return l.src[start:end]
}

// LineStart returns the byte offset of the 1-based line n (clamped).
func (l *Lines) LineStart(n int) int {
	switch {
	case n < 1:
		return 0
	case n > len(l.starts):
		return len(l.src)
	}
	return l.starts[n-1]
}

// Offset returns the byte offset of p, clamped to the text: a column
// past the end of its line is the end of the line.
func (l *Lines) Offset(p syntax.Position) int {
	if p.Line < 1 {
		return 0
	}
	if int(p.Line) > len(l.starts) {
		return len(l.src)
	}
	start := l.starts[p.Line-1]
	line := l.Line(int(p.Line))
	off := 0
	for col := int32(1); col < p.Col && off < len(line); col++ {
		_, size := utf8.DecodeRune(line[off:])
		off += size
	}
	return start + off
}

// Position returns the Starlark position of byte offset off (clamped).
func (l *Lines) Position(path *string, off int) syntax.Position {
	off = max(0, min(off, len(l.src)))
	n := 0
	lo, hi := 0, len(l.starts)-1
	for lo <= hi { // the last line starting at or before off
		mid := (lo + hi) / 2
		if l.starts[mid] <= off {
			n, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	col := utf8.RuneCount(l.src[l.starts[n]:off]) + 1
	return syntax.MakePosition(path, int32(n+1), int32(col))
}

// stringEnd returns the offset just past the string literal that starts
// at off (at its prefix or opening quote), or off when there is none.
func stringEnd(src []byte, off int) int {
	i := off
	for i < len(src) && (src[i] == 'r' || src[i] == 'b' || src[i] == 'R' || src[i] == 'B') {
		i++
	}
	if i >= len(src) || src[i] != '"' && src[i] != '\'' {
		return off
	}
	q := src[i]
	triple := i+2 < len(src) && src[i+1] == q && src[i+2] == q
	if triple {
		i += 3
	} else {
		i++
	}
	for i < len(src) {
		switch c := src[i]; {
		case c == '\\':
			i += 2
		case c == q && (!triple || i+2 < len(src) && src[i+1] == q && src[i+2] == q):
			if triple {
				return i + 3
			}
			return i + 1
		case c == '\n' && !triple:
			return i
		default:
			i++
		}
	}
	return len(src)
}

// frame is one open bracket before the cursor.
type frame struct {
	// call is the dotted name before "(", or "" for other brackets and
	// calls of computed functions.
	call string
	// open is the offset of the bracket.
	open int
	// args is the index of the argument the cursor is in.
	args int
	// keywords are the keyword arguments given so far; kw is the keyword
	// of the current argument, "" for a positional one.
	keywords map[string]bool
	kw       string
	// argStart is the offset where the current argument's text starts.
	argStart int
	// first is the value of the first argument when it is a string
	// literal (a load()'s module).
	// firstEnd > 0 marks it: [firstStart, firstEnd) of the source.
	firstStart, firstEnd int
}

// first returns the value of the frame's first argument when it is a
// string literal, or "".
func (f *frame) first(src []byte) string {
	if f.firstEnd == 0 {
		return ""
	}
	s, _ := unquote(src[f.firstStart:f.firstEnd])
	return s
}

// textContext is what a forward scan of the text up to the cursor
// knows; it works on text that does not parse.
type textContext struct {
	src    []byte
	frames []*frame
	// inString: the cursor is inside a string literal that started at
	// strStart; strText is its text up to the cursor.
	inString bool
	strStart int
	strText  string
	comment  bool
	// word is the identifier (with dots) ending at the cursor.
	word string
	// wordStart is its offset.
	wordStart int
}

func (c *textContext) top() *frame {
	if len(c.frames) == 0 {
		return nil
	}
	return c.frames[len(c.frames)-1]
}

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= utf8.RuneSelf
}

// scanContext scans src up to the offset cur.
func scanContext(src []byte, cur int) *textContext {
	cur = max(0, min(cur, len(src)))
	c := &textContext{src: src}
	i := 0
	for i < cur {
		ch := src[i]
		switch {
		case ch == '#':
			for i < cur && src[i] != '\n' {
				i++
			}
			if i == cur {
				c.comment = true
				return c
			}
		case ch == '"' || ch == '\'':
			end := stringEnd(src, i)
			if end > cur || end == cur && !closedString(src, i, end) {
				c.inString, c.strStart = true, i
				body := i + 1
				if end-i >= 3 && body+1 < len(src) && src[body] == ch && src[body+1] == ch {
					body += 2
				}
				c.strText = string(src[min(body, cur):cur])
				return c
			}
			if f := c.top(); f != nil && f.args == 0 && f.firstEnd == 0 {
				f.firstStart, f.firstEnd = i, end
			}
			i = end
			continue
		case ch == '(' || ch == '[' || ch == '{':
			f := &frame{open: i, argStart: i + 1, keywords: map[string]bool{}}
			if ch == '(' {
				j := i
				for j > 0 && (src[j-1] == ' ' || src[j-1] == '\t') {
					j--
				}
				k := j
				for k > 0 && (isIdentByte(src[k-1]) || src[k-1] == '.') {
					k--
				}
				f.call = string(src[k:j])
			}
			c.frames = append(c.frames, f)
		case ch == ')' || ch == ']' || ch == '}':
			if len(c.frames) > 0 {
				c.frames = c.frames[:len(c.frames)-1]
			}
		case ch == ',':
			if f := c.top(); f != nil {
				f.args++
				f.kw = ""
				f.argStart = i + 1
			}
		case ch == '=':
			next := byte(0)
			if i+1 < len(src) {
				next = src[i+1]
			}
			prev := byte(0)
			if i > 0 {
				prev = src[i-1]
			}
			if f := c.top(); f != nil && f.call != "" && next != '=' && !isOperator(prev) {
				name := lastIdent(src[f.argStart:i])
				if name != "" {
					f.kw = name
					f.keywords[name] = true
				}
			}
		}
		i++
	}
	if f := c.top(); f != nil && f.call != "" {
		keywordsAfter(src, cur, f.keywords)
	}
	k := cur
	for k > 0 && (isIdentByte(src[k-1]) || src[k-1] == '.') {
		k--
	}
	c.word, c.wordStart = string(src[k:cur]), k
	return c
}

func isOperator(c byte) bool {
	switch c {
	case '=', '!', '<', '>', '+', '-', '*', '/', '%', '|', '&', '^':
		return true
	}
	return false
}

// closedString reports whether the literal [start, end) ends with its
// closing quote (and not at a line end or the end of the text).
func closedString(src []byte, start, end int) bool {
	return end-1 > start && src[end-1] == src[start]
}

// lastIdent returns the identifier that b consists of, surrounded by
// blanks, or "".
func lastIdent(b []byte) string {
	s, e := 0, len(b)
	for s < e && (b[s] == ' ' || b[s] == '\t' || b[s] == '\n' || b[s] == '\r') {
		s++
	}
	for e > s && (b[e-1] == ' ' || b[e-1] == '\t' || b[e-1] == '\n' || b[e-1] == '\r') {
		e--
	}
	if s == e || '0' <= b[s] && b[s] <= '9' {
		return ""
	}
	for _, c := range b[s:e] {
		if !isIdentByte(c) {
			return ""
		}
	}
	return string(b[s:e])
}

// unquote returns the value of a simple string literal.
func unquote(lit []byte) (string, bool) {
	tok, err := parseStringLiteral(string(lit))
	return tok, err == nil
}

func parseStringLiteral(s string) (string, error) {
	f, err := (&syntax.FileOptions{}).ParseExpr("lit", s, 0)
	if err != nil {
		return "", err
	}
	l, ok := f.(*syntax.Literal)
	if !ok {
		return "", errNotString
	}
	v, ok := l.Value.(string)
	if !ok {
		return "", errNotString
	}
	return v, nil
}

var errNotString = errors.New("not a string literal")

// keywordsAfter adds to kws the keyword arguments written after cur in
// the call whose arguments cur is among.
func keywordsAfter(src []byte, cur int, kws map[string]bool) {
	depth := 0
	argStart := cur
	for i := cur; i < len(src); i++ {
		switch ch := src[i]; ch {
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case '"', '\'':
			i = stringEnd(src, i) - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				return
			}
			depth--
		case ',':
			if depth == 0 {
				argStart = i + 1
			}
		case '=':
			if depth == 0 && i+1 < len(src) && src[i+1] != '=' && i > 0 && !isOperator(src[i-1]) {
				if name := lastIdent(src[argStart:i]); name != "" {
					kws[name] = true
				}
			}
		}
	}
}
