package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// references answers textDocument/references: the symbol's uses in its
// file and in the files that load it.
func references(_ context.Context, s *server, r *request, p *protocol.ReferenceParams) (any, error) {
	_, good, pos, err := r.at(p.TextDocument.URI, p.Position)
	if err != nil {
		return nil, err
	}
	out := []protocol.Location{}
	for _, l := range s.queryOver(r.snap).References(good, pos, p.Context.IncludeDeclaration) {
		if loc, err := r.snap.location(l); err == nil {
			out = append(out, loc)
		}
	}
	return out, nil
}
