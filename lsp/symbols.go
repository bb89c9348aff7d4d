package lsp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

func init() {
	requests[protocol.MethodTextDocumentDocumentSymbol] = documentSymbols
	requests[protocol.MethodWorkspaceSymbol] = workspaceSymbols
}

func symbolKind(s analysis.Symbol) protocol.SymbolKind {
	if s.Kind == "function" {
		return protocol.SymbolKindFunction
	}
	return protocol.SymbolKindVariable
}

// documentSymbols answers textDocument/documentSymbol: the functions and
// top-level assignments.
func documentSymbols(_ context.Context, _ *server, r *request, params json.RawMessage) (any, error) {
	var p protocol.DocumentSymbolParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	d, err := r.snap.document(p.TextDocument.URI)
	if err != nil {
		return nil, err
	}
	good := r.snap.good(d)
	lines := good.Lines()
	out := []protocol.DocumentSymbol{}
	for _, sym := range analysis.Symbols(good) {
		out = append(out, protocol.DocumentSymbol{
			Name:           sym.Name,
			Detail:         sym.Detail,
			Kind:           symbolKind(sym),
			Range:          protoRange(lines, sym.Range.Start, sym.Range.End, r.snap.utf8),
			SelectionRange: protoRange(lines, sym.NameRange.Start, sym.NameRange.End, r.snap.utf8),
		})
	}
	return out, nil
}

// workspaceSymbols answers workspace/symbol over the open and indexed
// files: the symbols whose name contains the query (ignoring case).
func workspaceSymbols(ctx context.Context, _ *server, r *request, params json.RawMessage) (any, error) {
	var p protocol.WorkspaceSymbolParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
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
