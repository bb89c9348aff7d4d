package lsp

import (
	"fmt"
	"strings"
	"testing"

	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// posAfter returns the UTF-16 position just after the first occurrence
// of marker in text (with its end, or its start when start is set).
func posAfter(t *testing.T, text, marker string, start bool) protocol.Position {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("%q is not in the text", marker)
	}
	if !start {
		i += len(marker)
	}
	line := strings.Count(text[:i], "\n")
	ls := strings.LastIndex(text[:i], "\n") + 1
	return protocol.Position{Line: uint32(line), Character: utf16Col(text[ls:], i-ls)}
}

// completionText renders a completion list one item per line as
// `label [range] "text" — detail`, the way the marker goldens do.
func completionText(at protocol.Position, list protocol.CompletionList) string {
	var b strings.Builder
	for _, it := range list.Items {
		rng, text := rangeText(protocol.Range{Start: at, End: at}), it.Label
		if it.InsertText != "" {
			text = it.InsertText
		}
		if it.TextEdit != nil {
			rng, text = rangeText(it.TextEdit.Range), it.TextEdit.NewText
		}
		fmt.Fprintf(&b, "%s [%s] %q — %s\n", it.Label, rng, text, it.Detail)
	}
	return b.String()
}

// TestDictKeyCompletionSession: inside the dict given to permissions=
// (after non-ASCII text, so the columns are UTF-16), the keys not
// written yet as quoted strings with their types, a key's enum strings
// at its value, and a key being typed inside its quotes.
func TestDictKeyCompletionSession(t *testing.T) {
	dir := t.TempDir()
	c := startClient(t, Options{})
	c.initialize(dir, false)
	text := "def main():\n" +
		"    a = agent(\"é🎉\", permissions = {\"network\": True, })\n" +
		"    b = agent(\"é🎉\", permissions = {\"filesystem\": })\n" +
		"    d = agent(\"é🎉\", permissions = {\"network\": True, \"sh})\n" +
		"    return [a, b, d]\n"
	u := c.open(dir+"/w.star", text)
	td := protocol.TextDocumentIdentifier{URI: u}
	complete := func(at protocol.Position) string {
		var list protocol.CompletionList
		c.mustCall(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: at}}, &list)
		return completionText(at, list)
	}
	cases := []struct {
		name, after, want string
	}{
		{"keys not given", `"network": True, `, "" +
			`"filesystem" [2:54-2:54] "\"filesystem\": " — str` + "\n" +
			`"shell" [2:54-2:54] "\"shell\": " — bool` + "\n"},
		{"enum value", `{"filesystem": `, "" +
			`"read-only" [3:51-3:51] "\"read-only\"" — permissions["filesystem"]: str` + "\n" +
			`"read-write" [3:51-3:51] "\"read-write\"" — permissions["filesystem"]: str` + "\n"},
		{"inside quotes", `True, "sh`, `shell [4:55-4:57] "shell" — bool` + "\n"},
	}
	for _, tc := range cases {
		if got := complete(posAfter(t, text, tc.after, false)); got != tc.want {
			t.Errorf("%s:\n%swant\n%s", tc.name, got, tc.want)
		}
	}
	c.shutdown()
}

// TestHoverExampleSession: the hover of a builtin ends with the example
// of its catalog entry (what aml doc prints) in a fenced block.
func TestHoverExampleSession(t *testing.T) {
	dir := t.TempDir()
	c := startClient(t, Options{})
	c.initialize(dir, false)
	text := "def main():\n    return sandbox(agent(\"x\"))\n"
	u := c.open(dir+"/w.star", text)
	for _, name := range []string{"sandbox", "agent"} {
		b, ok := starlib.Lookup(name)
		if !ok || b.Example == "" {
			t.Fatalf("%s has no example in the catalog", name)
		}
		var h *protocol.Hover
		c.mustCall(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: posAfter(t, text, name+"(", true)}}, &h)
		if h == nil {
			t.Fatalf("no hover on %s", name)
		}
		if want := "\n\nExample:\n\n```python\n" + b.Example + "\n```"; !strings.HasSuffix(h.Contents.Value, want) {
			t.Errorf("hover of %s does not end with its example %q:\n%s", name, want, h.Contents.Value)
		}
	}
	c.shutdown()
}

// TestInlayHintsSession: the server declares inlay hints and answers
// with the hints of the range (LSP 3.17 fields, kind 2), in UTF-8 when
// that is negotiated; a document that never parsed gets an empty list
// and empty tokens, not an error.
func TestInlayHintsSession(t *testing.T) {
	dir := t.TempDir()
	for _, utf8 := range []bool{false, true} {
		c := startClient(t, Options{})
		res := c.initialize(dir, utf8)
		caps, _ := res["capabilities"].(map[string]any)
		if caps["inlayHintProvider"] != true {
			t.Fatalf("inlayHintProvider = %v", caps["inlayHintProvider"])
		}
		text := "S = {\"type\": \"object\"}\n" +
			"def main():\n" +
			"    a = evaluate(agent(\"é🎉\"), S)\n" +
			"    return [a, evaluate(agent(\"x\"), S)]\n"
		u := c.open(dir+"/w.star", text)
		var hints []map[string]any
		c.mustCall("textDocument/inlayHint", map[string]any{
			"textDocument": map[string]any{"uri": u},
			"range":        map[string]any{"start": map[string]any{"line": 2, "character": 0}, "end": map[string]any{"line": 2, "character": 40}},
		}, &hints)
		var got []string
		for _, h := range hints {
			p, _ := h["position"].(map[string]any)
			got = append(got, fmt.Sprintf("%v:%v %v kind=%v pad=%v", p["line"], p["character"], h["label"], h["kind"], h["paddingRight"]))
		}
		want := "2:17 value: kind=2 pad=true|2:31 schema: kind=2 pad=true"
		if utf8 {
			want = "2:17 value: kind=2 pad=true|2:34 schema: kind=2 pad=true"
		}
		if g := strings.Join(got, "|"); g != want {
			t.Errorf("utf8=%v: hints %s, want %s", utf8, g, want)
		}

		bad := c.open(dir+"/bad.star", "def main(:\n    return agent(\"x\"\n")
		var none []map[string]any
		c.mustCall("textDocument/inlayHint", map[string]any{
			"textDocument": map[string]any{"uri": bad},
			"range":        map[string]any{"start": map[string]any{"line": 0, "character": 0}, "end": map[string]any{"line": 5, "character": 0}},
		}, &none)
		if none == nil || len(none) != 0 {
			t.Errorf("hints of a text that never parsed: %#v, want []", none)
		}
		var toks struct{ Data []uint32 }
		c.mustCall("textDocument/semanticTokens/full", map[string]any{"textDocument": map[string]any{"uri": bad}}, &toks)
		if len(toks.Data) != 0 {
			t.Errorf("tokens of a text that never parsed: %v", toks.Data)
		}
		c.shutdown()
	}
}

// TestSemanticTokensLoops: lambda and star parameters, while, break,
// continue, an elif and a call of the file's own function after a
// character of two UTF-16 units.
func TestSemanticTokensLoops(t *testing.T) {
	text := "def f(n, *rest, **kw):\n" +
		"    g = lambda k: k + 1\n" +
		"    while n in rest:\n" +
		"        if n: break\n" +
		"        elif kw: continue\n" +
		"    return \"🎉\" + f(1)\n"
	want := `0:0+3 keyword [] "def"
0:4+1 function [definition] "f"
0:6+1 parameter [definition] "n"
0:10+4 parameter [definition] "rest"
0:18+2 parameter [definition] "kw"
1:4+1 variable [definition] "g"
1:8+6 keyword [] "lambda"
1:15+1 parameter [definition] "k"
1:18+1 parameter [] "k"
1:22+1 number [] "1"
2:4+5 keyword [] "while"
2:10+1 parameter [] "n"
2:12+2 keyword [] "in"
2:15+4 parameter [] "rest"
3:8+2 keyword [] "if"
3:11+1 parameter [] "n"
3:14+5 keyword [] "break"
4:8+4 keyword [] "elif"
4:13+2 parameter [] "kw"
4:17+8 keyword [] "continue"
5:4+6 keyword [] "return"
5:11+4 string [] "\"XX\""
5:18+1 function [] "f"
5:20+1 number [] "1"
`
	// The decoder slices the text by the columns, which are UTF-16:
	// it reads a text with the emoji (two units) replaced by "XX".
	f := analysis.ParseFile("t.star", []byte(text))
	if got := decodeTokens(encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false), strings.ReplaceAll(text, "🎉", "XX")); got != want {
		t.Errorf("tokens:\n%s\nwant:\n%s", got, want)
	}
}

// TestSemanticTokensNotInAndCaptures: "not in" (the parser places
// NOT_IN at its "in": both words are keywords), and a parameter or
// nested function a lambda or nested def captures (its use has a Free
// binding of its own, whose First is the parameter's identifier).
func TestSemanticTokensNotInAndCaptures(t *testing.T) {
	text := "def f(n, rest):\n" +
		"    g = lambda: n not in rest\n" +
		"    return g\n"
	want := `0:0+3 keyword [] "def"
0:4+1 function [definition] "f"
0:6+1 parameter [definition] "n"
0:9+4 parameter [definition] "rest"
1:4+1 variable [definition] "g"
1:8+6 keyword [] "lambda"
1:16+1 parameter [] "n"
1:18+3 keyword [] "not"
1:22+2 keyword [] "in"
1:25+4 parameter [] "rest"
2:4+6 keyword [] "return"
2:11+1 variable [] "g"
`
	f := analysis.ParseFile("t.star", []byte(text))
	if got := decodeTokens(encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false), text); got != want {
		t.Errorf("tokens:\n%s\nwant:\n%s", got, want)
	}
}

// BenchmarkSemanticTokens2000: the semantic tokens of the 2,000-line
// benchmark workflow, encoded in UTF-16, per request.
func BenchmarkSemanticTokens2000(b *testing.B) {
	_, text := genWorkspace(b, 20, 2000)
	f := analysis.ParseFile("main.star", []byte(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if data := encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false); len(data) == 0 {
			b.Fatal("no tokens")
		}
	}
}

// BenchmarkSemanticTokensLongLine: one line of n list items, for n of
// 2,000 and 20,000: a per-token cost that grows with the line's length
// shows as a time per byte growing with n.
func BenchmarkSemanticTokensLongLine(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			text := "X = [" + strings.Repeat("1, ", n) + "]\n"
			f := analysis.ParseFile("long.star", []byte(text))
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false)
			}
		})
	}
}

// TestNestedKeysAndStaleTokens: the keys of a nested dict do not count
// as given at the outer one (so "type" is still offered after a
// "properties" whose member has a "type"), and while the text does not
// parse no tokens are sent (the last good parse's would name the old
// text's lines).
func TestNestedKeysAndStaleTokens(t *testing.T) {
	dir := t.TempDir()
	c := startClient(t, Options{})
	c.initialize(dir, false)
	text := "def main():\n    return agent(\"x\", schema = {\"properties\": {\"a\": {\"type\": \"string\"}}, })\n"
	u := c.open(dir+"/w.star", text)
	at := posAfter(t, text, "}}, ", false)
	var list protocol.CompletionList
	c.mustCall(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: at}}, &list)
	if got := completionText(at, list); !strings.Contains(got, `"type" [`) {
		t.Errorf("the outer schema's \"type\" is not offered:\n%s", got)
	}
	broken := "\n\n\ndef main(:\n    return agent(\"x\")\n"
	c.notify("textDocument/didChange", map[string]any{"textDocument": map[string]any{"uri": u, "version": 2}, "contentChanges": []map[string]any{{"text": broken}}})
	var toks struct{ Data []uint32 }
	c.mustCall("textDocument/semanticTokens/full", map[string]any{"textDocument": map[string]any{"uri": u}}, &toks)
	if got := decodeTokens(toks.Data, broken); strings.HasPrefix(got, "0:") {
		t.Errorf("tokens on the blank lines of a text that does not parse:\n%s", got)
	}
	c.shutdown()
}
