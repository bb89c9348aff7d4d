package lsp

import (
	"context"
	"fmt"

	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

var completionKinds = map[string]protocol.CompletionItemKind{
	analysis.KindFunction: protocol.CompletionItemKindFunction,
	analysis.KindKeyword:  protocol.CompletionItemKindProperty,
	analysis.KindValue:    protocol.CompletionItemKindEnumMember,
	analysis.KindVariable: protocol.CompletionItemKindVariable,
	analysis.KindModule:   protocol.CompletionItemKindModule,
	analysis.KindFile:     protocol.CompletionItemKindFile,
	analysis.KindField:    protocol.CompletionItemKindField,
	analysis.KindLanguage: protocol.CompletionItemKindKeyword,
}

// completion answers textDocument/completion from the current text
// (which need not parse) and the last good parse.
func completion(_ context.Context, s *server, r *request, p *protocol.CompletionParams, d *document) (any, error) {
	good := r.snap.good(d)
	off, err := offsetOf(d.lines, d.text, p.Position, r.snap.utf8)
	if err != nil {
		return nil, err
	}
	items, start := s.queryOver(r.snap).Complete(d.path, good, d.text, off)
	rng := protocol.Range{Start: offsetPos(d.lines, d.path, start, r.snap.utf8), End: p.Position}
	empty := rng.Start == rng.End
	out := make([]protocol.CompletionItem, 0, len(items))
	for i, it := range items {
		insert := it.Insert
		if insert == "" {
			insert = it.Label
		}
		ci := protocol.CompletionItem{
			Label:    it.Label,
			Kind:     completionKinds[it.Kind],
			Detail:   it.Detail,
			SortText: fmt.Sprintf("%05d", i),
		}
		switch {
		case !empty:
			ci.TextEdit = &protocol.TextEdit{Range: rng, NewText: insert}
		case insert != it.Label:
			// Nothing typed to replace: inserting at the cursor is the
			// same edit, and the list is far shorter without ranges.
			ci.InsertText = insert
		}
		if it.Doc != "" {
			ci.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: it.Doc}
		}
		out = append(out, ci)
	}
	return &protocol.CompletionList{IsIncomplete: false, Items: out}, nil
}
