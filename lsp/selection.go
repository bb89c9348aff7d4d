package lsp

import (
	"context"
	"unicode/utf8"

	"go.lsp.dev/protocol"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib/analysis"
)

// selectionRange answers textDocument/selectionRange: for each position,
// the syntax that encloses it from the innermost out (a name, an
// argument, the arguments of a call, the call, the statement, the block,
// the def, the file), each range strictly containing the one before.
func selectionRange(_ context.Context, _ *server, r *request, p *protocol.SelectionRangeParams, d *document) (any, error) {
	good := r.snap.good(d)
	out := make([]*protocol.SelectionRange, 0, len(p.Positions))
	for _, pp := range p.Positions {
		pos, _, err := starlarkPos(d, pp, r.snap.utf8)
		if err != nil {
			return nil, err
		}
		out = append(out, selectionChain(good, pos, r.snap.utf8))
	}
	return out, nil
}

// selectionChain returns the chain of ranges of f's syntax around p,
// innermost first, ending with the whole file.
func selectionChain(f *analysis.File, p syntax.Position, utf8Units bool) *protocol.SelectionRange {
	lines := f.Lines()
	spans := enclosing(f.Syntax, p)
	last := lines.Count()
	whole := protocol.Range{End: protoPos(lines, lineEnd(lines, int32(last)), utf8Units)}
	ranges := make([]protocol.Range, 0, len(spans)+1)
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		rng := protocol.Range{Start: protoPos(lines, s[0], utf8Units), End: protoPos(lines, s[1], utf8Units)}
		if n := len(ranges); n > 0 && !strictlyContains(rng, ranges[n-1]) {
			continue
		}
		ranges = append(ranges, rng)
	}
	if n := len(ranges); n == 0 || strictlyContains(whole, ranges[n-1]) {
		ranges = append(ranges, whole)
	}
	var chain *protocol.SelectionRange
	for i := len(ranges) - 1; i >= 0; i-- {
		chain = &protocol.SelectionRange{Range: ranges[i], Parent: chain}
	}
	return chain
}

// enclosing returns the spans of the syntax containing p, outermost
// first: the nodes on the path down to p, and between a node and its
// child the part of a call within its parentheses (its arguments) and a
// block of statements. It visits only the children of the nodes on the
// path.
func enclosing(f *syntax.File, p syntax.Position) [][2]syntax.Position {
	if f == nil {
		return nil
	}
	var out [][2]syntax.Position
	block := func(stmts []syntax.Stmt) {
		if len(stmts) == 0 {
			return
		}
		start, _ := stmts[0].Span()
		_, end := stmts[len(stmts)-1].Span()
		if !before(p, start) && !before(end, p) {
			out = append(out, [2]syntax.Position{start, end})
		}
	}
	var walk func(n syntax.Node)
	walk = func(n syntax.Node) {
		start, end := nodeSpan(n)
		if before(p, start) || before(end, p) {
			return
		}
		out = append(out, [2]syntax.Position{start, end})
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) > 0 {
				a, _ := n.Args[0].Span()
				_, b := n.Args[len(n.Args)-1].Span()
				if !before(p, a) && !before(b, p) {
					out = append(out, [2]syntax.Position{a, b})
				}
			}
		case *syntax.DefStmt:
			block(n.Body)
		case *syntax.ForStmt:
			block(n.Body)
		case *syntax.WhileStmt:
			block(n.Body)
		case *syntax.IfStmt:
			// The branch that holds p.
			if len(n.False) > 0 {
				if s, _ := n.False[0].Span(); !before(p, s) {
					block(n.False)
					break
				}
			}
			block(n.True)
		}
		// The first child that contains p.
		found := false
		syntax.Walk(n, func(c syntax.Node) bool {
			if c == nil || found {
				return false
			}
			if c == n {
				return true
			}
			if s, e := nodeSpan(c); !before(p, s) && !before(e, p) {
				found = true
				walk(c)
			}
			return false
		})
	}
	for _, st := range f.Stmts {
		if s, e := nodeSpan(st); !before(p, s) && !before(e, p) {
			walk(st)
			break
		}
	}
	return out
}

// nodeSpan is a node's span, ending after the closing bracket of a load
// statement, a parenthesized tuple, an index or a slice (whose Span ends
// before it), and of the nodes that end with one of them.
func nodeSpan(n syntax.Node) (start, end syntax.Position) {
	start, _ = n.Span()
	return start, nodeEnd(n)
}

// nodeEnd returns where a node ends (see nodeSpan). It follows the last
// child of the nodes that end with it.
func nodeEnd(n syntax.Node) syntax.Position {
	_, end := n.Span()
	switch n := n.(type) {
	case *syntax.LoadStmt:
		return shift(n.Rparen, 1)
	case *syntax.IndexExpr:
		return shift(n.Rbrack, 1)
	case *syntax.SliceExpr:
		return shift(n.Rbrack, 1)
	case *syntax.TupleExpr:
		if n.Lparen.IsValid() {
			return shift(n.Rparen, 1)
		}
	case *syntax.Ident, *syntax.Literal, *syntax.CallExpr, *syntax.ListExpr, *syntax.DictExpr,
		*syntax.ParenExpr, *syntax.Comprehension:
		return end // their own closing token ends them
	}
	var last syntax.Node
	syntax.Walk(n, func(c syntax.Node) bool {
		if c == nil {
			return false
		}
		if c == n {
			return true
		}
		last = c
		return false
	})
	if last != nil {
		if e := nodeEnd(last); before(end, e) {
			end = e
		}
	}
	return end
}

// strictlyContains reports whether outer contains inner and is larger.
func strictlyContains(outer, inner protocol.Range) bool {
	return outer != inner && !posBefore(inner.Start, outer.Start) && !posBefore(outer.End, inner.End)
}

// posBefore reports whether protocol position a comes before b.
func posBefore(a, b protocol.Position) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Character < b.Character
}

// lineEnd returns the position after the last rune of 1-based line n.
func lineEnd(lines *analysis.Lines, n int32) syntax.Position {
	return syntax.MakePosition(nil, n, int32(utf8.RuneCount(lines.Line(int(n))))+1)
}

// shift returns p moved n runes along its line.
func shift(p syntax.Position, n int32) syntax.Position {
	p.Col += n
	return p
}
