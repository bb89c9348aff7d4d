package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// definition answers textDocument/definition, across load().
func definition(_ context.Context, s *server, r *request, p *protocol.DefinitionParams) (any, error) {
	_, good, pos, err := r.at(p.TextDocument.URI, p.Position)
	if err != nil {
		return nil, err
	}
	out := []protocol.Location{}
	for _, l := range s.queryOver(r.snap).Definition(good, pos) {
		if loc, err := r.snap.location(l); err == nil {
			out = append(out, loc)
		}
	}
	return out, nil
}
