package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.lsp.dev/protocol"
)

// TestInitializeResult pins the initialize result, capabilities and
// server info, for both position encodings.
func TestInitializeResult(t *testing.T) {
	const want = `{"capabilities":{"codeActionProvider":{"codeActionKinds":["quickfix"]},"completionProvider":{"triggerCharacters":[".","\"","/","@","="]},"definitionProvider":true,"documentFormattingProvider":true,"documentHighlightProvider":true,"documentRangeFormattingProvider":true,"documentSymbolProvider":true,"foldingRangeProvider":true,"hoverProvider":true,"inlayHintProvider":true,"positionEncoding":"ENCODING","referencesProvider":true,"renameProvider":{"prepareProvider":true},"selectionRangeProvider":true,"semanticTokensProvider":{"full":true,"legend":{"tokenModifiers":["defaultLibrary","definition"],"tokenTypes":["keyword","string","number","comment","function","parameter","variable","property"]},"range":true},"signatureHelpProvider":{"retriggerCharacters":["="],"triggerCharacters":["(",","]},"textDocumentSync":{"change":2,"openClose":true,"save":{}},"workspaceSymbolProvider":true},"serverInfo":{"name":"aml","version":"v1.2.3"}}`
	for _, encoding := range []string{"utf-16", "utf-8"} {
		c := startClient(t, Options{Version: "v1.2.3"})
		params := map[string]any{"processId": 1, "capabilities": map[string]any{}}
		if encoding == "utf-8" {
			params["capabilities"] = map[string]any{"general": map[string]any{"positionEncodings": []string{"utf-8", "utf-16"}}}
		}
		var res json.RawMessage
		c.mustCall(protocol.MethodInitialize, params, &res)
		if w := strings.ReplaceAll(want, "ENCODING", encoding); string(res) != w {
			t.Errorf("%s: initialize =\n%s\nwant\n%s", encoding, res, w)
		}
	}
}

// TestRequestPreambles pins, for every request method, the result and
// error of params that are missing, of the wrong shape, with a field of
// the wrong type, and naming a document that is not open.
func TestRequestPreambles(t *testing.T) {
	params := []string{
		"",
		`[]`,
		`{"textDocument":5,"query":5}`,
		`{"textDocument":{"uri":"file:///nowhere/x.star"},"position":{"line":0,"character":0},"range":{"start":{"line":0,"character":0},"end":{"line":0,"character":0}},"positions":[{"line":0,"character":0}],"query":"","newName":"y","context":{"includeDeclaration":true}}`,
	}
	want := map[string][]string{
		"textDocument/codeAction": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.CodeActionParams",
			"null malformed params: json: cannot unmarshal number into Go struct field CodeActionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/completion": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.CompletionParams",
			"null malformed params: json: cannot unmarshal number into Go struct field CompletionParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/definition": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.DefinitionParams",
			"null malformed params: json: cannot unmarshal number into Go struct field DefinitionParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/documentHighlight": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.DocumentHighlightParams",
			"null malformed params: json: cannot unmarshal number into Go struct field DocumentHighlightParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/documentSymbol": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.DocumentSymbolParams",
			"null malformed params: json: cannot unmarshal number into Go struct field DocumentSymbolParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/foldingRange": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type struct { TextDocument protocol.TextDocumentIdentifier \"json:\\\"textDocument\\\"\" }",
			"null malformed params: json: cannot unmarshal number into Go struct field .textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/formatting": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.DocumentFormattingParams",
			"null malformed params: json: cannot unmarshal number into Go struct field DocumentFormattingParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/hover": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.HoverParams",
			"null malformed params: json: cannot unmarshal number into Go struct field HoverParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/inlayHint": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type struct { TextDocument protocol.TextDocumentIdentifier \"json:\\\"textDocument\\\"\"; Range protocol.Range \"json:\\\"range\\\"\" }",
			"null malformed params: json: cannot unmarshal number into Go struct field .textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/prepareRename": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.PrepareRenameParams",
			"null malformed params: json: cannot unmarshal number into Go struct field PrepareRenameParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/rangeFormatting": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.DocumentRangeFormattingParams",
			"null malformed params: json: cannot unmarshal number into Go struct field DocumentRangeFormattingParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/references": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.ReferenceParams",
			"null malformed params: json: cannot unmarshal number into Go struct field ReferenceParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/rename": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.RenameParams",
			"null malformed params: json: cannot unmarshal number into Go struct field RenameParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/selectionRange": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.SelectionRangeParams",
			"null malformed params: json: cannot unmarshal number into Go struct field SelectionRangeParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/semanticTokens/full": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type struct { TextDocument protocol.TextDocumentIdentifier \"json:\\\"textDocument\\\"\" }",
			"null malformed params: json: cannot unmarshal number into Go struct field .textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/semanticTokens/range": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type struct { TextDocument protocol.TextDocumentIdentifier \"json:\\\"textDocument\\\"\"; Range protocol.Range \"json:\\\"range\\\"\" }",
			"null malformed params: json: cannot unmarshal number into Go struct field .textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"textDocument/signatureHelp": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.SignatureHelpParams",
			"null malformed params: json: cannot unmarshal number into Go struct field SignatureHelpParams.TextDocumentPositionParams.textDocument of type protocol.TextDocumentIdentifier",
			"null file:///nowhere/x.star is not open: send textDocument/didOpen first",
		},
		"workspace/symbol": {
			"null missing params",
			"null malformed params: json: cannot unmarshal array into Go value of type protocol.WorkspaceSymbolParams",
			"null malformed params: json: cannot unmarshal number into Go struct field WorkspaceSymbolParams.query of type string",
			"[] <nil>",
		},
	}
	var methods []string
	for m := range requests {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	var wantMethods []string
	for m := range want {
		wantMethods = append(wantMethods, m)
	}
	slices.Sort(wantMethods)
	if !slices.Equal(methods, wantMethods) {
		t.Errorf("request methods = %q, want %q", methods, wantMethods)
	}
	s := newServer(Options{})
	for _, m := range methods {
		for i, raw := range params {
			res, err := requests[m](context.Background(), s, &request{snap: s.snapshot()}, json.RawMessage(raw))
			b, _ := json.Marshal(res)
			if got := fmt.Sprintf("%s %v", b, err); i < len(want[m]) && got != want[m][i] {
				t.Errorf("%s with params %q: %s, want %s", m, raw, got, want[m][i])
			}
		}
	}
}
