package lsp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

// structureMarkers returns the #% markers of a testdata file (the #@
// markers' syntax, which TestMarkers does not read).
func structureMarkers(t *testing.T, text string) []marker {
	return parseMarkers(t, strings.ReplaceAll(text, "#%", "#@"))
}

// highlights asks for the document highlights at p.
func highlights(t *testing.T, c *client, u protocol.DocumentURI, p protocol.Position) []protocol.DocumentHighlight {
	t.Helper()
	var hs []protocol.DocumentHighlight
	c.mustCall(protocol.MethodTextDocumentDocumentHighlight, &protocol.DocumentHighlightParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: p}}, &hs)
	return hs
}

// highlightText renders highlights as "range kind" lines.
func highlightText(hs []protocol.DocumentHighlight) string {
	var b strings.Builder
	for _, h := range hs {
		kind := map[protocol.DocumentHighlightKind]string{1: "text", 2: "read", 3: "write"}[h.Kind]
		fmt.Fprintf(&b, "%s %s\n", rangeText(h.Range), kind)
	}
	return b.String()
}

// foldings asks for the folding ranges of a document.
func foldings(t *testing.T, c *client, u protocol.DocumentURI) []foldRange {
	t.Helper()
	var fs []foldRange
	c.mustCall(protocol.MethodTextDocumentFoldingRange, map[string]any{"textDocument": map[string]any{"uri": u}}, &fs)
	return fs
}

// foldText renders folding ranges with 1-based lines and columns (as
// the other goldens do); a range without characters shows its lines.
func foldText(fs []foldRange) string {
	var b strings.Builder
	for _, f := range fs {
		if f.StartCharacter == nil && f.EndCharacter == nil {
			fmt.Fprintf(&b, "lines %d-%d", f.StartLine+1, f.EndLine+1)
		} else {
			fmt.Fprintf(&b, "%d:%d-%d:%d", f.StartLine+1, charOf(f.StartCharacter)+1, f.EndLine+1, charOf(f.EndCharacter)+1)
		}
		if f.Kind != "" {
			fmt.Fprintf(&b, " %s", f.Kind)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// selections asks for the selection ranges at ps, one chain each.
func selections(t *testing.T, c *client, u protocol.DocumentURI, ps ...protocol.Position) []*protocol.SelectionRange {
	t.Helper()
	var out []*protocol.SelectionRange
	c.mustCall(methodSelectionRange, &protocol.SelectionRangeParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Positions: ps}, &out)
	if len(out) != len(ps) {
		t.Fatalf("%d selection ranges for %d positions", len(out), len(ps))
	}
	return out
}

// selectionText renders a chain, innermost first, each range with the
// text it selects (cut to one line).
func selectionText(text string, s *protocol.SelectionRange) string {
	lines := analysis.NewLines([]byte(text))
	var b strings.Builder
	for ; s != nil; s = s.Parent {
		a, _ := offsetOf(lines, []byte(text), s.Range.Start, false)
		e, _ := offsetOf(lines, []byte(text), s.Range.End, false)
		sel := ""
		if a <= e {
			sel = text[a:e]
		}
		if i := strings.IndexByte(sel, '\n'); i >= 0 {
			sel = sel[:i] + "…"
		}
		fmt.Fprintf(&b, "%s %q\n", rangeText(s.Range), sel)
	}
	return b.String()
}

// checkChain fails unless every range of a chain strictly contains the
// one before it.
func checkChain(t *testing.T, what string, s *protocol.SelectionRange) {
	t.Helper()
	for ; s != nil && s.Parent != nil; s = s.Parent {
		if !strictlyContains(s.Parent.Range, s.Range) {
			t.Errorf("%s: %s does not strictly contain %s", what, rangeText(s.Parent.Range), rangeText(s.Range))
		}
	}
}

// documentSymbolsOf asks for the document symbols.
func documentSymbolsOf(t *testing.T, c *client, u protocol.DocumentURI) []protocol.DocumentSymbol {
	t.Helper()
	var syms []protocol.DocumentSymbol
	c.mustCall(protocol.MethodTextDocumentDocumentSymbol, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &syms)
	return syms
}

// symbolTree renders document symbols, indented by depth.
func symbolTree(b *strings.Builder, syms []protocol.DocumentSymbol, depth int) {
	for _, s := range syms {
		fmt.Fprintf(b, "%s%s [%s] %s sel %s", strings.Repeat("  ", depth), s.Name, s.Kind, rangeText(s.Range), rangeText(s.SelectionRange))
		if s.Detail != "" {
			fmt.Fprintf(b, " — %s", s.Detail)
		}
		b.WriteString("\n")
		symbolTree(b, s.Children, depth+1)
	}
}

// TestStructure runs the #% markers of testdata/structure.star (hl: the
// highlights of the name at the text, sel: the selection ranges there)
// and asks for the folding ranges (whole lines, and with characters)
// and the symbol tree, comparing all with testdata/structure.features.golden
// (-update rewrites it).
func TestStructure(t *testing.T) {
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "structure.star")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(path, text)
	var out bytes.Buffer
	markers := structureMarkers(t, text)
	if len(markers) < 10 {
		t.Fatalf("want the #%% markers of structure.star, found %d", len(markers))
	}
	for _, m := range markers {
		p := m.at(t, false)
		switch m.name {
		case "hl":
			fmt.Fprintf(&out, "-- hl %s %q --\n%s", posText(p), m.args[0], highlightText(highlights(t, c, u, p)))
		case "sel":
			s := selections(t, c, u, p)[0]
			checkChain(t, fmt.Sprintf("line %d: %q", m.line+1, m.args[0]), s)
			fmt.Fprintf(&out, "-- sel %s %q --\n%s", posText(p), m.args[0], selectionText(text, s))
		default:
			t.Fatalf("line %d: unknown marker %s", m.line+1, m.name)
		}
	}
	fmt.Fprintf(&out, "-- folding (whole lines) --\n%s", foldText(foldingRanges(analysis.ParseFile(path, src), true, false)))
	fmt.Fprintf(&out, "-- folding (characters) --\n%s", foldText(foldingRanges(analysis.ParseFile(path, src), false, false)))
	var tree strings.Builder
	symbolTree(&tree, documentSymbolsOf(t, c, u), 0)
	fmt.Fprintf(&out, "-- symbols --\n%s", tree.String())
	c.shutdown()

	golden := filepath.Join(dir, "structure.features.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./lsp -run TestStructure -update)", err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("answers differ from %s (rerun with -update to accept):\n%s", filepath.Base(golden), diff.Diff("want", want, "got", out.Bytes()))
	}
}

// TestHighlightEdges: a parameter that shadows a global, a default value
// that reads the global, augmented assignments, loop variables, columns
// after non-ASCII text in both encodings, and positions on no name.
func TestHighlightEdges(t *testing.T) {
	text := "N = 1\n" +
		"\n" +
		"def f(N, k = N):\n" +
		"    for i in range(N):\n" +
		"        k += i\n" +
		"    return k\n" +
		"\n" +
		"w = [\"é🎉\", N]\n"
	for _, tc := range []struct {
		utf8 bool
		col  uint32 // of N on the last line
	}{{false, 12}, {true, 15}} {
		dir := t.TempDir()
		c := startClient(t, Options{})
		c.initialize(dir, tc.utf8)
		u := c.open(filepath.Join(dir, "h.star"), text)
		for _, check := range []struct {
			line, char uint32
			want       string
		}{
			{0, 0, fmt.Sprintf("1:1-1:2 write\n3:14-3:15 read\n8:%d-8:%d read\n", tc.col+1, tc.col+2)}, // the global
			{7, tc.col, fmt.Sprintf("1:1-1:2 write\n3:14-3:15 read\n8:%d-8:%d read\n", tc.col+1, tc.col+2)},
			{2, 6, "3:7-3:8 write\n4:20-4:21 read\n"},                   // the parameter hides it in the body
			{4, 8, "3:10-3:11 write\n5:9-5:10 write\n6:12-6:13 read\n"}, // k += i writes
			{3, 8, "4:9-4:10 write\n5:14-5:15 read\n"},                  // the loop variable
			{3, 14, "4:14-4:19 read\n"},                                 // a builtin's uses
			{2, 0, ""},                                                  // def
			{5, 5, ""},                                                  // return
			{0, 4, ""},                                                  // a literal
			{1, 0, ""},                                                  // an empty line
			{7, 6, ""},                                                  // inside a string
		} {
			got := highlightText(highlights(t, c, u, protocol.Position{Line: check.line, Character: check.char}))
			if got != check.want {
				t.Errorf("utf8=%v: highlights at %d:%d:\n%swant\n%s", tc.utf8, check.line, check.char, got, check.want)
			}
		}
		// While the text does not parse, the last good parse answers.
		change(c, u, 2, text+"def broken(:\n")
		c.diagnostics(u, 2)
		if got, want := highlightText(highlights(t, c, u, protocol.Position{Line: 2, Character: 6})), "3:7-3:8 write\n4:20-4:21 read\n"; got != want {
			t.Errorf("utf8=%v: highlights while the text does not parse:\n%swant\n%s", tc.utf8, got, want)
		}
		c.shutdown()
	}
}

// TestHighlightLoaded: a symbol loaded from a file is highlighted where
// the load binds it (its quoted name, a write; the quoted name an alias
// loads, a read) and used; an alias, where it is bound and used.
func TestHighlightLoaded(t *testing.T) {
	dir := writeFiles(t, map[string]string{"lib.star": "def helper():\n    return 1\n"})
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "main.star"), "load(\"lib.star\", \"helper\", h = \"helper\")\nx = helper()\ny = h()\n")
	for _, check := range []struct {
		line, char uint32
		want       string
	}{
		{1, 4, "1:18-1:26 write\n1:32-1:40 read\n2:5-2:11 read\n"},
		{0, 20, "1:18-1:26 write\n1:32-1:40 read\n2:5-2:11 read\n"},
		{2, 4, "1:28-1:29 write\n3:5-3:6 read\n"},
		{0, 27, "1:28-1:29 write\n3:5-3:6 read\n"},
	} {
		if got := highlightText(highlights(t, c, u, protocol.Position{Line: check.line, Character: check.char})); got != check.want {
			t.Errorf("highlights at %d:%d:\n%swant\n%s", check.line, check.char, got, check.want)
		}
	}
	c.shutdown()
}

// TestFoldingEdges: one-line brackets and bodies are not folded; blocks
// fold after their colon (an elif and an else each on their own), and
// whole-line ranges
// keep a closing bracket that starts its line in view; ranges with
// characters count them in the negotiated encoding and send a 0.
func TestFoldingEdges(t *testing.T) {
	text := "x = f(1, 2)\n" +
		"y = f(\n" +
		"    1,\n" +
		"    2)\n" +
		"z = g(\n" +
		"    [1, 2],\n" +
		")\n" +
		"s = \"\"\"a\n" +
		"b\"\"\"\n" +
		"def h(): return 1\n" +
		"# one comment\n" +
		"\n" +
		"# a\n" +
		"# b\n" +
		"q = \"🎉é\" + f(\n" +
		"    1)\n" +
		"for i in [1]:\n" +
		"    if i:\n" +
		"        pass\n" +
		"    elif i > 1:\n" +
		"        pass\n" +
		"    else:\n" +
		"        pass\n" +
		"while x :\n" +
		"    pass\n"
	f := analysis.ParseFile("/f.star", []byte(text))
	if f.Syntax == nil {
		t.Fatal("the text does not parse")
	}
	for _, tc := range []struct {
		lineOnly, utf8 bool
		want           string
	}{
		{true, false, "lines 2-4\nlines 5-6\nlines 8-9\nlines 13-14 comment\nlines 15-16\nlines 17-23\nlines 18-19\nlines 20-21\nlines 22-23\nlines 24-25\n"},
		{false, false, "2:7-4:6\n5:7-7:1\n8:9-9:5\n13:4-14:4 comment\n15:15-16:6\n17:14-23:13\n18:10-19:13\n20:16-21:13\n22:10-23:13\n24:10-25:9\n"},
		{false, true, "2:7-4:6\n5:7-7:1\n8:9-9:5\n13:4-14:4 comment\n15:18-16:6\n17:14-23:13\n18:10-19:13\n20:16-21:13\n22:10-23:13\n24:10-25:9\n"},
	} {
		got := foldingRanges(f, tc.lineOnly, tc.utf8)
		if s := foldText(got); s != tc.want {
			t.Errorf("lineOnly=%v utf8=%v:\n%swant\n%s", tc.lineOnly, tc.utf8, s, tc.want)
		}
		raw, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if hasChars := strings.Contains(string(raw), "Character"); hasChars == tc.lineOnly {
			t.Errorf("lineOnly=%v: %s", tc.lineOnly, raw)
		}
		if !tc.lineOnly && !strings.Contains(string(raw), `"endLine":6,"endCharacter":0`) {
			t.Errorf("a range ending at character 0 must say so: %s", raw)
		}
	}

	// Through a session: a client that folds whole lines only
	// (lineFoldingOnly) gets whole lines.
	lineDir := t.TempDir()
	lc := startClient(t, Options{})
	var res map[string]any
	lc.mustCall(protocol.MethodInitialize, map[string]any{
		"rootUri":      fileURI(lineDir),
		"capabilities": map[string]any{"textDocument": map[string]any{"foldingRange": map[string]any{"lineFoldingOnly": true}}},
	}, &res)
	lc.notify(protocol.MethodInitialized, map[string]any{})
	lu := lc.open(filepath.Join(lineDir, "f.star"), text)
	if got, want := foldText(foldings(t, lc, lu)), "lines 2-4\nlines 5-6\nlines 8-9\nlines 13-14 comment\nlines 15-16\nlines 17-23\nlines 18-19\nlines 20-21\nlines 22-23\nlines 24-25\n"; got != want {
		t.Errorf("folding ranges for lineFoldingOnly:\n%swant\n%s", got, want)
	}
	lc.shutdown()

	// Another client gets the characters too, from the last good parse
	// while the text does not parse, and nothing for a text that never
	// parsed.
	dir := t.TempDir()
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "f.star"), text)
	want := "2:7-4:6\n5:7-7:1\n8:9-9:5\n13:4-14:4 comment\n15:15-16:6\n17:14-23:13\n18:10-19:13\n20:16-21:13\n22:10-23:13\n24:10-25:9\n"
	if got := foldText(foldings(t, c, u)); got != want {
		t.Errorf("folding ranges:\n%swant\n%s", got, want)
	}
	change(c, u, 2, text+"def broken(:\n")
	c.diagnostics(u, 2)
	if got := foldText(foldings(t, c, u)); got != want {
		t.Errorf("folding ranges while the text does not parse:\n%swant\n%s", got, want)
	}
	never := c.open(filepath.Join(dir, "never.star"), "def (\n  x\n")
	if got := foldings(t, c, never); len(got) != 0 {
		t.Errorf("folding ranges of a text that never parsed: %+v", got)
	}
	if got := highlights(t, c, never, protocol.Position{Line: 1, Character: 2}); len(got) != 0 {
		t.Errorf("highlights in a text that never parsed: %+v", got)
	}
	if got := documentSymbolsOf(t, c, never); len(got) != 0 {
		t.Errorf("symbols of a text that never parsed: %+v", got)
	}
	if got := selectionText("def (\n  x\n", selections(t, c, never, protocol.Position{Line: 1, Character: 2})[0]); got != "1:1-3:1 \"def (…\"\n" {
		t.Errorf("selection ranges in a text that never parsed:\n%s", got)
	}
	c.shutdown()
}

// TestSelectionNesting: at every position of structure.star, in both
// encodings, each range of the chain strictly contains the one before,
// the first contains the position and the last is the whole file.
func TestSelectionNesting(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "structure.star"))
	if err != nil {
		t.Fatal(err)
	}
	f := analysis.ParseFile("/structure.star", src)
	lines := f.Lines()
	for _, utf8 := range []bool{false, true} {
		whole := protocol.Range{End: protocol.Position{Line: uint32(lines.Count() - 1)}}
		for n := 1; n <= lines.Count(); n++ {
			for col := 1; col <= len([]rune(string(lines.Line(n))))+1; col++ {
				p := lines.Position(nil, lines.LineStart(n)) // column 1 of line n
				p.Col = int32(col)
				chain := selectionChain(f, p, utf8)
				what := fmt.Sprintf("utf8=%v %d:%d", utf8, n, col)
				checkChain(t, what, chain)
				pp := protoPos(lines, p, utf8)
				if posBefore(pp, chain.Range.Start) || posBefore(chain.Range.End, pp) {
					t.Errorf("%s: the innermost range %s does not contain the position", what, rangeText(chain.Range))
				}
				last := chain
				for last.Parent != nil {
					last = last.Parent
				}
				if last.Range != whole {
					t.Errorf("%s: the outermost range is %s, want the file %s", what, rangeText(last.Range), rangeText(whole))
				}
			}
		}
	}
}

// TestDocumentSymbolTree: the nodes a function builds are its children,
// nested as written, each selection range within its range; top-level
// entries keep their names and kinds.
func TestDocumentSymbolTree(t *testing.T) {
	text := "def main():\n" +
		"    def helper(x):\n" +
		"        return agent(x)\n" +
		"    box = sandbox(\n" +
		"        agent(\"é🎉 review\", name = \"rev\"),\n" +
		"        helper(\"y\"),\n" +
		"    )\n" +
		"    return box\n" +
		"\n" +
		"LIMIT = 3\n"
	dir := t.TempDir()
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "s.star"), text)
	var b strings.Builder
	syms := documentSymbolsOf(t, c, u)
	symbolTree(&b, syms, 0)
	want := "main [Function] 1:1-8:15 sel 1:5-1:9 — main()\n" +
		"  helper [Function] 2:5-3:24 sel 2:9-2:15\n" +
		"    agent [Object] 3:16-3:24 sel 3:16-3:21\n" +
		"  sandbox [Namespace] 4:11-7:6 sel 4:11-4:18\n" +
		"    agent [Object] 5:9-5:42 sel 5:9-5:14 — rev\n" +
		"LIMIT [Variable] 10:1-10:10 sel 10:1-10:6 — 3\n"
	if b.String() != want {
		t.Errorf("symbols:\n%swant\n%s", b.String(), want)
	}
	var check func([]protocol.DocumentSymbol)
	check = func(syms []protocol.DocumentSymbol) {
		for _, s := range syms {
			if s.SelectionRange != s.Range && !strictlyContains(s.Range, s.SelectionRange) {
				t.Errorf("%s: selection range %s outside %s", s.Name, rangeText(s.SelectionRange), rangeText(s.Range))
			}
			check(s.Children)
		}
	}
	check(syms)
	c.shutdown()
}

// FuzzStructure: highlights, folding ranges, selection ranges and symbols
// of any text at any position never panic, and selection chains nest.
func FuzzStructure(f *testing.F) {
	f.Add("def main():\n    return agent(\"x\", sandbox(\n  access = \"read-only\"))\n", uint8(1), uint8(12))
	f.Add("load(\"a.star\", b = \"c\")\n# x\n# y\nb(\"\"\"\n\"\"\")[0]\n", uint8(3), uint8(2))
	f.Add("def (\n", uint8(0), uint8(4))
	f.Add("x = [é🎉 for\n", uint8(0), uint8(7))
	f.Fuzz(func(t *testing.T, text string, line, char uint8) {
		s := newServer(Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.ctx = ctx
		s.state = stateRunning
		path := filepath.Join(t.TempDir(), "f.star")
		s.open(path, string(fileURI(path)), 1, []byte(text))
		u := protocol.TextDocumentIdentifier{URI: fileURI(path)}
		pos := protocol.Position{Line: uint32(line % 8), Character: uint32(char % 64)}
		for method, params := range map[string]any{
			protocol.MethodTextDocumentDocumentHighlight: &protocol.DocumentHighlightParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: u, Position: pos}},
			protocol.MethodTextDocumentFoldingRange:      map[string]any{"textDocument": u},
			methodSelectionRange:                         &protocol.SelectionRangeParams{TextDocument: u, Positions: []protocol.Position{pos, {}}},
			protocol.MethodTextDocumentDocumentSymbol:    &protocol.DocumentSymbolParams{TextDocument: u},
		} {
			raw, _ := json.Marshal(params)
			res, err := requests[method](context.Background(), s, &request{snap: s.snapshot()}, raw)
			if err == nil {
				if chains, ok := res.([]*protocol.SelectionRange); ok {
					for _, c := range chains {
						checkChain(t, "fuzz", c)
					}
				}
			}
		}
		file := analysis.ParseFile(path, []byte(text))
		foldingRanges(file, false, true)
		foldingRanges(file, true, false)
	})
}

// TestDocumentSymbolsLoadedComponents: a component a load() takes from
// another file (under its own name or another) is shown in the outline
// as the file's own components are; a loaded name that is not a
// component is not.
func TestDocumentSymbolsLoadedComponents(t *testing.T) {
	dir := writeFiles(t, map[string]string{"lib.star": "def _review(x):\n    return agent(x)\n\nReviewer = component(_review)\n\ndef helper(x):\n    return x\n"})
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "main.star"), "load(\"lib.star\", \"Reviewer\", R = \"Reviewer\", \"helper\")\n\n"+
		"def main():\n    return sandbox(Reviewer(\"a\"), R(\"b\"), helper(1))\n")
	var b strings.Builder
	symbolTree(&b, documentSymbolsOf(t, c, u), 0)
	want := "main [Function] 3:1-4:53 sel 3:5-3:9 — main()\n" +
		"  sandbox [Namespace] 4:12-4:53 sel 4:12-4:19\n" +
		"    Reviewer [Object] 4:20-4:33 sel 4:20-4:28 — component\n" +
		"    R [Object] 4:35-4:41 sel 4:35-4:36 — component\n"
	if b.String() != want {
		t.Errorf("symbols:\n%swant\n%s", b.String(), want)
	}
	c.shutdown()
}
