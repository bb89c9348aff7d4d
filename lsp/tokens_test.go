package lsp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib/analysis"
)

// decodeTokens renders encoded semantic tokens one per line as
// "line:col+len type [modifiers]" (0-based line and column, in the
// units they were encoded in), with the text they cover.
func decodeTokens(data []uint32, text string) string {
	lines := strings.Split(text, "\n")
	var b strings.Builder
	var line, col uint32
	for i := 0; i+4 < len(data); i += 5 {
		if data[i] > 0 {
			col = 0
		}
		line += data[i]
		col += data[i+1]
		var mods []string
		for bit, m := range tokenModifiers {
			if data[i+4]&(1<<bit) != 0 {
				mods = append(mods, m)
			}
		}
		covered := ""
		if int(line) < len(lines) && int(col+data[i+2]) <= len(lines[line]) {
			l := lines[line]
			covered = l[col : col+data[i+2]]
		}
		fmt.Fprintf(&b, "%d:%d+%d %s %v %q\n", line, col, data[i+2], tokenTypes[data[i+3]], mods, covered)
	}
	return b.String()
}

func tokensOf(text string, utf8 bool) string {
	f := analysis.ParseFile("t.star", []byte(text))
	return decodeTokens(encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, utf8), text)
}

// TestSemanticTokens: every kind of token of a small workflow, with its
// exact place, length, type and modifiers.
func TestSemanticTokens(t *testing.T) {
	text := `load("@std/text", "dedent")

# A lane.
def lane(topic, model = None):
    """Reviews."""
    if topic and not model:
        return agent(dedent(topic), name = "x", timeout_ms = 10)  # short
    for t in [1, 2.5]:
        pass
    return x.y if True else None
`
	want := `0:0+4 keyword [] "load"
0:5+11 string [] "\"@std/text\""
0:18+8 string [] "\"dedent\""
2:0+9 comment [] "# A lane."
3:0+3 keyword [] "def"
3:4+4 function [definition] "lane"
3:9+5 parameter [definition] "topic"
3:16+5 parameter [definition] "model"
3:24+4 keyword [] "None"
4:4+14 string [] "\"\"\"Reviews.\"\"\""
5:4+2 keyword [] "if"
5:7+5 parameter [] "topic"
5:13+3 keyword [] "and"
5:17+3 keyword [] "not"
5:21+5 parameter [] "model"
6:8+6 keyword [] "return"
6:15+5 function [defaultLibrary] "agent"
6:21+6 function [defaultLibrary] "dedent"
6:28+5 parameter [] "topic"
6:36+4 parameter [] "name"
6:43+3 string [] "\"x\""
6:48+10 parameter [] "timeout_ms"
6:61+2 number [] "10"
6:66+7 comment [] "# short"
7:4+3 keyword [] "for"
7:8+1 variable [definition] "t"
7:10+2 keyword [] "in"
7:14+1 number [] "1"
7:17+3 number [] "2.5"
8:8+4 keyword [] "pass"
9:4+6 keyword [] "return"
9:11+1 variable [] "x"
9:13+1 property [] "y"
9:15+2 keyword [] "if"
9:18+4 keyword [] "True"
9:23+4 keyword [] "else"
9:28+4 keyword [] "None"
`
	if got := tokensOf(text, false); got != want {
		t.Errorf("tokens:\n%s\nwant:\n%s", got, want)
	}
}

// TestSemanticTokensUnits: columns and lengths after non-ASCII text in
// UTF-16 and UTF-8, a string over several lines split per line, and a
// range that keeps only its lines.
func TestSemanticTokensUnits(t *testing.T) {
	text := "x = \"é🎉\" + y\nz = \"\"\"a\nbé\"\"\"\n"
	f := analysis.ParseFile("t.star", []byte(text))
	got16 := decodeTokens(encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false), "")
	want16 := "0:0+1 variable [definition] \"\"\n0:4+5 string [] \"\"\n0:12+1 variable [] \"\"\n1:0+1 variable [definition] \"\"\n1:4+4 string [] \"\"\n2:0+5 string [] \"\"\n"
	if got16 != want16 {
		t.Errorf("utf-16:\n%swant\n%s", got16, want16)
	}
	got8 := decodeTokens(encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, true), "")
	want8 := "0:0+1 variable [definition] \"\"\n0:4+8 string [] \"\"\n0:15+1 variable [] \"\"\n1:0+1 variable [definition] \"\"\n1:4+4 string [] \"\"\n2:0+6 string [] \"\"\n"
	if got8 != want8 {
		t.Errorf("utf-8:\n%swant\n%s", got8, want8)
	}
	// Lines 2 and 3 only (1-based), so the first token is relative to
	// line 0.
	gotRange := decodeTokens(encodeTokens(semanticTokens(f, nil, 2, 3), f, false), "")
	if want := "1:0+1 variable [definition] \"\"\n1:4+4 string [] \"\"\n2:0+5 string [] \"\"\n"; gotRange != want {
		t.Errorf("range:\n%swant\n%s", gotRange, want)
	}
	if got := semanticTokens(analysis.ParseFile("t.star", []byte("def (\n")), nil, 0, 1<<30); len(got) != 0 {
		t.Errorf("a text that never parsed: %v", got)
	}
}

// BenchmarkSemanticTokens: the whole 2,000-line benchmark workflow.
func BenchmarkSemanticTokens(b *testing.B) {
	_, text := genWorkspace(b, 20, 2000)
	f := analysis.ParseFile("main.star", []byte(text))
	for b.Loop() {
		if data := encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false); len(data) == 0 {
			b.Fatal("no tokens")
		}
	}
}

// TestSemanticTokensSession: the server declares its legend and answers
// full and range requests with what semanticTokens encodes.
func TestSemanticTokensSession(t *testing.T) {
	dir := t.TempDir()
	c := startClient(t, Options{})
	res := c.initialize(dir, false)
	caps, _ := res["capabilities"].(map[string]any)
	prov, _ := caps["semanticTokensProvider"].(map[string]any)
	legend, _ := prov["legend"].(map[string]any)
	if types, _ := legend["tokenTypes"].([]any); len(types) != len(tokenTypes) || prov["full"] != true || prov["range"] != true {
		t.Fatalf("semanticTokensProvider = %v", caps["semanticTokensProvider"])
	}
	text := "def main():\n    # ok\n    return agent(\"x\", model = \"m\")\n"
	u := c.open(dir+"/w.star", text)
	c.diagnostics(u, 1)
	var full, part struct{ Data []uint32 }
	c.mustCall("textDocument/semanticTokens/full", map[string]any{"textDocument": map[string]any{"uri": u}}, &full)
	f := analysis.ParseFile("w.star", []byte(text))
	if got, want := decodeTokens(full.Data, text), decodeTokens(encodeTokens(semanticTokens(f, nil, 0, 1<<30), f, false), text); got != want || !strings.Contains(got, `function [defaultLibrary] "agent"`) {
		t.Errorf("full:\n%swant\n%s", got, want)
	}
	c.mustCall("textDocument/semanticTokens/range", map[string]any{"textDocument": map[string]any{"uri": u}, "range": map[string]any{"start": map[string]any{"line": 2, "character": 0}, "end": map[string]any{"line": 2, "character": 40}}}, &part)
	if got := decodeTokens(part.Data, text); !strings.HasPrefix(got, `2:4+6 keyword [] "return"`) || strings.Contains(got, "comment") {
		t.Errorf("range of line 2:\n%s", got)
	}
	c.shutdown()
}
