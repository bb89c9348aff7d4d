package lsp

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

// needsFixes returns a workflow of about lines lines in which fixes lines
// are not formatted (one in each function, spread evenly).
func needsFixes(lines, fixes int) string {
	var b strings.Builder
	per := lines / fixes
	for n := range fixes {
		fmt.Fprintf(&b, "def step_%d(x):\n    \"\"\"Step %d.\"\"\"\n    box = sandbox(access=\"read-write\", root=\".\")\n", n, n)
		for k := 4; k < per; k++ {
			fmt.Fprintf(&b, "    x = x + \"%d.%d\"\n", n, k)
		}
		fmt.Fprintf(&b, "    return agent(x, model = \"m%d\"), box\n\n", n)
	}
	b.WriteString("def main():\n    return step_0(\"a\")\n")
	return b.String()
}

// applyHunks applies hunks to a and checks that they are ordered and
// apart.
func applyHunks(t *testing.T, a, b []string, hunks []hunk) []string {
	t.Helper()
	var out []string
	pi, pj := 0, 0
	for _, h := range hunks {
		if h.i1 < pi || h.i2 < h.i1 || h.j2 < h.j1 || h.j1-pj != h.i1-pi || h.i1 == h.i2 && h.j1 == h.j2 {
			t.Fatalf("hunk %+v after (%d, %d) is out of order or empty", h, pi, pj)
		}
		out = append(out, a[pi:h.i1]...)
		out = append(out, b[h.j1:h.j2]...)
		pi, pj = h.i2, h.j2
	}
	return append(out, a[pi:]...)
}

// applyEditsIn applies edits whose positions count in UTF-8 bytes or
// UTF-16 units; they must be in order and apart.
func applyEditsIn(t *testing.T, text string, edits []protocol.TextEdit, utf8Units bool) string {
	t.Helper()
	lines := analysis.NewLines([]byte(text))
	var out strings.Builder
	prev := 0
	for _, e := range edits {
		a, err := offsetOf(lines, []byte(text), e.Range.Start, utf8Units)
		if err != nil {
			t.Fatalf("edit %v: %v", e, err)
		}
		b, err := offsetOf(lines, []byte(text), e.Range.End, utf8Units)
		if err != nil {
			t.Fatalf("edit %v: %v", e, err)
		}
		if a < prev || b < a {
			t.Fatalf("edit %v is out of order", e)
		}
		out.WriteString(text[prev:a])
		out.WriteString(e.NewText)
		prev = b
	}
	out.WriteString(text[prev:])
	return out.String()
}

func changed(hunks []hunk) (del, ins int) {
	for _, h := range hunks {
		del += h.i2 - h.i1
		ins += h.j2 - h.j1
	}
	return
}

// TestLineDiff: applying the hunks to the old lines gives the new ones,
// for random texts with few distinct lines (many repeated, few anchors)
// and with many; the diff of lines that differ in a few places changes
// only those.
func TestLineDiff(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := range 3000 {
		alphabet := 2 + r.Intn(4)
		if iter%3 == 0 {
			alphabet = 1000
		}
		a := make([]string, r.Intn(200))
		for i := range a {
			a[i] = fmt.Sprint(r.Intn(alphabet), "\n")
		}
		// b: a with random deletions, insertions and replacements.
		var b []string
		edits := 0
		for i := 0; i <= len(a); i++ {
			switch p := r.Intn(100); {
			case p < 3:
				edits++
				continue // delete a[i]
			case p < 6:
				b = append(b, fmt.Sprint("new ", r.Intn(alphabet), "\n"))
				edits++
			}
			if i < len(a) {
				b = append(b, a[i])
			}
		}
		if iter%10 == 0 { // unrelated texts
			b = b[:0]
			for range r.Intn(100) {
				b = append(b, fmt.Sprint(r.Intn(alphabet), "\n"))
			}
		}
		var ld lineDiff
		hunks := ld.diff(a, b)
		if got := applyHunks(t, a, b, hunks); strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("case %d: applying %v to\n%q\ngives\n%q\nwant\n%q", iter, hunks, a, got, b)
		}
		for k := 0; k < len(ld.matches); k += 2 {
			if a[ld.matches[k]] != b[ld.matches[k+1]] {
				t.Fatalf("case %d: lines %d and %d matched but differ", iter, ld.matches[k], ld.matches[k+1])
			}
		}
		if del, ins := changed(hunks); iter%10 != 0 && edits <= maxEdits && del+ins > 2*edits {
			t.Errorf("case %d: %d lines deleted and %d inserted for %d edits", iter, del, ins, edits)
		}
	}
}

// TestFormattingEdits: the edits of textDocument/formatting turn the
// document into what aml fmt prints, for every .star file of the
// repository and for generated ones, in UTF-16 and UTF-8 positions, with
// and without a final newline.
func TestFormattingEdits(t *testing.T) {
	var texts []string
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".star") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			texts = append(texts, string(src))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts,
		needsFixes(200, 40),
		"def a( ):\n  return 'é'\n\n\n\nx=[1,\n2]",
		"x = 1",
		"",
		"\n\n\n",
		"# only a comment",
		"load('a.star','b')\nprint( b )\ndef f(x,y):\n  return {'a':x,\n  'b':y}\n# 😀 end",
	)
	formatted := 0
	for _, text := range texts {
		for _, variant := range []string{text, strings.TrimSuffix(text, "\n"), strings.ReplaceAll(text, "    ", "  ")} {
			want, err := analysis.Format("f.star", []byte(variant))
			if err != nil {
				continue
			}
			for _, utf8Units := range []bool{false, true} {
				d := &document{path: "f.star", text: []byte(variant), lines: analysis.NewLines([]byte(variant))}
				edits, err := formatEdits(d, -1, -1, utf8Units)
				if err != nil {
					t.Fatal(err)
				}
				if got := applyEditsIn(t, variant, edits, utf8Units); got != string(want) {
					t.Fatalf("formatting edits %v of\n%s\ngive\n%s\nwant\n%s", edits, variant, got, want)
				}
				if variant == string(want) && len(edits) != 0 {
					t.Fatalf("edits %v for a formatted text", edits)
				}
				formatted++
			}
		}
	}
	if formatted < 100 {
		t.Fatalf("only %d texts formatted", formatted)
	}
}

// TestFormattingLinear: the work of the diff grows linearly with the
// document: ten times the lines and fixes take about ten times the steps
// (counted, not timed; a quadratic diff takes a hundred times).
func TestFormattingLinear(t *testing.T) {
	steps := func(lines, fixes int) int {
		text := needsFixes(lines, fixes)
		out, err := analysis.Format("f.star", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		var ld lineDiff
		hunks := ld.diff(splitLines(text), splitLines(string(out)))
		if len(hunks) != fixes {
			t.Fatalf("%d hunks for %d fixes", len(hunks), fixes)
		}
		return ld.ops
	}
	small, large := steps(2000, 400), steps(20000, 4000)
	t.Logf("steps: %d for 2,000 lines and 400 fixes, %d for 20,000 lines and 4,000 fixes", small, large)
	if large > 15*small {
		t.Errorf("the diff is superlinear: %d steps for 2,000 lines, %d for 20,000", small, large)
	}
}

// BenchmarkFormatting: textDocument/formatting through the protocol, for
// a 2,000-line workflow that needs 400 fixes and a 20,000-line one that
// needs 4,000.
func BenchmarkFormatting(b *testing.B) {
	for _, size := range []struct{ lines, fixes int }{{2000, 400}, {20000, 4000}} {
		b.Run(fmt.Sprintf("lines=%d/fixes=%d", size.lines, size.fixes), func(b *testing.B) {
			text := needsFixes(size.lines, size.fixes)
			dir := b.TempDir()
			c := startClient(b, Options{})
			c.initialize(dir, false)
			u := c.open(filepath.Join(dir, "main.star"), text)
			b.ReportAllocs()
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				var edits []protocol.TextEdit
				c.mustCall(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}}, &edits)
				ds = append(ds, time.Since(start))
				if len(edits) != size.fixes {
					b.Fatalf("%d edits for %d fixes", len(edits), size.fixes)
				}
			}
			b.StopTimer()
			reportPercentiles(b, ds)
			c.shutdown()
		})
	}
}
