package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// hover answers textDocument/hover: the builtin reference, a function's
// signature and docstring, a constant's value.
func hover(_ context.Context, s *server, r *request, p *protocol.HoverParams) (any, error) {
	_, good, pos, err := r.at(p.TextDocument.URI, p.Position)
	if err != nil {
		return nil, err
	}
	h := s.queryOver(r.snap).Hover(good, pos)
	if h == nil {
		return nil, nil
	}
	rng := protoRange(good.Lines(), h.Range.Start, h.Range.End, r.snap.utf8)
	return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: h.Markdown}, Range: &rng}, nil
}
