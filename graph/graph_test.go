package graph

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

var update = flag.Bool("update", false, "rewrite the golden pictures in testdata")

func pos(line int32) eval.Position { return eval.Position{File: "review.star", Line: line, Col: 5} }

// sampleTree has every kind of node the picture draws.
func sampleTree(t *testing.T) any {
	t.Helper()
	p, err := deterministic.New(deterministic.Options{Name: "twin"})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"score": map[string]any{"type": "integer"}, "why": map[string]any{"type": "string"}}})
	if err != nil {
		t.Fatal(err)
	}
	tool, err := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look a thing up.", Execute: func(context.Context, any) (any, error) { return "ok", nil }})
	if err != nil {
		t.Fatal(err)
	}
	lane := func(name string, line int32) any {
		return &eval.Agent{Name: name, Model: "sonnet", Position: pos(line), Children: []any{
			&eval.System{Children: []any{"You review " + name + "."}},
			"Review the change: ", &eval.Script{Command: "git", Args: []string{"diff"}, Position: pos(line + 1)},
			&eval.ToolGrant{Tool: tool, Position: pos(line + 2)},
		}}
	}
	return []any{
		&eval.Workspace{ID: "repo", Save: eval.DefaultSavePolicy(), Position: pos(2), Children: []any{
			&eval.Sandbox{Access: eval.ReadWrite, Position: pos(3), Children: []any{
				&eval.File{Path: "notes.md", Position: pos(4), Children: []any{"# Notes"}},
				&eval.Parallel{Position: pos(5), Branches: []any{[]any{lane("security", 6), lane("style", 10)}}},
			}},
		}},
		&eval.Component{Name: "summary", Position: pos(20), Fn: func(*eval.ComponentContext) (any, error) { return "x", nil }},
		&eval.Agent{Name: "judge", Provider: p, Schema: schema, Position: pos(30), Children: []any{
			"Judge the <findings> & say \"why\".",
			&eval.FollowUp{Children: []any{"Now shorter."}},
		}},
	}
}

func sampleGraph(t *testing.T) *Graph {
	return Build(sampleTree(t), Options{Title: "review.star · main", AgentProvider: "opencode", SandboxProvider: "local", WorkspaceProvider: "filesystem",
		Describe: func(c *eval.Component) []string { return []string{"calls: agent() ×2"} }})
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./graph -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./graph -update rewrites it):\n--- got\n%s", name, got)
	}
}

func render(t *testing.T, g *Graph, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, g, format, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestBuild(t *testing.T) {
	g := sampleGraph(t)
	var kinds []string
	labels := map[string]*Node{}
	g.Root.Walk(func(n *Node) {
		kinds = append(kinds, n.Kind)
		labels[n.Label] = n
	})
	want := "sequence workspace sandbox file parallel sequence script agent sequence script agent component agent"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("kinds in tree order:\n got %s\nwant %s", got, want)
	}
	sec := labels[`agent "security"`]
	if sec == nil {
		t.Fatalf("no security agent among %v", labels)
	}
	for _, d := range []string{"provider: opencode (default)", "model: sonnet", "system: You review security.", "prompt: Review the change: [script]", "grants: tool lookup"} {
		if !contains(sec.Details, d) {
			t.Errorf("security agent details %q lack %q", sec.Details, d)
		}
	}
	judge := labels[`agent "judge"`]
	for _, d := range []string{"provider: twin", "schema: object {score, why}", "follow-up 1: Now shorter."} {
		if !contains(judge.Details, d) {
			t.Errorf("judge details %q lack %q", judge.Details, d)
		}
	}
	comp := labels["component summary"]
	if comp == nil || !comp.Lazy || !contains(comp.Details, "calls: agent() ×2") {
		t.Errorf("the component is not drawn lazy with its description: %+v", comp)
	}
	if p := labels["parallel (2 branches)"]; p == nil || len(p.Children) != 2 {
		t.Errorf("the parallel's list of branches was not flattened into 2 branches: %+v", p)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestExpandEntry(t *testing.T) {
	entry := &eval.Component{Name: "main", Entry: true, Position: pos(1), Fn: func(*eval.ComponentContext) (any, error) {
		return &eval.Agent{Name: "only", Position: pos(2), Children: []any{"hi"}}, nil
	}}
	g := Build(entry, Options{Expand: func(c *eval.Component) (any, error) { return eval.Expand(context.Background(), c) }})
	if g.Root.Kind != KindComponent || g.Root.Lazy || len(g.Root.Children) != 1 || g.Root.Children[0].Label != `agent "only"` || g.Note != "" {
		t.Fatalf("expanded entry: %+v (note %q)", g.Root, g.Note)
	}
	// A body that evaluates cannot be expanded: it is drawn lazy, and the
	// note names the call.
	runs := &eval.Component{Name: "main", Entry: true, Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		if _, err := cc.Evaluate(&eval.Agent{Children: []any{"x"}}); err != nil {
			return nil, err
		}
		return "never", nil
	}}
	g = Build(runs, Options{Expand: func(c *eval.Component) (any, error) { return eval.Expand(context.Background(), c) }})
	if !g.Root.Lazy || !strings.Contains(g.Note, "evaluate() in component main needs a run") {
		t.Fatalf("entry that evaluates: root %+v, note %q", g.Root, g.Note)
	}
}

func TestGolden(t *testing.T) {
	g := sampleGraph(t)
	for _, f := range []string{"mmd", "dot", "svg"} {
		golden(t, "sample."+f, render(t, g, f))
	}
}

// labelsOf are every title and detail line of g, as drawn.
func labelsOf(g *Graph) []string {
	var out []string
	g.Root.Walk(func(n *Node) {
		if n.Kind == KindSequence {
			return
		}
		out = append(out, n.Label)
		out = append(out, n.Details...)
	})
	return out
}

// CheckSVG parses svg as XML and checks that every node's label and
// detail is one of its texts and every node a group with its id.
func CheckSVG(t *testing.T, svg []byte, g *Graph) {
	t.Helper()
	texts := map[string]bool{}
	groups := map[string]bool{}
	d := xml.NewDecoder(bytes.NewReader(svg))
	var inText bool
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "text" {
				inText = true
				text.Reset()
			}
			if tok.Name.Local == "g" {
				for _, a := range tok.Attr {
					if a.Name.Local == "id" {
						groups[a.Value] = true
					}
				}
			}
		case xml.CharData:
			if inText {
				text.Write(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				texts[text.String()] = true
				inText = false
			}
		}
	}
	for _, l := range labelsOf(g) {
		if !texts[l] {
			t.Errorf("the SVG has no text %q", l)
		}
	}
	g.Root.Walk(func(n *Node) {
		if n.Kind != KindSequence && !groups[n.ID] {
			t.Errorf("the SVG has no group for node %s (%s)", n.ID, n.Label)
		}
	})
}

func TestSVG(t *testing.T) {
	g := sampleGraph(t)
	svg := render(t, g, "svg")
	CheckSVG(t, svg, g)
	if !bytes.Contains(svg, []byte(`<a href="review.star#L30">`)) {
		t.Error("the judge agent does not link to review.star#L30")
	}
	if !bytes.Contains(svg, []byte(`stroke-dasharray`)) {
		t.Error("the lazy component is not dashed")
	}
}

func TestPNG(t *testing.T) {
	g := sampleGraph(t)
	img, err := png.Decode(bytes.NewReader(render(t, g, "png")))
	if err != nil {
		t.Fatal(err)
	}
	p := layout(g)
	if b := img.Bounds(); b.Dx() < int(p.w*pngScale) || b.Dy() < int(p.h*pngScale) {
		t.Errorf("PNG is %v, want at least %.0fx%.0f", b, p.w*pngScale, p.h*pngScale)
	}
	// Every agent box is filled with the agent colour at its centre
	// left, where no text is.
	agentFill := hexColor("#e8f0fe")
	var agents int
	for _, s := range p.shapes {
		if s.kind != "box" || s.node.Kind != KindAgent {
			continue
		}
		agents++
		x, y := int((s.x+3)*pngScale), int((s.y+s.h-3)*pngScale)
		r, g, b, _ := img.At(x, y).RGBA()
		if uint8(r>>8) != agentFill.R || uint8(g>>8) != agentFill.G || uint8(b>>8) != agentFill.B {
			t.Errorf("agent %s: pixel at %d,%d is %02x%02x%02x, want the agent fill", s.node.Label, x, y, r>>8, g>>8, b>>8)
		}
	}
	if agents != 3 {
		t.Errorf("%d agent boxes laid out, want 3", agents)
	}
	// Text was drawn: some pixel of a title is dark.
	s := p.shapes[0]
	dark := false
	for x := int((s.x + padX) * pngScale); x < int((s.x+padX+60)*pngScale) && !dark; x++ {
		for y := int((s.y + padY) * pngScale); y < int((s.y+padY+titleHeight)*pngScale); y++ {
			if r, _, _, _ := img.At(x, y).RGBA(); r>>8 < 0x60 {
				dark = true
				break
			}
		}
	}
	if !dark {
		t.Error("no title text was drawn in the first box")
	}
}

func TestHTML(t *testing.T) {
	g := sampleGraph(t)
	var b bytes.Buffer
	src := []byte("a\nb\nc\nd\ne\nf\ng\n")
	if err := WriteHTML(&b, g, HTMLOptions{Source: func(string) ([]byte, error) { return src, nil }}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Self-contained: the only URL is the SVG namespace.
	urls := regexp.MustCompile(`https?://[^"' <]+`).FindAllString(page, -1)
	for _, u := range urls {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("the page names a URL: %s", u)
		}
	}
	if regexp.MustCompile(`<(script|link|img)[^>]+(src|href)=`).MatchString(page) {
		t.Error("the page loads a resource")
	}
	if strings.Contains(page, "<findings>") {
		t.Error("a label reached the page unescaped")
	}
	if !strings.Contains(page, `"excerpt":["a","b","c","d","e","f","g"]`) && !strings.Contains(page, `"excerpt":["a","b","c","d","e","f","g",""]`) {
		t.Errorf("no source excerpt for a node at line 4 in:\n%s", page)
	}
	CheckSVG(t, []byte(page[strings.Index(page, "<svg"):strings.Index(page, "</svg>")+len("</svg>")]), g)
}

func TestFormatOf(t *testing.T) {
	for in, want := range map[string]string{"a.svg": "svg", "a.PNG": "png", "x/y.mermaid": "mmd", "g.gv": "dot", "r.htm": "html", "r.html": "html", "a.mmd": "mmd"} {
		if got, err := FormatOf(in); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := FormatOf("a.jpg"); err == nil || !strings.Contains(err.Error(), ".mmd, .dot, .svg, .png or .html") {
		t.Errorf("FormatOf(a.jpg): %v", err)
	}
}

// BenchmarkSVG10k lays out and draws a fan-out of 10,000 agents.
func BenchmarkSVG10k(b *testing.B) {
	branches := make([]any, 10000)
	for i := range branches {
		branches[i] = &eval.Agent{Position: pos(int32(i + 1)), Children: []any{"p"}}
	}
	g := Build(&eval.Parallel{Branches: branches}, Options{})
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteSVG(io.Discard, g); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWideParallel checks that a wide fan-out is cut: its first
// branches, a box counting the rest, and its last branch.
func TestWideParallel(t *testing.T) {
	branches := make([]any, 100)
	for i := range branches {
		branches[i] = &eval.Agent{Name: fmt.Sprint("w", i), Position: pos(int32(i + 1)), Children: []any{"p"}}
	}
	g := Build(&eval.Parallel{Branches: branches, Position: pos(1)}, Options{})
	var labels []string
	for _, c := range g.Root.Children {
		labels = append(labels, c.Label)
	}
	want := `agent "w0"|agent "w1"|agent "w2"|… 96 more branches|agent "w99"`
	if got := strings.Join(labels, "|"); g.Root.Label != "parallel (100 branches)" || got != want {
		t.Errorf("%s: %s, want %s", g.Root.Label, got, want)
	}
	CheckSVG(t, render(t, g, "svg"), g)
}
