package lsp

import (
	"context"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// prepareRename answers whether the name under the cursor can be renamed,
// with its range.
func prepareRename(_ context.Context, s *server, r *request, p *protocol.PrepareRenameParams) (any, error) {
	d, good, pos, err := r.at(p.TextDocument.URI, p.Position)
	if err != nil {
		return nil, err
	}
	q := s.queryOver(r.snap)
	edits, err := q.Rename(good, pos, "renamed")
	if err != nil {
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, err.Error())
	}
	for _, e := range edits {
		if e.Path == d.path && !before(pos, e.Start) && !before(e.End, pos) {
			rng := protoRange(good.Lines(), e.Start, e.End, r.snap.utf8)
			return &rng, nil
		}
	}
	return nil, nil
}

// rename answers textDocument/rename: the edits in the symbol's file and
// in the files that load it.
func rename(_ context.Context, s *server, r *request, p *protocol.RenameParams) (any, error) {
	_, good, pos, err := r.at(p.TextDocument.URI, p.Position)
	if err != nil {
		return nil, err
	}
	edits, err := s.queryOver(r.snap).Rename(good, pos, p.NewName)
	if err != nil {
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, err.Error())
	}
	changes := map[protocol.DocumentURI][]protocol.TextEdit{}
	for _, e := range edits {
		loc, err := r.snap.location(e.Location)
		if err != nil {
			continue
		}
		changes[loc.URI] = append(changes[loc.URI], protocol.TextEdit{Range: loc.Range, NewText: e.Text})
	}
	return &protocol.WorkspaceEdit{Changes: changes}, nil
}
