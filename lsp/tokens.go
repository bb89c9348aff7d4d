package lsp

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"unicode/utf8"

	"go.starlark.net/resolve"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// The semantic token legend: indexes into these lists are what the
// encoded tokens carry.
var (
	tokenTypes     = []string{"keyword", "string", "number", "comment", "function", "parameter", "variable", "property"}
	tokenModifiers = []string{"defaultLibrary", "definition"}
)

const (
	tokKeyword = iota
	tokString
	tokNumber
	tokComment
	tokFunction
	tokParameter
	tokVariable
	tokProperty
)

const (
	modDefaultLibrary = 1 << iota
	modDefinition
)

// semanticTokensFull answers textDocument/semanticTokens/full: every
// token of the document's last good parse, so that an editor without a
// Starlark grammar colours keywords, strings, numbers, comments,
// functions (builtins with the defaultLibrary modifier), parameters and
// variables.
func semanticTokensFull(_ context.Context, s *server, r *request, _ *documentParams, d *document) (any, error) {
	good := r.snap.current(d)
	return map[string]any{"data": encodeTokens(semanticTokens(good, s.opts.Extensions, 0, 1<<30), good, r.snap.utf8)}, nil
}

// semanticTokensRange answers textDocument/semanticTokens/range: the
// tokens on the lines of the range.
func semanticTokensRange(_ context.Context, s *server, r *request, p *documentRangeParams, d *document) (any, error) {
	good := r.snap.current(d)
	first, last := int32(p.Range.Start.Line)+1, int32(p.Range.End.Line)+1
	return map[string]any{"data": encodeTokens(semanticTokens(good, s.opts.Extensions, first, last), good, r.snap.utf8)}, nil
}

// semToken is one semantic token on one line: its start (1-based line,
// 1-based byte column), its length in bytes, its type and modifiers.
type semToken struct {
	line, col int32
	n         int
	typ, mods int
}

// semanticTokens returns the tokens of f on lines [first, last], sorted,
// one line each (a token over several lines is split per line).
func semanticTokens(f *analysis.File, exts []*starlib.Extension, first, last int32) []semToken {
	if f == nil || f.Syntax == nil {
		return nil
	}
	lines := f.Lines()
	var out []semToken
	// byteCol converts the rune column of p to a byte offset in its
	// line, from a table made once per line that is not ASCII.
	runeOffsets := map[int32][]int{}
	var cachedLine int32
	var cachedText []byte
	var cachedASCII bool
	byteCol := func(p syntax.Position) int {
		if p.Line != cachedLine {
			cachedLine, cachedText = p.Line, lines.Line(int(p.Line))
			cachedASCII = !hasNonASCII(cachedText)
		}
		line := cachedText
		if cachedASCII {
			return min(max(int(p.Col-1), 0), len(line))
		}
		offs, ok := runeOffsets[p.Line]
		if !ok {
			for i := range string(line) {
				offs = append(offs, i)
			}
			offs = append(offs, len(line))
			runeOffsets[p.Line] = offs
		}
		return offs[min(max(int(p.Col-1), 0), len(offs)-1)]
	}
	// add records a token at p (whose column counts runes, as the
	// parser's do) of n bytes; tokens keep byte columns.
	add := func(p syntax.Position, n, typ, mods int) {
		if p.Line < first || p.Line > last || n <= 0 {
			return
		}
		out = append(out, semToken{line: p.Line, col: int32(byteCol(p)) + 1, n: n, typ: typ, mods: mods})
	}
	// addText adds a token over text that starts at p and may span lines.
	addText := func(p syntax.Position, text string, typ int) {
		for i, part := range strings.Split(text, "\n") {
			at := p
			if i > 0 {
				at = syntax.MakePosition(nil, p.Line+int32(i), 1)
			}
			add(at, len(strings.TrimSuffix(part, "\r")), typ, 0)
		}
	}
	keyword := func(p syntax.Position, word string) {
		if p.IsValid() {
			add(p, len(word), tokKeyword, 0)
		}
	}
	// keywordIn finds word between two positions of the text (the "in" of
	// a for statement, which the parser does not place).
	keywordIn := func(from, to syntax.Position, word string) {
		if from.Line != to.Line || from.Line < 1 {
			return
		}
		line := lines.Line(int(from.Line))
		lo, hi := byteCol(from), byteCol(to)
		if lo >= hi {
			return
		}
		if i := bytes.Index(line[lo:hi], []byte(" "+word+" ")); i >= 0 {
			i = utf8.RuneCount(line[lo : lo+i])
			add(syntax.MakePosition(nil, from.Line, from.Col+int32(i)+1), len(word), tokKeyword, 0)
		}
	}
	// Bindings are told apart by their first identifier: a captured
	// variable gets a binding of its own in each function using it.
	defs := map[*syntax.Ident]bool{}    // def names
	params := map[*syntax.Ident]bool{}  // parameters
	std := map[*syntax.Ident]bool{}     // the local names of @std loads
	loaded := map[*syntax.Ident]bool{}  // names a load binds without alias
	kwNames := map[*syntax.Ident]bool{} // keyword argument names at call sites
	props := map[*syntax.Ident]bool{}   // attribute names (x.name)
	var seenComments = map[syntax.Position]bool{}
	comments := func(n syntax.Node) {
		c := n.Comments()
		if c == nil {
			return
		}
		for _, list := range [][]syntax.Comment{c.Before, c.Suffix, c.After} {
			for _, cm := range list {
				if !seenComments[cm.Start] {
					seenComments[cm.Start] = true
					add(cm.Start, len(cm.Text), tokComment, 0)
				}
			}
		}
	}
	bind := func(id *syntax.Ident, m map[*syntax.Ident]bool) {
		if b, ok := id.Binding.(*resolve.Binding); ok && b.First != nil {
			m[b.First] = true
		} else {
			m[id] = true
		}
	}
	paramIdents := func(ps []syntax.Expr) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Ident:
				bind(p, params)
			case *syntax.BinaryExpr:
				if id, ok := p.X.(*syntax.Ident); ok {
					bind(id, params)
				}
			case *syntax.UnaryExpr:
				if id, ok := p.X.(*syntax.Ident); ok {
					bind(id, params)
				}
			}
		}
	}
	// The first pass finds what each binding is; the second colours.
	comments(f.Syntax)
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.DefStmt:
			bind(n.Name, defs)
			paramIdents(n.Params)
		case *syntax.LambdaExpr:
			paramIdents(n.Params)
		case *syntax.LoadStmt:
			for i, to := range n.To {
				if strings.HasPrefix(n.ModuleName(), "@") {
					std[to] = true
				}
				if i < len(n.From) && n.From[i].NamePos == to.NamePos {
					loaded[to] = true
				}
			}
		case *syntax.DotExpr:
			props[n.Name] = true
		case *syntax.CallExpr:
			for _, a := range n.Args {
				if be, ok := a.(*syntax.BinaryExpr); ok && be.Op == syntax.EQ {
					if id, ok := be.X.(*syntax.Ident); ok {
						kwNames[id] = true
					}
				}
			}
		}
		return true
	})
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		if n == nil {
			return false
		}
		comments(n)
		switch n := n.(type) {
		case *syntax.Ident:
			if kwNames[n] {
				add(n.NamePos, len(n.Name), tokParameter, 0)
				break
			}
			if props[n] {
				add(n.NamePos, len(n.Name), tokProperty, 0)
				break
			}
			if loaded[n] {
				break // the quoted symbol is a string
			}
			b, _ := n.Binding.(*resolve.Binding)
			mods := 0
			if b != nil && b.First == n {
				mods |= modDefinition
			}
			switch {
			case b == nil:
				add(n.NamePos, len(n.Name), tokVariable, 0)
			case b.Scope == resolve.Universal && (n.Name == "True" || n.Name == "False" || n.Name == "None"):
				add(n.NamePos, len(n.Name), tokKeyword, 0)
			case b.Scope == resolve.Universal || b.Scope == resolve.Predeclared:
				typ := tokVariable
				if _, ok := starlib.Lookup(n.Name, exts...); ok || b.Scope == resolve.Universal {
					typ = tokFunction
				}
				add(n.NamePos, len(n.Name), typ, modDefaultLibrary)
			case std[b.First]:
				add(n.NamePos, len(n.Name), tokFunction, mods|modDefaultLibrary)
			case defs[b.First]:
				add(n.NamePos, len(n.Name), tokFunction, mods)
			case params[b.First]:
				add(n.NamePos, len(n.Name), tokParameter, mods)
			default:
				add(n.NamePos, len(n.Name), tokVariable, mods)
			}
		case *syntax.Literal:
			switch n.Token {
			case syntax.STRING, syntax.BYTES:
				addText(n.TokenPos, n.Raw, tokString)
			case syntax.INT, syntax.FLOAT:
				add(n.TokenPos, len(n.Raw), tokNumber, 0)
			}
		case *syntax.DefStmt:
			keyword(n.Def, "def")
		case *syntax.ReturnStmt:
			keyword(n.Return, "return")
		case *syntax.IfStmt:
			word := "if"
			if isElif(lines, n.If) {
				word = "elif"
			}
			keyword(n.If, word)
			if n.ElsePos.IsValid() && !isElif(lines, n.ElsePos) {
				keyword(n.ElsePos, "else")
			}
		case *syntax.ForStmt:
			keyword(n.For, "for")
			_, end := n.Vars.Span()
			start, _ := n.X.Span()
			keywordIn(end, start, "in")
		case *syntax.WhileStmt:
			keyword(n.While, "while")
		case *syntax.ForClause:
			keyword(n.For, "for")
			keyword(n.In, "in")
		case *syntax.IfClause:
			keyword(n.If, "if")
		case *syntax.LoadStmt:
			keyword(n.Load, "load")
			for _, from := range n.From {
				// The symbol's quotes are around its name.
				add(syntax.MakePosition(nil, from.NamePos.Line, from.NamePos.Col-1), len(from.Name)+2, tokString, 0)
			}
		case *syntax.LambdaExpr:
			keyword(n.Lambda, "lambda")
		case *syntax.BranchStmt:
			keyword(n.TokenPos, n.Token.String())
		case *syntax.CondExpr:
			keyword(n.If, "if")
			keyword(n.ElsePos, "else")
		case *syntax.BinaryExpr:
			switch n.Op {
			case syntax.AND, syntax.OR, syntax.IN:
				keyword(n.OpPos, n.Op.String())
			case syntax.NOT_IN:
				// The parser places "not in" at its "in".
				keyword(n.OpPos, "in")
				_, end := n.X.Span()
				keywordIn(end, n.OpPos, "not")
			}
		case *syntax.UnaryExpr:
			if n.Op == syntax.NOT {
				keyword(n.OpPos, "not")
			}
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].line != out[j].line {
			return out[i].line < out[j].line
		}
		return out[i].col < out[j].col
	})
	// Tokens never overlap: of two at one place, the first found stays.
	kept := out[:0]
	for _, t := range out {
		if n := len(kept); n > 0 && kept[n-1].line == t.line && kept[n-1].col+int32(kept[n-1].n) > t.col {
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// isElif reports whether the keyword at p is elif (the parser desugars
// elif into a nested if and places both at the elif).
func isElif(lines *analysis.Lines, p syntax.Position) bool {
	line := lines.Line(int(p.Line))
	i := int(p.Col - 1)
	return i >= 0 && i+4 <= len(line) && string(line[i:i+4]) == "elif"
}

// encodeTokens encodes tokens relatively, as the protocol asks: for each,
// the line delta, the start delta (from the previous token on the same
// line, else from the line start), the length, the type and the
// modifier bits, with columns and lengths in the negotiated units.
func encodeTokens(ts []semToken, f *analysis.File, utf8Units bool) []uint32 {
	data := make([]uint32, 0, 5*len(ts))
	if f == nil {
		return data
	}
	lines := f.Lines()
	var prevLine, prevChar uint32
	// On one line the tokens are in order: the units before a token are
	// counted from the previous one's start, never from the line start.
	curLine, curByte, curUnits := int32(0), 0, uint32(0)
	for _, t := range ts {
		line := lines.Line(int(t.line))
		lo := min(int(t.col-1), len(line))
		hi := min(lo+t.n, len(line))
		if t.line != curLine || lo < curByte {
			curLine, curByte, curUnits = t.line, 0, 0
		}
		start := curUnits + units(line[curByte:lo], utf8Units)
		curByte, curUnits = lo, start
		length := units(line[lo:hi], utf8Units)
		if length == 0 {
			continue
		}
		l := uint32(t.line - 1)
		delta := start
		if l == prevLine {
			delta = start - prevChar
		}
		data = append(data, l-prevLine, delta, length, uint32(t.typ), uint32(t.mods))
		prevLine, prevChar = l, start
	}
	return data
}

// units is the length of b in UTF-8 bytes or UTF-16 code units.
func units(b []byte, utf8Units bool) uint32 {
	if utf8Units {
		return uint32(len(b))
	}
	n := uint32(0)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		b = b[size:]
	}
	return n
}

// hasNonASCII reports whether b has a byte outside ASCII.
func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
