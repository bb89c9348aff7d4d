package lsp

import (
	"context"

	"go.lsp.dev/protocol"
	"go.starlark.net/resolve"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// inlayHint is an LSP 3.17 inlay hint (the protocol package predates
// them).
type inlayHint struct {
	Position     protocol.Position `json:"position"`
	Label        string            `json:"label"`
	Kind         int               `json:"kind"` // 2: parameter
	PaddingRight bool              `json:"paddingRight"`
}

// inlayHints answers textDocument/inlayHint: before each positional
// argument of a builtin call in the range, the name of the parameter it
// fills ("value:"); none for the children a builtin collects (agent()'s
// prompt parts), nor for an argument that is a name equal to the
// parameter's. While the text does not parse there are none: the last
// good parse's positions would be off.
func inlayHints(_ context.Context, s *server, r *request, p *documentRangeParams, d *document) (any, error) {
	return parameterHints(r.snap.current(d), s.opts.Extensions, int32(p.Range.Start.Line)+1, int32(p.Range.End.Line)+1, r.snap.utf8), nil
}

// parameterHints returns the parameter-name hints of f's builtin calls
// whose positional arguments start on lines [first, last].
func parameterHints(f *analysis.File, exts []*starlib.Extension, first, last int32, utf8Units bool) []inlayHint {
	out := []inlayHint{}
	if f == nil || f.Syntax == nil {
		return out
	}
	lines := f.Lines()
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		id, ok := call.Fn.(*syntax.Ident)
		if !ok {
			return true
		}
		if b, ok := id.Binding.(*resolve.Binding); !ok || b.Scope != resolve.Predeclared {
			return true // a name the file binds is not the builtin
		}
		bi, ok := starlib.Lookup(id.Name, exts...)
		if !ok {
			return true
		}
		var positional []string
		for _, prm := range bi.Params {
			if prm.Variadic || !prm.Positional {
				break
			}
			positional = append(positional, prm.Name)
		}
		i := 0
		for _, arg := range call.Args {
			if be, ok := arg.(*syntax.BinaryExpr); ok && be.Op == syntax.EQ {
				continue
			}
			if u, ok := arg.(*syntax.UnaryExpr); ok && (u.Op == syntax.STAR || u.Op == syntax.STARSTAR) {
				break // the positions after a spread are not known
			}
			if i >= len(positional) {
				break
			}
			name := positional[i]
			i++
			if a, ok := arg.(*syntax.Ident); ok && a.Name == name {
				continue
			}
			start, _ := arg.Span()
			if start.Line < first || start.Line > last {
				continue
			}
			out = append(out, inlayHint{Position: protoPos(lines, start, utf8Units), Label: name + ":", Kind: 2, PaddingRight: true})
		}
		return true
	})
	return out
}
