package lsp

import (
	"context"
	"path/filepath"
	"sort"

	"go.lsp.dev/protocol"
	"go.starlark.net/resolve"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib/analysis"
)

// documentHighlight answers textDocument/documentHighlight: the
// occurrences in the document of the name at the position, as references
// finds them within the file alone, each marked Write where it binds the
// name (an assignment, a def, a parameter, a load, a loop variable) and
// Read where it uses it. Builtins get their uses in the file; keywords,
// literals and blanks get nothing.
func documentHighlight(_ context.Context, s *server, r *request, p *protocol.DocumentHighlightParams) (any, error) {
	_, good, pos, err := r.at(p.TextDocument.URI, p.Position)
	if err != nil {
		return nil, err
	}
	out := []protocol.DocumentHighlight{}
	if good == nil || good.Syntax == nil {
		return out, nil
	}
	var locs []analysis.Location
	if id := identAt(good.Syntax, pos); id != nil {
		if b := bindingOf(id); b != nil && (b.Scope == resolve.Predeclared || b.Scope == resolve.Universal || aliasedLoad(good.Syntax, b)) {
			// A builtin, or the local name of load(m, local="name"):
			// references follow the loaded symbol instead.
			locs = bindingLocations(good, b)
		} else {
			q := &analysis.Query{Program: fileProgram{good}, Extensions: s.opts.Extensions}
			locs = q.References(good, pos, true)
		}
	}
	writes := bindingStarts(good.Syntax)
	lines := good.Lines()
	seen := map[syntax.Position]bool{}
	for _, l := range locs {
		if filepath.Clean(l.Path) != good.Path || seen[l.Start] {
			continue
		}
		seen[l.Start] = true
		kind := protocol.DocumentHighlightKindRead
		if writes[keyOf(l.Start)] {
			kind = protocol.DocumentHighlightKindWrite
		}
		out = append(out, protocol.DocumentHighlight{Range: protoRange(lines, l.Start, l.End, r.snap.utf8), Kind: kind})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Range.Start, out[j].Range.Start
		return a.Line < b.Line || a.Line == b.Line && a.Character < b.Character
	})
	return out, nil
}

// fileProgram is an analysis.Program of one file alone, so that a query
// over it finds what the file itself says and reads nothing else.
type fileProgram struct{ f *analysis.File }

// File returns the file when path is its own, else nil.
func (p fileProgram) File(path string) *analysis.File {
	if filepath.Clean(path) == p.f.Path {
		return p.f
	}
	return nil
}

// Loaders returns nothing: no other file is known.
func (fileProgram) Loaders(string) []string { return nil }

// bindingOf returns the resolver's binding of an identifier, or nil.
func bindingOf(id *syntax.Ident) *resolve.Binding {
	b, _ := id.Binding.(*resolve.Binding)
	return b
}

// spanContains reports whether p lies within n's span, both ends
// included (a cursor just after a name is on it).
func spanContains(n syntax.Node, p syntax.Position) bool {
	start, end := n.Span()
	return !before(p, start) && !before(end, p)
}

// identAt returns the identifier at p, as the analysis queries find it
// (a load()'s quoted symbol counts its quotes), or nil. It descends only
// into the nodes that contain p.
func identAt(f *syntax.File, p syntax.Position) *syntax.Ident {
	var found *syntax.Ident
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil || found != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.File:
			return true
		case *syntax.LoadStmt:
			for _, id := range n.From {
				start, end := id.Span()
				start.Col--
				end.Col++
				if !before(p, start) && !before(end, p) {
					found = id
					return false
				}
			}
		case *syntax.Ident:
			if spanContains(n, p) {
				found = n
			}
			return false
		}
		return spanContains(n, p)
	})
	return found
}

// aliasedLoad reports whether b is bound by load(m, local="name"), whose
// local name is the file's own.
func aliasedLoad(f *syntax.File, b *resolve.Binding) bool {
	if b.First == nil {
		return false
	}
	for _, st := range f.Stmts {
		if ld, ok := st.(*syntax.LoadStmt); ok {
			for i, to := range ld.To {
				if to == b.First {
					return ld.From[i] != to
				}
			}
		}
	}
	return false
}

// bindingLocations returns the identifiers of f that the resolver bound
// to b (or to the same variable, for a closure's free one).
func bindingLocations(f *analysis.File, b *resolve.Binding) []analysis.Location {
	var out []analysis.Location
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok {
			if ib := bindingOf(id); ib == b || ib != nil && b.First != nil && ib.First == b.First {
				start, end := id.Span()
				out = append(out, analysis.Location{Path: f.Path, Start: start, End: end})
			}
		}
		return true
	})
	return out
}

// posKey is a position without its file name.
type posKey struct{ line, col int32 }

// keyOf returns the key of a position.
func keyOf(p syntax.Position) posKey { return posKey{p.Line, p.Col} }

// bindingStarts returns where the names that statements and parameters
// bind start: assigned names, def names, parameters, loop variables and
// the names a load binds (for load(m, "x"), at the opening quote too,
// where references start the quoted symbol).
func bindingStarts(f *syntax.File) map[posKey]bool {
	out := map[posKey]bool{}
	add := func(e syntax.Expr) {
		for _, id := range analysis.TargetNames(e) {
			out[keyOf(id.NamePos)] = true
		}
	}
	params := func(ps []syntax.Expr) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Ident:
				add(p)
			case *syntax.BinaryExpr:
				add(p.X)
			case *syntax.UnaryExpr:
				if p.X != nil {
					add(p.X)
				}
			}
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.AssignStmt:
			add(n.LHS)
		case *syntax.DefStmt:
			add(n.Name)
			params(n.Params)
		case *syntax.LambdaExpr:
			params(n.Params)
		case *syntax.ForStmt:
			add(n.Vars)
		case *syntax.ForClause:
			add(n.Vars)
		case *syntax.LoadStmt:
			for i, to := range n.To {
				out[keyOf(to.NamePos)] = true
				if n.From[i] == to {
					q := to.NamePos
					q.Col--
					out[keyOf(q)] = true
				}
			}
		}
		return true
	})
	return out
}
