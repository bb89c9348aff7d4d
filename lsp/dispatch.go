package lsp

import "go.lsp.dev/protocol"

// The methods the protocol package names no constant for.
const (
	methodInlayHint           = "textDocument/inlayHint"
	methodSelectionRange      = "textDocument/selectionRange"
	methodSemanticTokensFull  = "textDocument/semanticTokens/full"
	methodSemanticTokensRange = "textDocument/semanticTokens/range"
)

// requests are the request handlers by method, one per feature file's
// request.
var requests = map[string]handler{
	protocol.MethodTextDocumentHover:             hover,
	protocol.MethodTextDocumentCompletion:        completion,
	protocol.MethodTextDocumentSignatureHelp:     signatureHelp,
	protocol.MethodTextDocumentDefinition:        definition,
	protocol.MethodTextDocumentReferences:        references,
	protocol.MethodTextDocumentDocumentHighlight: documentHighlight,
	protocol.MethodTextDocumentDocumentSymbol:    documentSymbols,
	protocol.MethodWorkspaceSymbol:               workspaceSymbols,
	protocol.MethodTextDocumentFoldingRange:      foldingRange,
	methodSelectionRange:                         selectionRange,
	methodSemanticTokensFull:                     semanticTokensFull,
	methodSemanticTokensRange:                    semanticTokensRange,
	methodInlayHint:                              inlayHints,
	protocol.MethodTextDocumentPrepareRename:     prepareRename,
	protocol.MethodTextDocumentRename:            rename,
	protocol.MethodTextDocumentFormatting:        formatting,
	protocol.MethodTextDocumentRangeFormatting:   rangeFormatting,
	protocol.MethodTextDocumentCodeAction:        codeActions,
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
// protocol package's types declares its own value). They are merged
// into serverCapabilities.
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
