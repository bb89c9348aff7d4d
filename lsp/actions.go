package lsp

import (
	"context"
	"fmt"
	"strconv"

	"go.lsp.dev/protocol"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib/analysis"
)

// codeActions answers textDocument/codeAction with the fixes the
// diagnostics in the range know: remove an unused load, add the load()
// of a @std symbol, replace a misspelled name, keyword or value with the
// nearest valid one.
func codeActions(ctx context.Context, s *server, r *request, p *protocol.CodeActionParams, d *document) (any, error) {
	good := r.snap.good(d)
	first, err := offsetOf(d.lines, d.text, p.Range.Start, r.snap.utf8)
	if err != nil {
		return nil, err
	}
	last, err := offsetOf(d.lines, d.text, p.Range.End, r.snap.utf8)
	if err != nil {
		return nil, err
	}
	f := analysis.Analyze(d.path, d.text, &analysis.Options{Extensions: s.opts.Extensions, ReadFile: r.snap.readFile, Lint: s.opts.Lint, Parsed: r.snap.current(d)})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out := []protocol.CodeAction{}
	for _, diag := range f.Diagnostics {
		start, end := d.lines.Offset(diag.Start), d.lines.Offset(diag.End)
		if end < first || start > last {
			continue
		}
		pd := toDiagnostics(d.lines, []analysis.Diagnostic{diag}, r.snap.utf8)
		action := func(title string, edits ...protocol.TextEdit) protocol.CodeAction {
			return protocol.CodeAction{
				Title: title, Kind: protocol.QuickFix, Diagnostics: pd, IsPreferred: len(out) == 0,
				Edit: &protocol.WorkspaceEdit{Changes: map[protocol.DocumentURI][]protocol.TextEdit{protocol.DocumentURI(d.uri): edits}},
			}
		}
		rng := protoRange(d.lines, diag.Start, diag.End, r.snap.utf8)
		if e := diag.Edit; e != nil {
			title := e.Description
			if title == "" {
				title = "Fix: " + diag.Message
			}
			out = append(out, action(title, protocol.TextEdit{
				Range:   protocol.Range{Start: offsetPos(d.lines, d.path, e.Start, r.snap.utf8), End: offsetPos(d.lines, d.path, e.End, r.snap.utf8)},
				NewText: e.Text,
			}))
		}
		if sug := diag.Suggestion; sug != "" {
			switch {
			case (diag.Code == analysis.CodeBadValue || diag.Code == analysis.CodeLoadSymbol) && start < len(d.text) && (d.text[start] == '"' || d.text[start] == '\''):
				q := strconv.Quote(sug)
				out = append(out, action(fmt.Sprintf("Replace with %s", q), protocol.TextEdit{Range: rng, NewText: q}))
			case diag.Code == analysis.CodeUndefined || diag.Code == analysis.CodeUnknownKeyword:
				out = append(out, action(fmt.Sprintf("Replace with %s", sug), protocol.TextEdit{Range: rng, NewText: sug}))
			}
		}
		if diag.Code == analysis.CodeUndefined {
			name := string(d.text[start:end])
			if m := analysis.ModuleForSymbol(name); m != "" {
				line := fmt.Sprintf("load(%q, %q)\n", m, name)
				at := loadInsertion(good)
				out = append(out, action(fmt.Sprintf("Add load(%q, %q)", m, name), protocol.TextEdit{Range: protocol.Range{Start: at, End: at}, NewText: line}))
			}
		}
	}
	return out, nil
}

// loadInsertion is where a new load() goes: after the last top-level
// load, else after the module docstring, else at the top.
func loadInsertion(good *analysis.File) protocol.Position {
	f := good
	if f == nil || f.Syntax == nil {
		return protocol.Position{}
	}
	line := int32(0)
	for i, st := range f.Syntax.Stmts {
		_, end := st.Span()
		switch st := st.(type) {
		case *syntax.LoadStmt:
			line = end.Line
		case *syntax.ExprStmt:
			if _, ok := st.X.(*syntax.Literal); ok && i == 0 {
				line = end.Line
			}
		}
	}
	return protocol.Position{Line: uint32(line)}
}
