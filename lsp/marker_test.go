package lsp

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/rogpeppe/go-internal/diff"
	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

var update = flag.Bool("update", false, "rewrite the golden answers of the marker tests")

// marker is one #@name(args...) annotation of a testdata line.
type marker struct {
	name string
	args []string
	line int // 0-based
	// code is the line's text before its first marker.
	code string
}

var markerRE = regexp.MustCompile(`#@(\w+)(\(((?:\s*"(?:[^"\\]|\\.)*"\s*,?)*)\))?`)
var argRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

func parseMarkers(t *testing.T, text string) []marker {
	var out []marker
	for i, line := range strings.Split(text, "\n") {
		idx := strings.Index(line, "#@")
		if idx < 0 {
			continue
		}
		code := line[:idx]
		for _, m := range markerRE.FindAllStringSubmatch(line[idx:], -1) {
			mk := marker{name: m[1], line: i, code: code}
			for _, a := range argRE.FindAllString(m[3], -1) {
				s, err := strconv.Unquote(a)
				if err != nil {
					t.Fatalf("line %d: bad marker argument %s: %v", i+1, a, err)
				}
				mk.args = append(mk.args, s)
			}
			out = append(out, mk)
		}
	}
	return out
}

// utf16Col returns the UTF-16 column of byte offset off in line.
func utf16Col(line string, off int) uint32 {
	return uint32(len(utf16.Encode([]rune(line[:off]))))
}

// at returns the position of the marker's first argument on its line:
// its start, or its end when end is set.
func (m marker) at(t *testing.T, end bool) protocol.Position {
	if len(m.args) == 0 {
		t.Fatalf("line %d: marker %s needs the text it points at", m.line+1, m.name)
	}
	i := strings.Index(m.code, m.args[0])
	if i < 0 {
		t.Fatalf("line %d: %q is not on the line", m.line+1, m.args[0])
	}
	if end {
		i += len(m.args[0])
	}
	return protocol.Position{Line: uint32(m.line), Character: utf16Col(m.code, i)}
}

func posText(p protocol.Position) string { return fmt.Sprintf("%d:%d", p.Line+1, p.Character+1) }

func rangeText(r protocol.Range) string { return posText(r.Start) + "-" + posText(r.End) }

func locText(dir string, l protocol.Location) string {
	return filepath.Base(docPath(string(l.URI))) + ":" + rangeText(l.Range)
}

// TestMarkers runs the #@ markers of every testdata/*.star file through a
// real client session and compares the answers with the file's golden
// (testdata/NAME.golden; go test ./lsp -run TestMarkers -update
// rewrites them). #@diag markers must also match a diagnostic exactly.
func TestMarkers(t *testing.T) {
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.star"))
	if len(files) < 5 {
		t.Fatalf("want the marker files in testdata, found %d", len(files))
	}
	c := startClient(t, Options{})
	c.initialize(dir, false)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := string(src)
			u := c.open(path, text)
			diags := c.diagnostics(u, 1)
			var out bytes.Buffer
			fmt.Fprintf(&out, "-- diagnostics --\n")
			for _, d := range diags {
				fmt.Fprintf(&out, "%s %s [%v] %s\n", rangeText(d.Range), map[protocol.DiagnosticSeverity]string{1: "error", 2: "warning"}[d.Severity], d.Code, d.Message)
			}
			td := protocol.TextDocumentIdentifier{URI: u}
			for _, m := range parseMarkers(t, text) {
				switch m.name {
				case "diag":
					p := m.at(t, false)
					if !slices.ContainsFunc(diags, func(d protocol.Diagnostic) bool { return d.Range.Start == p && d.Code == m.args[1] }) {
						t.Errorf("line %d: no %s diagnostic at %s; got %+v", m.line+1, m.args[1], posText(p), diags)
					}
				case "hover":
					p := m.at(t, false)
					var h *protocol.Hover
					c.mustCall(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: p}}, &h)
					fmt.Fprintf(&out, "-- hover %s %q --\n", posText(p), m.args[0])
					if h != nil {
						fmt.Fprintf(&out, "%s\n%s\n", rangeText(*h.Range), h.Contents.Value)
					}
				case "complete":
					p := m.at(t, true)
					var list protocol.CompletionList
					c.mustCall(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: p}}, &list)
					fmt.Fprintf(&out, "-- complete %s %q (%d items) --\n", posText(p), m.args[0], len(list.Items))
					for i, it := range list.Items {
						if i == 12 {
							fmt.Fprintf(&out, "...\n")
							break
						}
						// Without a range, the text goes in at the cursor.
						rng, text := rangeText(protocol.Range{Start: p, End: p}), it.Label
						if it.InsertText != "" {
							text = it.InsertText
						}
						if it.TextEdit != nil {
							rng, text = rangeText(it.TextEdit.Range), it.TextEdit.NewText
						}
						fmt.Fprintf(&out, "%s [%s] %q", it.Label, rng, text)
						if it.Detail != "" {
							fmt.Fprintf(&out, " — %s", it.Detail)
						}
						out.WriteString("\n")
					}
				case "sig":
					p := m.at(t, true)
					var h *protocol.SignatureHelp
					c.mustCall(protocol.MethodTextDocumentSignatureHelp, &protocol.SignatureHelpParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: p}}, &h)
					fmt.Fprintf(&out, "-- sig %s %q --\n", posText(p), m.args[0])
					if h != nil && len(h.Signatures) > 0 {
						s := h.Signatures[0]
						active := "none"
						if int(h.ActiveParameter) < len(s.Parameters) {
							active = s.Parameters[h.ActiveParameter].Label
						}
						fmt.Fprintf(&out, "%s\nactive: %s\n", s.Label, active)
					}
				case "def":
					p := m.at(t, false)
					var locs []protocol.Location
					c.mustCall(protocol.MethodTextDocumentDefinition, &protocol.DefinitionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: p}}, &locs)
					fmt.Fprintf(&out, "-- def %s %q --\n", posText(p), m.args[0])
					for _, l := range locs {
						fmt.Fprintf(&out, "%s\n", locText(dir, l))
					}
				case "refs":
					p := m.at(t, false)
					var locs []protocol.Location
					c.mustCall(protocol.MethodTextDocumentReferences, &protocol.ReferenceParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: p}, Context: protocol.ReferenceContext{IncludeDeclaration: true}}, &locs)
					fmt.Fprintf(&out, "-- refs %s %q --\n", posText(p), m.args[0])
					var lines []string
					for _, l := range locs {
						lines = append(lines, locText(dir, l))
					}
					sort.Strings(lines)
					fmt.Fprintf(&out, "%s\n", strings.Join(lines, "\n"))
				case "rename":
					p := m.at(t, false)
					var we protocol.WorkspaceEdit
					c.mustCall(protocol.MethodTextDocumentRename, &protocol.RenameParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: td, Position: p}, NewName: m.args[1]}, &we)
					fmt.Fprintf(&out, "-- rename %s %q -> %q --\n", posText(p), m.args[0], m.args[1])
					var lines []string
					for uri, edits := range we.Changes {
						for _, e := range edits {
							lines = append(lines, fmt.Sprintf("%s:%s %q", filepath.Base(docPath(string(uri))), rangeText(e.Range), e.NewText))
						}
					}
					sort.Strings(lines)
					fmt.Fprintf(&out, "%s\n", strings.Join(lines, "\n"))
				case "action":
					p := m.at(t, false)
					var actions []protocol.CodeAction
					c.mustCall(protocol.MethodTextDocumentCodeAction, &protocol.CodeActionParams{TextDocument: td, Range: protocol.Range{Start: p, End: p}}, &actions)
					fmt.Fprintf(&out, "-- action %s %q --\n", posText(p), m.args[0])
					for _, a := range actions {
						fmt.Fprintf(&out, "%s\n", a.Title)
						for _, e := range a.Edit.Changes[u] {
							fmt.Fprintf(&out, "  %s %q\n", rangeText(e.Range), e.NewText)
						}
					}
				case "format":
					var edits []protocol.TextEdit
					c.mustCall(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: td}, &edits)
					fmt.Fprintf(&out, "-- format (%d edits) --\n%s", len(edits), applyEdits(t, text, edits))
				default:
					t.Fatalf("line %d: unknown marker %s", m.line+1, m.name)
				}
			}
			got := strings.ReplaceAll(out.String(), dir+string(filepath.Separator), "$DIR/")
			out.Reset()
			out.WriteString(got)
			golden := strings.TrimSuffix(path, ".star") + ".golden"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./lsp -run TestMarkers -update)", err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("answers differ from %s (rerun with -update to accept):\n%s", filepath.Base(golden), diff.Diff("want", want, "got", []byte(got)))
			}
		})
	}
	c.shutdown()
}

// applyEdits applies LSP text edits (UTF-16 positions) to text.
func applyEdits(t *testing.T, text string, edits []protocol.TextEdit) string {
	lines := analysis.NewLines([]byte(text))
	type span struct {
		start, end int
		text       string
	}
	var spans []span
	for _, e := range edits {
		a, err := offsetOf(lines, []byte(text), e.Range.Start, false)
		if err != nil {
			a = len(text)
		}
		b, err := offsetOf(lines, []byte(text), e.Range.End, false)
		if err != nil {
			b = len(text)
		}
		spans = append(spans, span{a, b, e.NewText})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start > spans[j].start })
	for _, s := range spans {
		text = text[:s.start] + s.text + text[s.end:]
	}
	return text
}
