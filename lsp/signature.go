package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// signatureHelp answers textDocument/signatureHelp with the active
// parameter, positional or keyword.
func signatureHelp(_ context.Context, s *server, r *request, p *protocol.SignatureHelpParams, d *document) (any, error) {
	good := r.snap.good(d)
	off, err := offsetOf(d.lines, d.text, p.Position, r.snap.utf8)
	if err != nil {
		return nil, err
	}
	h := s.queryOver(r.snap).Signature(good, d.text, off)
	if h == nil {
		return nil, nil
	}
	info := protocol.SignatureInformation{Label: h.Label}
	if h.Doc != "" {
		info.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: h.Doc}
	}
	for i, label := range h.Params {
		pi := protocol.ParameterInformation{Label: label}
		if i < len(h.ParamDocs) && h.ParamDocs[i] != "" {
			pi.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: h.ParamDocs[i]}
		}
		info.Parameters = append(info.Parameters, pi)
	}
	active := uint32(len(h.Params)) // out of range: no parameter is active
	if h.Active >= 0 {
		active = uint32(h.Active)
	}
	info.ActiveParameter = active
	return &protocol.SignatureHelp{Signatures: []protocol.SignatureInformation{info}, ActiveParameter: active}, nil
}
