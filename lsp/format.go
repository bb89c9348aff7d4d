package lsp

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

func init() {
	requests[protocol.MethodTextDocumentFormatting] = formatting
	requests[protocol.MethodTextDocumentRangeFormatting] = rangeFormatting
}

// formatting answers textDocument/formatting through buildtools: the
// changed lines as edits (none when the document is formatted).
func formatting(_ context.Context, _ *server, r *request, params json.RawMessage) (any, error) {
	var p protocol.DocumentFormattingParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	d, err := r.snap.document(p.TextDocument.URI)
	if err != nil {
		return nil, err
	}
	return formatEdits(d, -1, -1, r.snap.utf8)
}

// rangeFormatting answers textDocument/rangeFormatting: the edits of the
// whole-document formatting that touch the range's lines.
func rangeFormatting(_ context.Context, _ *server, r *request, params json.RawMessage) (any, error) {
	var p protocol.DocumentRangeFormattingParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	d, err := r.snap.document(p.TextDocument.URI)
	if err != nil {
		return nil, err
	}
	if int(p.Range.Start.Line) >= d.lines.Count() {
		return nil, invalidParams("range %d:%d-%d:%d is outside the document, which has %d lines", p.Range.Start.Line, p.Range.Start.Character, p.Range.End.Line, p.Range.End.Character, d.lines.Count())
	}
	return formatEdits(d, int(p.Range.Start.Line), int(p.Range.End.Line), r.snap.utf8)
}

// formatEdits diffs the document against its formatting by lines and
// returns one edit per changed block; with first >= 0, only the blocks
// that overlap lines [first, last] (0-based).
func formatEdits(d *document, first, last int, utf8Units bool) ([]protocol.TextEdit, error) {
	out, err := analysis.Format(d.path, d.text)
	if err != nil {
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "cannot format: "+err.Error())
	}
	a := splitLines(string(d.text))
	b := splitLines(string(out))
	edits := []protocol.TextEdit{}
	m := difflib.NewMatcherWithJunk(a, b, false, nil)
	for _, op := range m.GetOpCodes() {
		if op.Tag == 'e' {
			continue
		}
		if first >= 0 && (op.I2 <= first && op.I1 != op.I2 || op.I1 > last) {
			continue
		}
		start, end := linePos(d, a, op.I1, utf8Units), linePos(d, a, op.I2, utf8Units)
		edits = append(edits, protocol.TextEdit{Range: protocol.Range{Start: start, End: end}, NewText: strings.Join(b[op.J1:op.J2], "")})
	}
	return edits, nil
}

// linePos is the start of line i of lines, or the end of the document
// for i == len(lines).
func linePos(d *document, lines []string, i int, utf8Units bool) protocol.Position {
	if i < len(lines) {
		return protocol.Position{Line: uint32(i)}
	}
	return offsetPos(d.lines, d.path, len(d.text), utf8Units)
}

// splitLines splits s into lines that keep their "\n".
func splitLines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
