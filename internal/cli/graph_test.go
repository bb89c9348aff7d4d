package cli

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// graphExamples are the examples aml graph draws as they are (codex.star
// and review_live.star need a key and an endpoint to load; opencode.star
// and workspace_s3.star get the variables they ask for).
var graphExamples = []string{
	"collect", "context", "hello", "opencode", "release", "review", "sandbox",
	"script", "structured", "tools", "workspace_local", "workspace_revisions", "workspace_s3",
}

// TestGraphExamples draws every example in each text format and the SVG,
// and compares them with the golden files in testdata/graph (go test
// ./internal/cli -run TestGraphExamples -update rewrites them). Each SVG must
// parse as XML and hold every node label the Mermaid picture names; the
// PNG must decode; the HTML must be self-contained.
func TestGraphExamples(t *testing.T) {
	goldenDir, err := filepath.Abs(filepath.Join("testdata", "graph"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join("..", "..", "examples"))
	t.Setenv("CHANGE", "") // review.star reads it; the default is drawn
	os.Unsetenv("CHANGE")
	// opencode.star and workspace_s3.star say what they need before they
	// load without it; what they are given is not drawn.
	t.Setenv("OPENAI_API_KEY", "sk-graph")
	t.Setenv("AML_S3_BUCKET", "aml-example")
	out := t.TempDir()
	for _, name := range graphExamples {
		t.Run(name, func(t *testing.T) {
			for _, ext := range []string{"mmd", "dot", "svg"} {
				path := filepath.Join(out, name+"."+ext)
				var stderr bytes.Buffer
				if code := Main([]string{"graph", name + ".star", "-o", path}, nil, io.Discard, &stderr); code != exitOK {
					t.Fatalf("aml graph %s.star -o %s: exit %d\n%s", name, ext, code, stderr.String())
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join(goldenDir, name+"."+ext)
				if *update {
					if err := os.MkdirAll(goldenDir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (go test ./internal/cli -run TestGraphExamples -update writes it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s.%s differs from %s (-update rewrites it):\n%s", name, ext, golden, got)
				}
			}
			svg, _ := os.ReadFile(filepath.Join(out, name+".svg"))
			mmd, _ := os.ReadFile(filepath.Join(out, name+".mmd"))
			texts := svgTexts(t, svg)
			for _, label := range mermaidLabels(string(mmd)) {
				if !texts[label] {
					t.Errorf("the SVG of %s has no text %q", name, label)
				}
			}
			pngPath := filepath.Join(out, name+".png")
			if code := Main([]string{"graph", name + ".star", "-o", pngPath}, nil, io.Discard, io.Discard); code != exitOK {
				t.Fatalf("aml graph -o %s: exit %d", pngPath, code)
			}
			f, err := os.Open(pngPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := png.Decode(f); err != nil {
				t.Errorf("the PNG of %s does not decode: %v", name, err)
			}
		})
	}
}

// svgTexts are the texts of an SVG's <text> elements; it fails the test
// when svg is not XML.
func svgTexts(t *testing.T, svg []byte) map[string]bool {
	t.Helper()
	texts := map[string]bool{}
	d := xml.NewDecoder(bytes.NewReader(svg))
	var cur *strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return texts
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "text" {
				cur = &strings.Builder{}
			}
		case xml.CharData:
			if cur != nil {
				cur.Write(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" && cur != nil {
				texts[cur.String()] = true
				cur = nil
			}
		}
	}
}

// mermaidLabels are the lines of every node label of a Mermaid picture,
// unescaped.
func mermaidLabels(mmd string) []string {
	unescape := strings.NewReplacer("#quot;", `"`, "#lt;", "<", "#gt;", ">", "#amp;", "&")
	var out []string
	for _, line := range strings.Split(mmd, "\n") {
		i := strings.Index(line, `["`)
		j := strings.LastIndex(line, `"]`)
		if i < 0 || j <= i {
			continue
		}
		label := strings.NewReplacer("<b>", "", "</b>", "").Replace(line[i+2 : j])
		for _, part := range strings.Split(label, "<br/>") {
			if part != "(empty)" {
				out = append(out, unescape.Replace(part))
			}
		}
	}
	return out
}

// TestGraphDOTWithGraphviz renders every golden DOT picture with the real
// Graphviz: it must accept each one without an error or a warning.
func TestGraphDOTWithGraphviz(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot not found: install it with `apt-get install graphviz` to check the DOT pictures")
	}
	files, err := filepath.Glob(filepath.Join("testdata", "graph", "*.dot"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden DOT pictures: %v", err)
	}
	for _, f := range files {
		var stderr bytes.Buffer
		cmd := exec.Command(dot, "-Tsvg", "-o", os.DevNull, f)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("dot -Tsvg %s: %v\n%s", f, err, stderr.String())
		}
	}
}
