package lsp

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.uber.org/goleak"
)

func errorCode(err error) jsonrpc2.Code {
	var e *jsonrpc2.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestLifecycle drives a whole session: requests before initialize,
// the handshake, open and incremental changes with their diagnostics, a
// request, a cancelled request, shutdown, a request after it, exit; and
// no goroutine outlives the server.
func TestLifecycle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := writeFiles(t, map[string]string{"lib.star": "def helper():\n    return \"x\"\n"})
	c := startClient(t, Options{Version: "test"})

	// Before initialize: a clear error, and notifications are dropped.
	err := c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{}, nil)
	if errorCode(err) != -32002 || !strings.Contains(err.Error(), "send initialize first") {
		t.Fatalf("hover before initialize: %v, want ServerNotInitialized", err)
	}

	res := c.initialize(dir, false)
	caps, _ := res["capabilities"].(map[string]any)
	for _, k := range []string{"hoverProvider", "completionProvider", "signatureHelpProvider", "definitionProvider", "referencesProvider",
		"documentSymbolProvider", "workspaceSymbolProvider", "renameProvider", "documentFormattingProvider", "documentRangeFormattingProvider", "codeActionProvider"} {
		if caps[k] == nil {
			t.Errorf("capability %s missing: %v", k, caps)
		}
	}
	if caps["positionEncoding"] != "utf-16" {
		t.Errorf("positionEncoding = %v, want utf-16 for a client that offers nothing", caps["positionEncoding"])
	}
	if err := c.call(protocol.MethodInitialize, map[string]any{"capabilities": map[string]any{}}, nil); err == nil {
		t.Errorf("a second initialize succeeded")
	}

	path := filepath.Join(dir, "main.star")
	text := "load(\"lib.star\", \"helper\")\n\ndef main():\n    return agent(helper(), sandbox(acess = \"read-only\"), provider = deterministic_agent())\n"
	u := c.open(path, text)
	diags := c.diagnostics(u, 1)
	if len(diags) != 1 || diags[0].Code != "unknown-keyword" {
		t.Fatalf("diagnostics = %+v, want the unknown keyword", diags)
	}
	if r := diags[0].Range; r.Start.Line != 3 || r.Start.Character != 35 || r.End.Character != 40 {
		t.Errorf("range = %+v, want 3:35-3:40 (the keyword)", r)
	}

	// An incremental change fixes the keyword and breaks the value.
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument": map[string]any{"uri": u, "version": 2},
		"contentChanges": []map[string]any{
			{"range": protocol.Range{Start: protocol.Position{Line: 3, Character: 35}, End: protocol.Position{Line: 3, Character: 40}}, "text": "access"},
			{"range": protocol.Range{Start: protocol.Position{Line: 3, Character: 45}, End: protocol.Position{Line: 3, Character: 54}}, "text": "rw"},
		},
	})
	diags = c.diagnostics(u, 2)
	if len(diags) != 1 || diags[0].Code != "bad-value" || !strings.Contains(diags[0].Message, `access must be "read-only" or "read-write", got "rw"`) {
		t.Fatalf("diagnostics after the change = %+v", diags)
	}

	var h protocol.Hover
	c.mustCall(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: protocol.Position{Line: 3, Character: 18}}}, &h)
	if !strings.Contains(h.Contents.Value, "def helper()") || !strings.Contains(h.Contents.Value, "lib.star:1") {
		t.Errorf("hover over helper = %q", h.Contents.Value)
	}

	// Positions outside the document get a clear error.
	err = c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: protocol.Position{Line: 99}}}, nil)
	if errorCode(err) != jsonrpc2.InvalidParams || !strings.Contains(err.Error(), "outside the document") {
		t.Errorf("hover outside the document: %v", err)
	}

	// A request held up is cancelled by $/cancelRequest.
	started := make(chan string, 1)
	testHookRequest = func(ctx context.Context, method, id string) {
		if method == protocol.MethodTextDocumentCompletion {
			started <- id
			<-ctx.Done()
		}
	}
	defer func() { testHookRequest = nil }()
	errc := make(chan error, 1)
	go func() {
		errc <- c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
			TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: protocol.Position{Line: 3, Character: 4}}}, nil)
	}()
	id := <-started
	n, _ := strconv.Atoi(id)
	c.notify("$/cancelRequest", map[string]any{"id": n})
	select {
	case err := <-errc:
		if errorCode(err) != protocol.CodeRequestCancelled {
			t.Errorf("cancelled completion: %v, want RequestCancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled request never answered")
	}
	testHookRequest = nil

	c.mustCall(protocol.MethodShutdown, nil, nil)
	if err := c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{}, nil); errorCode(err) != jsonrpc2.InvalidRequest {
		t.Errorf("hover after shutdown: %v, want InvalidRequest", err)
	}
	c.notify(protocol.MethodExit, nil)
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("Serve after shutdown and exit: %v", err)
		}
		c.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end after exit")
	}
	_ = c.conn.Close()
	<-c.conn.Done()
}
