package lsp

import (
	"context"
	"sort"

	"go.lsp.dev/protocol"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib/analysis"
)

// foldRange is a protocol FoldingRange whose characters are sent when
// they are set, 0 included (protocol.FoldingRange leaves a 0 out, which
// a client reads as the end of the line), and left out when nil.
type foldRange struct {
	StartLine      uint32                    `json:"startLine"`
	StartCharacter *uint32                   `json:"startCharacter,omitempty"`
	EndLine        uint32                    `json:"endLine"`
	EndCharacter   *uint32                   `json:"endCharacter,omitempty"`
	Kind           protocol.FoldingRangeKind `json:"kind,omitempty"`
}

// foldingRange answers textDocument/foldingRange from the document's
// last good parse.
func foldingRange(_ context.Context, s *server, r *request, _ *documentParams, d *document) (any, error) {
	return foldingRanges(r.snap.good(d), s.foldsWholeLines(), r.snap.utf8), nil
}

// foldsWholeLines reports whether the client folds whole lines only
// (capabilities.textDocument.foldingRange.lineFoldingOnly): it gets
// ranges without characters; other clients get the characters too.
func (s *server) foldsWholeLines() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lineFolds
}

// foldingRanges returns the ranges a client may fold in f: the bodies of
// defs, ifs, elses and loops, brackets (calls, lists, dicts, tuples,
// parentheses, comprehensions, parameter lists) and strings over several
// lines, runs of consecutive load statements ("imports") and runs of two
// or more whole-line comments on consecutive lines ("comment"). With
// lineOnly the ranges are whole lines, ending before the line of a
// closing bracket that starts its line so that the bracket stays in
// view; without it they start after the opening bracket (or after a
// block's colon, or at the end of the first line) and end before the
// closing one (or at the end of the block, string or run). A range
// within one line is left out. Lines are 0-based; characters count in
// UTF-8 bytes when utf8Units is set, else in UTF-16 units.
func foldingRanges(f *analysis.File, lineOnly, utf8Units bool) []foldRange {
	out := []foldRange{}
	if f == nil || f.Syntax == nil {
		return out
	}
	lines := f.Lines()
	// add adds the range from start to end; closing is set when end is
	// a closing bracket.
	add := func(start, end syntax.Position, closing bool, kind protocol.FoldingRangeKind) {
		if end.Line <= start.Line {
			return
		}
		if lineOnly {
			last := end.Line
			if closing && startsLine(lines, end) {
				last--
			}
			if last > start.Line {
				out = append(out, foldRange{StartLine: uint32(start.Line - 1), EndLine: uint32(last - 1), Kind: kind})
			}
			return
		}
		a, b := protoPos(lines, start, utf8Units), protoPos(lines, end, utf8Units)
		out = append(out, foldRange{StartLine: a.Line, StartCharacter: &a.Character, EndLine: b.Line, EndCharacter: &b.Character, Kind: kind})
	}
	brackets := func(open, close syntax.Position) {
		if open.IsValid() && close.IsValid() {
			add(shift(open, 1), close, true, "")
		}
	}
	// body adds the range from after a block's colon to its end.
	body := func(colon syntax.Position, stmts []syntax.Stmt) {
		if len(stmts) > 0 {
			add(colon, nodeEnd(stmts[len(stmts)-1]), false, "")
		}
	}
	var comments []syntax.Comment
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		if n == nil {
			return false
		}
		if c := n.Comments(); c != nil {
			comments = append(comments, c.Before...)
			comments = append(comments, c.After...)
		}
		switch n := n.(type) {
		case *syntax.DefStmt:
			brackets(n.Lparen, n.Rparen)
			if len(n.Body) > 0 {
				add(afterColon(f.Src, lines, shift(n.Rparen, 1)), nodeEnd(n), false, "")
			}
		case *syntax.ForStmt:
			body(afterColon(f.Src, lines, nodeEnd(n.X)), n.Body)
		case *syntax.WhileStmt:
			body(afterColon(f.Src, lines, nodeEnd(n.Cond)), n.Body)
		case *syntax.IfStmt:
			body(afterColon(f.Src, lines, nodeEnd(n.Cond)), n.True)
			if len(n.False) == 1 {
				if elif, ok := n.False[0].(*syntax.IfStmt); ok && elif.If == n.ElsePos {
					break // an elif, which the walk reaches
				}
			}
			if len(n.False) > 0 {
				body(afterColon(f.Src, lines, shift(n.ElsePos, 4)), n.False)
			}
		case *syntax.CallExpr:
			brackets(n.Lparen, n.Rparen)
		case *syntax.ListExpr:
			brackets(n.Lbrack, n.Rbrack)
		case *syntax.DictExpr:
			brackets(n.Lbrace, n.Rbrace)
		case *syntax.TupleExpr:
			brackets(n.Lparen, n.Rparen)
		case *syntax.ParenExpr:
			brackets(n.Lparen, n.Rparen)
		case *syntax.Comprehension:
			brackets(n.Lbrack, n.Rbrack)
		case *syntax.Literal:
			if n.Token == syntax.STRING || n.Token == syntax.BYTES {
				start, end := n.Span()
				add(lineEnd(lines, start.Line), end, false, "")
			}
		}
		return true
	})
	// Runs of load statements.
	stmts := f.Syntax.Stmts
	for i := 0; i < len(stmts); {
		first, ok := stmts[i].(*syntax.LoadStmt)
		if !ok {
			i++
			continue
		}
		last := first
		for i++; i < len(stmts); i++ {
			ld, ok := stmts[i].(*syntax.LoadStmt)
			if !ok {
				break
			}
			last = ld
		}
		add(lineEnd(lines, first.Load.Line), shift(last.Rparen, 1), false, protocol.ImportsFoldingRange)
	}
	// Runs of whole-line comments on consecutive lines.
	var commentLines []syntax.Position
	for _, c := range comments {
		if wholeLine(lines, c.Start) {
			commentLines = append(commentLines, c.Start)
		}
	}
	sort.Slice(commentLines, func(i, j int) bool { return commentLines[i].Line < commentLines[j].Line })
	for i := 0; i < len(commentLines); {
		j := i + 1
		for j < len(commentLines) && commentLines[j].Line <= commentLines[j-1].Line+1 {
			j++
		}
		if first, last := commentLines[i].Line, commentLines[j-1].Line; last > first {
			add(lineEnd(lines, first), lineEnd(lines, last), false, protocol.CommentFoldingRange)
		}
		i = j
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.StartLine != b.StartLine {
			return a.StartLine < b.StartLine
		}
		if ac, bc := charOf(a.StartCharacter), charOf(b.StartCharacter); ac != bc {
			return ac < bc
		}
		return a.EndLine > b.EndLine
	})
	// Ranges that fold the same text once (in whole lines, a call and
	// its only argument often do).
	kept := out[:0]
	for i, r := range out {
		if i > 0 && sameFold(kept[len(kept)-1], r) {
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// charOf returns a range's character, 0 when it has none.
func charOf(c *uint32) uint32 {
	if c == nil {
		return 0
	}
	return *c
}

// sameFold reports whether two folding ranges fold the same text.
func sameFold(a, b foldRange) bool {
	return a.StartLine == b.StartLine && a.EndLine == b.EndLine &&
		charOf(a.StartCharacter) == charOf(b.StartCharacter) && charOf(a.EndCharacter) == charOf(b.EndCharacter)
}

// startsLine reports whether only blanks precede p on its line.
func startsLine(lines *analysis.Lines, p syntax.Position) bool {
	line := lines.Line(int(p.Line))
	col := int32(1)
	for _, r := range string(line) {
		if col >= p.Col {
			return true
		}
		if r != ' ' && r != '\t' {
			return false
		}
		col++
	}
	return true
}

// wholeLine reports whether the comment at p is the first thing on its
// line.
func wholeLine(lines *analysis.Lines, p syntax.Position) bool { return startsLine(lines, p) }

// afterColon returns the position after the colon that ends a block's
// header, at p or after blanks from p (where the header's last
// expression or token ends), else p.
func afterColon(src []byte, lines *analysis.Lines, p syntax.Position) syntax.Position {
	off := lines.Offset(p)
	for off < len(src) && (src[off] == ' ' || src[off] == '\t') {
		off++
	}
	if off < len(src) && src[off] == ':' {
		return lines.Position(nil, off+1)
	}
	return p
}
