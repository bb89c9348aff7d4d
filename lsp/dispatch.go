package lsp

import (
	"context"
	"encoding/json"

	"go.lsp.dev/protocol"
)

// The methods the protocol package names no constant for.
const (
	methodInlayHint           = "textDocument/inlayHint"
	methodSelectionRange      = "textDocument/selectionRange"
	methodSemanticTokensFull  = "textDocument/semanticTokens/full"
	methodSemanticTokensRange = "textDocument/semanticTokens/range"
)

// requests are the request handlers by method.
var requests = map[string]handler{
	protocol.MethodTextDocumentHover:             typed(hover),
	protocol.MethodTextDocumentDefinition:        typed(definition),
	protocol.MethodTextDocumentReferences:        typed(references),
	protocol.MethodTextDocumentDocumentHighlight: typed(documentHighlight),
	protocol.MethodTextDocumentPrepareRename:     typed(prepareRename),
	protocol.MethodTextDocumentRename:            typed(rename),
	protocol.MethodWorkspaceSymbol:               typed(workspaceSymbols),

	protocol.MethodTextDocumentFoldingRange: withDocument(foldingRange, documentURI),
	methodSemanticTokensFull:                withDocument(semanticTokensFull, documentURI),
	methodSemanticTokensRange:               withDocument(semanticTokensRange, documentRangeURI),
	methodInlayHint:                         withDocument(inlayHints, documentRangeURI),

	protocol.MethodTextDocumentCompletion: withDocument(completion,
		func(p *protocol.CompletionParams) protocol.DocumentURI { return p.TextDocument.URI }),
	protocol.MethodTextDocumentSignatureHelp: withDocument(signatureHelp,
		func(p *protocol.SignatureHelpParams) protocol.DocumentURI { return p.TextDocument.URI }),
	protocol.MethodTextDocumentDocumentSymbol: withDocument(documentSymbols,
		func(p *protocol.DocumentSymbolParams) protocol.DocumentURI { return p.TextDocument.URI }),
	methodSelectionRange: withDocument(selectionRange,
		func(p *protocol.SelectionRangeParams) protocol.DocumentURI { return p.TextDocument.URI }),
	protocol.MethodTextDocumentFormatting: withDocument(formatting,
		func(p *protocol.DocumentFormattingParams) protocol.DocumentURI { return p.TextDocument.URI }),
	protocol.MethodTextDocumentRangeFormatting: withDocument(rangeFormatting,
		func(p *protocol.DocumentRangeFormattingParams) protocol.DocumentURI { return p.TextDocument.URI }),
	protocol.MethodTextDocumentCodeAction: withDocument(codeActions,
		func(p *protocol.CodeActionParams) protocol.DocumentURI { return p.TextDocument.URI }),
}

// serverCapabilities are the capabilities of the document
// synchronization and of the requests above, as the protocol package's
// types say them; capabilities adds the rest.
var serverCapabilities = protocol.ServerCapabilities{
	TextDocumentSync: &protocol.TextDocumentSyncOptions{
		OpenClose: true,
		Change:    protocol.TextDocumentSyncKindIncremental,
		Save:      &protocol.SaveOptions{},
	},
	HoverProvider: true,
	CompletionProvider: &protocol.CompletionOptions{
		TriggerCharacters: []string{".", "\"", "/", "@", "="},
	},
	SignatureHelpProvider: &protocol.SignatureHelpOptions{
		TriggerCharacters:   []string{"(", ","},
		RetriggerCharacters: []string{"="},
	},
	DefinitionProvider:              true,
	ReferencesProvider:              true,
	DocumentSymbolProvider:          true,
	WorkspaceSymbolProvider:         true,
	RenameProvider:                  &protocol.RenameOptions{PrepareProvider: true},
	DocumentFormattingProvider:      true,
	DocumentRangeFormattingProvider: true,
	CodeActionProvider:              &protocol.CodeActionOptions{CodeActionKinds: []protocol.CodeActionKind{protocol.QuickFix}},
}

// capabilities are the server capabilities of the remaining requests,
// by their JSON name in ServerCapabilities (a feature newer than the
// protocol package's types declares its own value), which initialize
// adds to those of serverCapabilities.
var capabilities = map[string]any{
	"documentHighlightProvider": true,
	"foldingRangeProvider":      true,
	"selectionRangeProvider":    true,
	"semanticTokensProvider": map[string]any{
		"legend": map[string]any{"tokenTypes": tokenTypes, "tokenModifiers": tokenModifiers},
		"full":   true,
		"range":  true,
	},
	"inlayHintProvider": true,
}

// typed makes a handler of f: it decodes the request's params into a P,
// failing with decode's error, and calls f with them. Neither it nor the
// handler it returns holds any state, so the handler may run for any
// number of requests at once.
func typed[P any](f func(ctx context.Context, s *server, r *request, p *P) (any, error)) handler {
	return func(ctx context.Context, s *server, r *request, params json.RawMessage) (any, error) {
		var p P
		if err := decode(params, &p); err != nil {
			return nil, err
		}
		return f(ctx, s, r, &p)
	}
}

// withDocument makes a handler of f as typed does, and also looks up
// the open document whose URI uri returns from the params, failing as
// snapshot.document does when it is not open. It holds no state either.
func withDocument[P any](f func(ctx context.Context, s *server, r *request, p *P, d *document) (any, error), uri func(p *P) protocol.DocumentURI) handler {
	return typed(func(ctx context.Context, s *server, r *request, p *P) (any, error) {
		d, err := r.snap.document(uri(p))
		if err != nil {
			return nil, err
		}
		return f(ctx, s, r, p, d)
	})
}

// documentParams are the params of a request about a whole document
// (textDocument/foldingRange, textDocument/semanticTokens/full). The
// type is an alias of an unnamed struct, which decode's errors spell
// out.
type documentParams = struct {
	TextDocument protocol.TextDocumentIdentifier `json:"textDocument"`
}

// documentRangeParams are the params of a request about a range of a
// document (textDocument/semanticTokens/range, textDocument/inlayHint),
// an alias like documentParams.
type documentRangeParams = struct {
	TextDocument protocol.TextDocumentIdentifier `json:"textDocument"`
	Range        protocol.Range                  `json:"range"`
}

// documentURI and documentRangeURI are the URIs of the document the
// params are about.
func documentURI(p *documentParams) protocol.DocumentURI { return p.TextDocument.URI }

func documentRangeURI(p *documentRangeParams) protocol.DocumentURI { return p.TextDocument.URI }
