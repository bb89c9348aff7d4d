package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aml-go/aml/internal/browsertest"
	"github.com/aml-go/aml/internal/peers"
)

// TestBrowserHTML opens the HTML picture in headless Chromium with the
// network off: it renders without an error or a request, every node is
// drawn, and clicking an agent shows its details and source lines.
func TestBrowserHTML(t *testing.T) {
	p := browsertest.New(t)
	g := sampleGraph(t)
	src := strings.Repeat("# line\n", 40)
	var page bytes.Buffer
	if err := WriteHTML(&page, g, HTMLOptions{Source: func(string) ([]byte, error) { return []byte(src), nil }}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "graph.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Open(t, file)
	var nodes int
	g.Root.Walk(func(n *Node) {
		if n.Kind != KindSequence {
			nodes++
		}
	})
	if got := browsertest.Eval[int](t, p, `document.querySelectorAll("g.node").length`); got != nodes {
		t.Errorf("%d node groups drawn, want %d", got, nodes)
	}
	var judge *Node
	g.Root.Walk(func(n *Node) {
		if n.Label == `agent "judge"` {
			judge = n
		}
	})
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.CSS("#"+judge.ID+" rect")), chromedp.WaitVisible(chromedp.CSS("#panel h2"))); err != nil {
		t.Fatal(err)
	}
	panel := browsertest.Eval[string](t, p, `document.getElementById("panel").innerText`)
	for _, want := range []string{`agent "judge"`, "schema: object {score, why}", "review.star:30:5", "  30  # line"} {
		if !strings.Contains(panel, want) {
			t.Errorf("the panel does not show %q:\n%s", want, panel)
		}
	}
	if sel := browsertest.Eval[string](t, p, `document.querySelector("g.node.selected").id`); sel != judge.ID {
		t.Errorf("the selected node is %s, want %s", sel, judge.ID)
	}
	p.Screenshot(t, "graph-html.png")
	p.Check(t, (&url.URL{Scheme: "file", Path: file}).String())
}

// TestBrowserMermaid renders every golden Mermaid picture (this
// package's and the examples') with the real Mermaid library in headless
// Chromium: each must parse and render to an SVG holding its labels.
func TestBrowserMermaid(t *testing.T) {
	lib := peers.File(t, "mermaid/dist/mermaid.min.js", "mermaid@12.3.0")
	p := browsertest.New(t)
	js, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.mmd"))
	more, _ := filepath.Glob(filepath.Join("..", "internal", "cli", "testdata", "graph", "*.mmd"))
	files = append(files, more...)
	if len(files) < 2 {
		t.Fatalf("golden Mermaid pictures: %v", files)
	}
	sources := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = string(b)
	}
	data, err := json.Marshal(sources)
	if err != nil {
		t.Fatal(err)
	}
	// The page renders each picture in turn and records the outcome;
	// it sets data-ready when all are done.
	page := "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body><script>" + string(js) + "</script>" +
		"<script id=\"src\" type=\"application/json\">" + strings.ReplaceAll(string(data), "<", `\u003c`) + "</script><script>" + `
window.results = {};
mermaid.initialize({startOnLoad: false, securityLevel: "strict"});
(async function () {
  var src = JSON.parse(document.getElementById("src").textContent);
  var i = 0;
  for (var name in src) {
    try {
      var out = await mermaid.render("m" + (i++), src[name]);
      results[name] = {svg: out.svg};
    } catch (e) {
      results[name] = {error: String(e && e.message || e)};
    }
  }
  document.body.dataset.ready = "1";
})();
` + "</script></body></html>"
	file := filepath.Join(t.TempDir(), "mermaid.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Open(t, file)
	results := browsertest.Eval[map[string]map[string]string](t, p, `window.results`)
	for _, f := range files {
		r := results[f]
		if r == nil {
			t.Errorf("%s: not rendered", f)
			continue
		}
		if r["error"] != "" {
			t.Errorf("Mermaid cannot render %s: %s", f, r["error"])
			continue
		}
		// Every node's title is in the rendered picture.
		for _, line := range strings.Split(sources[f], "\n") {
			i := strings.Index(line, "<b>")
			j := strings.Index(line, "</b>")
			if i < 0 || j < i {
				continue
			}
			title := strings.NewReplacer("#quot;", "&quot;", "#lt;", "&lt;", "#gt;", "&gt;", "#amp;", "&amp;").Replace(line[i+3 : j])
			if !strings.Contains(r["svg"], title) && !strings.Contains(r["svg"], strings.ReplaceAll(title, "&quot;", `"`)) {
				t.Errorf("%s: the rendered SVG lacks the title %s", f, title)
			}
		}
	}
	t.Logf("Mermaid rendered %d pictures", len(files))
	p.Check(t, fmt.Sprintf("file://%s", file))
}

// TestFirefoxHTML opens the HTML picture in headless Firefox, offline:
// it renders every node without an error or a request.
func TestFirefoxHTML(t *testing.T) {
	f := browsertest.NewFirefox(t)
	g := sampleGraph(t)
	var page bytes.Buffer
	if err := WriteHTML(&page, g, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "graph.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Open(t, file)
	var nodes int
	g.Root.Walk(func(n *Node) {
		if n.Kind != KindSequence {
			nodes++
		}
	})
	if got := browsertest.FirefoxEval[int](t, f, `document.querySelectorAll("g.node").length`); got != nodes {
		t.Errorf("%d node groups drawn, want %d", got, nodes)
	}
	f.Screenshot(t, "graph-html-firefox.png")
	f.Check(t, (&url.URL{Scheme: "file", Path: file}).String())
}
