package lsp

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

	"go.lsp.dev/protocol"
	"go.starlark.net/resolve"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// symbolKind returns the protocol kind of an analysis symbol.
func symbolKind(s analysis.Symbol) protocol.SymbolKind {
	if s.Kind == "function" {
		return protocol.SymbolKindFunction
	}
	return protocol.SymbolKindVariable
}

// documentSymbols answers textDocument/documentSymbol: the functions and
// top-level assignments, as a tree. A function (and a top-level
// assignment of one name) contains the nodes it builds: the calls of the
// node and resource builtins (agent(), sandbox(), ...), of component()
// and of the components the file makes with it or loads, nested as they are
// written, and the functions defined in it.
func documentSymbols(_ context.Context, s *server, r *request, p *protocol.DocumentSymbolParams, d *document) (any, error) {
	good := r.snap.good(d)
	lines := good.Lines()
	out := []protocol.DocumentSymbol{}
	b := &outline{lines: lines, utf8: r.snap.utf8, exts: s.opts.Extensions}
	if good.Syntax != nil {
		b.components = components(good.Syntax)
		b.loaded = loadedComponents(r.snap, good)
	}
	stmts := topStmts(good.Syntax)
	for _, sym := range analysis.Symbols(good) {
		ds := protocol.DocumentSymbol{
			Name:           sym.Name,
			Detail:         sym.Detail,
			Kind:           symbolKind(sym),
			Range:          protoRange(lines, sym.Range.Start, sym.Range.End, r.snap.utf8),
			SelectionRange: protoRange(lines, sym.NameRange.Start, sym.NameRange.End, r.snap.utf8),
		}
		if st := stmts[keyOf(sym.Range.Start)]; st != nil {
			switch st := st.(type) {
			case *syntax.DefStmt:
				ds.Children = b.within(stmtNodes(st.Body)...)
			case *syntax.AssignStmt:
				if _, one := st.LHS.(*syntax.Ident); one {
					ds.Children = b.within(st.RHS)
				}
			}
		}
		out = append(out, ds)
	}
	return out, nil
}

// topStmts returns the top-level statements of f by where they start:
// what a symbol's range starts with.
func topStmts(f *syntax.File) map[posKey]syntax.Stmt {
	out := map[posKey]syntax.Stmt{}
	if f == nil {
		return out
	}
	for _, st := range f.Stmts {
		start, _ := st.Span()
		out[keyOf(start)] = st
	}
	return out
}

// stmtNodes converts statements to nodes.
func stmtNodes(stmts []syntax.Stmt) []syntax.Node {
	out := make([]syntax.Node, len(stmts))
	for i, st := range stmts {
		out[i] = st
	}
	return out
}

// outline builds the children of the document's symbols.
type outline struct {
	lines      *analysis.Lines
	utf8       bool
	exts       []*starlib.Extension
	components map[string]bool
	// loaded are the names a load() binds to a component() of the file it
	// loads (the idents that bind them, which every use's binding names
	// as its first).
	loaded map[*syntax.Ident]bool
}

// within returns the symbols of the nodes built and functions defined in
// ns, each containing those within it.
func (o *outline) within(ns ...syntax.Node) []protocol.DocumentSymbol {
	var out []protocol.DocumentSymbol
	for _, n := range ns {
		if n == nil {
			continue
		}
		syntax.Walk(n, func(m syntax.Node) bool {
			switch m := m.(type) {
			case *syntax.DefStmt:
				start, end := nodeSpan(m)
				name, nameEnd := m.Name.Span()
				out = append(out, protocol.DocumentSymbol{
					Name:           m.Name.Name,
					Kind:           protocol.SymbolKindFunction,
					Range:          protoRange(o.lines, start, end, o.utf8),
					SelectionRange: protoRange(o.lines, name, nameEnd, o.utf8),
					Children:       o.within(stmtNodes(m.Body)...),
				})
				return false
			case *syntax.CallExpr:
				kind, detail, ok := o.nodeCall(m)
				if !ok {
					return true
				}
				start, end := m.Span()
				name, nameEnd := m.Fn.Span()
				args := make([]syntax.Node, 0, len(m.Args))
				for _, a := range m.Args {
					args = append(args, a)
				}
				out = append(out, protocol.DocumentSymbol{
					Name:           m.Fn.(*syntax.Ident).Name,
					Detail:         detail,
					Kind:           kind,
					Range:          protoRange(o.lines, start, end, o.utf8),
					SelectionRange: protoRange(o.lines, name, nameEnd, o.utf8),
					Children:       o.within(args...),
				})
				return false
			}
			return true
		})
	}
	return out
}

// nodeCall reports whether call builds a node the outline shows, with
// its symbol kind and detail: a call of a node builtin (an object) or a
// resource builtin (a namespace: it scopes what it contains), of
// component() (a class, detailed with the function it wraps) or of a
// component the file makes with it (an object whose detail is
// "component").
func (o *outline) nodeCall(call *syntax.CallExpr) (protocol.SymbolKind, string, bool) {
	id, ok := call.Fn.(*syntax.Ident)
	if !ok {
		return 0, "", false
	}
	b := bindingOf(id)
	if b == nil {
		return 0, "", false
	}
	if b.Scope == resolve.Global && o.components[id.Name] || b.First != nil && o.loaded[b.First] {
		return protocol.SymbolKindObject, "component", true
	}
	if b.Scope != resolve.Predeclared {
		return 0, "", false
	}
	bi, ok := starlib.Lookup(id.Name, o.exts...)
	if !ok {
		return 0, "", false
	}
	switch {
	case bi.Name == "component":
		if len(call.Args) > 0 {
			if fn, ok := call.Args[0].(*syntax.Ident); ok {
				return protocol.SymbolKindClass, fn.Name, true
			}
		}
		return protocol.SymbolKindClass, "", true
	case bi.Group == "nodes":
		return protocol.SymbolKindObject, callLabel(call), true
	case bi.Group == "resources":
		return protocol.SymbolKindNamespace, callLabel(call), true
	}
	return 0, "", false
}

// callLabel returns what names a node call: its name= argument when it
// is a string, else its first argument when that is a string.
func callLabel(call *syntax.CallExpr) string {
	for _, a := range call.Args {
		if be, ok := a.(*syntax.BinaryExpr); ok && be.Op == syntax.EQ {
			if k, ok := be.X.(*syntax.Ident); ok && k.Name == "name" {
				if lit, ok := be.Y.(*syntax.Literal); ok && lit.Token == syntax.STRING {
					return lit.Value.(string)
				}
			}
		}
	}
	if len(call.Args) > 0 {
		if a, ok := call.Args[0].(*syntax.Literal); ok && a.Token == syntax.STRING {
			return shortLabel(a.Value.(string))
		}
	}
	return ""
}

// shortLabel returns the first line of s, cut to 40 runes.
func shortLabel(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + "…"
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:39]) + "…"
	}
	return s
}

// components returns the globals of f assigned a call of the builtin
// component(): the names whose calls build component nodes.
func components(f *syntax.File) map[string]bool {
	out := map[string]bool{}
	for _, st := range f.Stmts {
		as, ok := st.(*syntax.AssignStmt)
		if !ok || as.Op != syntax.EQ {
			continue
		}
		id, ok := as.LHS.(*syntax.Ident)
		call, isCall := as.RHS.(*syntax.CallExpr)
		if !ok || !isCall {
			continue
		}
		if fn, ok := call.Fn.(*syntax.Ident); ok && fn.Name == "component" {
			if b := bindingOf(fn); b != nil && b.Scope == resolve.Predeclared {
				out[id.Name] = true
			}
		}
	}
	return out
}

// loadedComponents returns the names f's loads bind to a component the
// loaded file makes (as components() finds them); files that cannot be
// read or parsed contribute none.
func loadedComponents(sn *snapshot, f *analysis.File) map[*syntax.Ident]bool {
	out := map[*syntax.Ident]bool{}
	for _, st := range f.Syntax.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok || strings.HasPrefix(ld.ModuleName(), "@") {
			continue
		}
		lf := sn.File(filepath.Clean(starlib.ModuleFile(f.Path, ld.ModuleName())))
		if lf == nil || lf.Syntax == nil {
			continue
		}
		comps := components(lf.Syntax)
		for i, to := range ld.To {
			if comps[ld.From[i].Name] {
				out[to] = true
			}
		}
	}
	return out
}

// workspaceSymbols answers workspace/symbol over the open and indexed
// files: the symbols whose name contains the query (ignoring case).
func workspaceSymbols(ctx context.Context, _ *server, r *request, p *protocol.WorkspaceSymbolParams) (any, error) {
	query := strings.ToLower(p.Query)
	paths := map[string]bool{}
	for path := range r.snap.docs {
		paths[path] = true
	}
	for path := range r.snap.index {
		paths[path] = true
	}
	out := []protocol.SymbolInformation{}
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range paths {
			if !yield(p) {
				return
			}
		}
	}) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var syms []analysis.Symbol
		if e, ok := r.snap.index[path]; ok {
			syms = e.symbols
		} else {
			syms = analysis.Symbols(r.snap.File(path))
		}
		for _, sym := range syms {
			if !strings.Contains(strings.ToLower(sym.Name), query) {
				continue
			}
			loc, err := r.snap.location(sym.NameRange)
			if err != nil {
				continue
			}
			out = append(out, protocol.SymbolInformation{Name: sym.Name, Kind: symbolKind(sym), Location: loc, ContainerName: path})
		}
	}
	return out, nil
}
