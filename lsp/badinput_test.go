package lsp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/sizetest"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

func hoverAt(c *client, u protocol.DocumentURI, line, char uint32) (*protocol.Hover, error) {
	var h *protocol.Hover
	err := c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: protocol.Position{Line: line, Character: char}}}, &h)
	return h, err
}

func change(c *client, u protocol.DocumentURI, version int32, text string) {
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument":   map[string]any{"uri": u, "version": version},
		"contentChanges": []map[string]any{{"text": text}},
	})
}

func codes(ds []protocol.Diagnostic) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Code.(string))
	}
	return strings.Join(out, ",")
}

// TestBadInput: broken, cyclic, missing and deleted inputs and
// malformed messages each get a diagnostic or an error, and the session
// goes on.
func TestBadInput(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"lib.star":    "def helper():\n    return \"x\"\n",
		"loop_a.star": "load(\"loop_b.star\", \"b\")\na = b\n",
		"loop_b.star": "load(\"loop_a.star\", \"a\")\nb = \"x\"\n",
		"sub/x.star":  "x = 1\n",
	})
	c := startClient(t, Options{})
	c.initialize(dir, false)

	// A syntax error keeps the last good parse for symbols and hover.
	path := filepath.Join(dir, "main.star")
	good := "load(\"lib.star\", \"helper\")\n\ndef main():\n    return agent(helper(), provider = deterministic_agent())\n"
	u := c.open(path, good)
	if got := codes(c.diagnostics(u, 1)); got != "" {
		t.Fatalf("diagnostics of the good text: %s", got)
	}
	change(c, u, 2, good+"def broken(:\n")
	if got := codes(c.diagnostics(u, 2)); got != "syntax" {
		t.Fatalf("diagnostics of the broken text: %s, want syntax", got)
	}
	var syms []protocol.DocumentSymbol
	c.mustCall(protocol.MethodTextDocumentDocumentSymbol, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &syms)
	if len(syms) != 1 || syms[0].Name != "main" {
		t.Errorf("symbols while the text does not parse: %+v, want main from the last good parse", syms)
	}
	if h, err := hoverAt(c, u, 3, 18); err != nil || h == nil || !strings.Contains(h.Contents.Value, "def helper()") {
		t.Errorf("hover while the text does not parse: %v, %v", h, err)
	}
	// Formatting a text that does not parse is refused with the reason.
	err := c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot format") {
		t.Errorf("formatting a broken text: %v", err)
	}

	// A load cycle, a directory, a missing file.
	change(c, u, 3, "load(\"loop_a.star\", \"a\")\nload(\"sub\", \"x\")\nload(\"gone.star\", \"g\")\n\ndef main():\n    return [a, x, g]\n")
	diags := c.diagnostics(u, 3)
	if got := codes(diags); got != "load-cycle,load-directory,load-missing" {
		t.Errorf("diagnostics = %s (%+v)", got, diags)
	}

	// A file deleted while open: the document still answers, and the
	// files that load it see it as missing once it closes.
	libURI := c.open(filepath.Join(dir, "lib.star"), "def helper():\n    return \"x\"\n")
	c.diagnostics(libURI, 1)
	if err := os.Remove(filepath.Join(dir, "lib.star")); err != nil {
		t.Fatal(err)
	}
	c.notify(protocol.MethodWorkspaceDidChangeWatchedFiles, &protocol.DidChangeWatchedFilesParams{Changes: []*protocol.FileEvent{{URI: libURI, Type: protocol.FileChangeTypeDeleted}}})
	if h, err := hoverAt(c, libURI, 0, 5); err != nil || h == nil {
		t.Errorf("hover in a deleted open file: %v, %v", h, err)
	}
	change(c, u, 4, good)
	if got := codes(c.diagnostics(u, 4)); got != "" {
		t.Errorf("loading an open document whose file is gone: %s, want nothing (the document stands for it)", got)
	}
	c.notify(protocol.MethodTextDocumentDidClose, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: libURI}})
	change(c, u, 5, good+"\n")
	if got := codes(c.diagnostics(u, 5)); got != "load-missing" {
		t.Errorf("after the deleted file closed: %s, want load-missing", got)
	}

	// Requests about documents that are not open, malformed parameters,
	// unknown methods: errors, and the server goes on.
	if _, err := hoverAt(c, fileURI(filepath.Join(dir, "nosuch.star")), 0, 0); errorCode(err) != jsonrpc2.InvalidParams || !strings.Contains(err.Error(), "is not open") {
		t.Errorf("hover of a document that is not open: %v", err)
	}
	if err := c.call(protocol.MethodTextDocumentHover, json.RawMessage(`{"textDocument": 7}`), nil); errorCode(err) != jsonrpc2.InvalidParams {
		t.Errorf("malformed params: %v", err)
	}
	if err := c.call("textDocument/nosuch", map[string]any{}, nil); errorCode(err) != jsonrpc2.MethodNotFound {
		t.Errorf("unknown method: %v", err)
	}
	c.notify(protocol.MethodTextDocumentDidChange, json.RawMessage(`{"textDocument": {"uri": 1}}`))
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument":   map[string]any{"uri": u, "version": 6},
		"contentChanges": []map[string]any{{"range": protocol.Range{Start: protocol.Position{Line: 900}}, "text": "x"}},
	})
	if h, err := hoverAt(c, u, 3, 12); err != nil || h == nil {
		t.Errorf("hover after bad notifications: %v, %v", h, err)
	}
	c.shutdown()
}

// TestEnormousDocument: a 10 MB document is checked and answers, and the
// session goes on. A size test: under -race its check takes minutes
// (the server's concurrency is raced by the other tests here).
func TestEnormousDocument(t *testing.T) {
	sizetest.SkipUnderRace(t)
	dir := writeFiles(t, map[string]string{"small.star": "def main():\n    return \"x\"\n"})
	c := startClient(t, Options{})
	c.initialize(dir, false)
	var big strings.Builder
	big.WriteString("def main():\n    return f0()\n\n")
	for i := 0; big.Len() < 10<<20; i++ {
		big.WriteString("def f")
		big.WriteString(strings.Repeat("x", i%7))
		big.WriteString("():\n    return agent(\"a prompt that takes some room on its line\", sandbox(access = \"read-only\"))\n\n")
	}
	bu := c.open(filepath.Join(dir, "big.star"), big.String())
	c.diagnosticsWithin(bu, 1, 3*time.Minute)
	if h, err := hoverAt(c, bu, 4, 12); err != nil || h == nil {
		t.Errorf("hover in a 10 MB document: %v, %v", h, err)
	}
	small := c.open(filepath.Join(dir, "small.star"), "def main():\n    return str(1)\n")
	if got := codes(c.diagnostics(small, 1)); got != "" {
		t.Errorf("a small document after the enormous one: %s", got)
	}
	if h, err := hoverAt(c, small, 1, 12); err != nil || h == nil {
		t.Errorf("hover after the enormous document: %v, %v", h, err)
	}
	c.shutdown()
}

// TestUTF8Positions: a client that offers UTF-8 gets byte columns; others
// get UTF-16 code units, for the same text.
func TestUTF8Positions(t *testing.T) {
	text := "def main():\n    return agent(\"🎉é \" + \"x\", acess = 1)\n"
	for _, tc := range []struct {
		utf8     bool
		encoding string
		col      uint32
	}{
		{false, "utf-16", 31}, // 🎉 is two UTF-16 units, é one
		{true, "utf-8", 34},   // 🎉 is four bytes, é two
	} {
		dir := t.TempDir()
		c := startClient(t, Options{})
		res := c.initialize(dir, tc.utf8)
		if got := res["capabilities"].(map[string]any)["positionEncoding"]; got != tc.encoding {
			t.Errorf("positionEncoding %v, want %s", got, tc.encoding)
		}
		u := c.open(filepath.Join(dir, "u.star"), text)
		diags := c.diagnostics(u, 1)
		if len(diags) != 1 || diags[0].Range.Start.Character != tc.col {
			t.Errorf("%s: diagnostics %+v, want the keyword at character %d", tc.encoding, diags, tc.col)
		}
		if h, err := hoverAt(c, u, 1, tc.col); err != nil || h != nil {
			t.Errorf("%s: hover on the bad keyword: %v, %v, want nothing", tc.encoding, h, err)
		}
		c.shutdown()
	}
}

// FuzzEdits: any sequence of edits to a document, each followed by every
// request a client makes, never panics (handlers are called directly, so
// that a panic is not turned into an error reply).
func FuzzEdits(f *testing.F) {
	f.Add("def main():\n    return agent(\"x\", sandbox(access = \"read-only\"))\n", []byte{1, 10, 3, 'x', 0, 2, 5, '('})
	f.Add("load(\"@std/text\", \"dedent\")\n", []byte{0, 17, 0, '"', 0, 0, 1, ')'})
	f.Add("", []byte{0, 0, 0, 0xf0, 0x9f, 0x8e, 0x89})
	f.Fuzz(func(t *testing.T, text string, edits []byte) {
		s := newServer(Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no diagnostics: Analyze has its own fuzz target
		s.ctx = ctx
		s.state = stateRunning
		path := filepath.Join(t.TempDir(), "f.star")
		s.open(path, string(fileURI(path)), 1, []byte(text))
		u := fileURI(path)
		requestsOf := func(pos protocol.Position) map[string]any {
			tdp := protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: pos}
			return map[string]any{
				protocol.MethodTextDocumentHover:          &protocol.HoverParams{TextDocumentPositionParams: tdp},
				protocol.MethodTextDocumentCompletion:     &protocol.CompletionParams{TextDocumentPositionParams: tdp},
				protocol.MethodTextDocumentSignatureHelp:  &protocol.SignatureHelpParams{TextDocumentPositionParams: tdp},
				protocol.MethodTextDocumentDefinition:     &protocol.DefinitionParams{TextDocumentPositionParams: tdp},
				protocol.MethodTextDocumentReferences:     &protocol.ReferenceParams{TextDocumentPositionParams: tdp},
				protocol.MethodTextDocumentRename:         &protocol.RenameParams{TextDocumentPositionParams: tdp, NewName: "renamed"},
				protocol.MethodTextDocumentPrepareRename:  &protocol.PrepareRenameParams{TextDocumentPositionParams: tdp},
				protocol.MethodTextDocumentDocumentSymbol: &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}},
				protocol.MethodTextDocumentFormatting:     &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}},
				protocol.MethodTextDocumentRangeFormatting: &protocol.DocumentRangeFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u},
					Range: protocol.Range{Start: pos, End: protocol.Position{Line: pos.Line + 2}}},
				protocol.MethodTextDocumentCodeAction: &protocol.CodeActionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Range: protocol.Range{Start: pos, End: pos}},
				protocol.MethodWorkspaceSymbol:        &protocol.WorkspaceSymbolParams{Query: "m"},
			}
		}
		for i := 0; i+3 < len(edits) && i < 40; i += 4 {
			line, char, del, ins := edits[i]%8, edits[i+1]%40, edits[i+2]%6, edits[i+3]
			start := protocol.Position{Line: uint32(line), Character: uint32(char)}
			end := protocol.Position{Line: uint32(line), Character: uint32(char) + uint32(del)}
			_ = s.change(path, int32(i+2), []contentChange{{Range: &protocol.Range{Start: start, End: end}, Text: string([]byte{ins})}})
			for method, params := range requestsOf(start) {
				raw, _ := json.Marshal(params)
				_, _ = requests[method](context.Background(), s, &request{snap: s.snapshot()}, raw)
			}
		}
	})
}
