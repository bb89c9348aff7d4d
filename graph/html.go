package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"
)

// HTMLOptions configure WriteHTML.
type HTMLOptions struct {
	// Source returns the text of a file a node names (its Pos.File), for
	// the excerpt shown when the node is selected; nil or an error shows
	// none.
	Source func(file string) ([]byte, error)
}

// excerptLines is how many lines around a node's line its excerpt shows
// on each side.
const excerptLines = 3

// nodeInfo is what the page shows of a selected node.
type nodeInfo struct {
	Kind    string   `json:"kind"`
	Label   string   `json:"label"`
	Details []string `json:"details,omitempty"`
	Source  string   `json:"source,omitempty"`
	// First is the line number of Excerpt's first line.
	First   int      `json:"first,omitempty"`
	Line    int      `json:"line,omitempty"`
	Excerpt []string `json:"excerpt,omitempty"`
	Lazy    bool     `json:"lazy,omitempty"`
}

// WriteHTML writes g as one self-contained HTML page: the SVG picture,
// and a panel that shows a selected node's details, its file:line:col
// and the source lines around it. It loads nothing from the network.
func WriteHTML(w io.Writer, g *Graph, opts HTMLOptions) error {
	var svg bytes.Buffer
	writeSVG(&svg, g, layout(g))
	files := map[string][]string{}
	lines := func(file string) []string {
		if l, ok := files[file]; ok {
			return l
		}
		var l []string
		if opts.Source != nil {
			if b, err := opts.Source(file); err == nil {
				l = strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
			}
		}
		files[file] = l
		return l
	}
	info := map[string]nodeInfo{}
	g.Root.Walk(func(n *Node) {
		if n.Kind == KindSequence {
			return
		}
		ni := nodeInfo{Kind: n.Kind, Label: n.Label, Details: n.Details, Lazy: n.Lazy}
		if src, _ := source(n); src != "" {
			ni.Source = src
			if l := lines(n.Pos.File); n.Pos.Line > 0 && int(n.Pos.Line) <= len(l) {
				line := int(n.Pos.Line)
				first := max(1, line-excerptLines)
				last := min(len(l), line+excerptLines)
				ni.First, ni.Line, ni.Excerpt = first, line, l[first-1:last]
			}
		}
		info[n.ID] = ni
	})
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("cannot encode the graph's nodes: %w", err)
	}
	title := g.Title
	if title == "" {
		title = "AML workflow"
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(title))
	b.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n")
	b.WriteString("<style>\n" + htmlCSS + "</style>\n</head>\n<body>\n")
	fmt.Fprintf(&b, "<header><h1>%s</h1>", html.EscapeString(title))
	if g.Note != "" {
		fmt.Fprintf(&b, "<p class=\"note\">%s</p>", html.EscapeString(g.Note))
	}
	b.WriteString("<p class=\"hint\">Select a node to see its details and source. Zoom: <button id=\"zin\" type=\"button\">+</button> <button id=\"zout\" type=\"button\">−</button> <button id=\"zfit\" type=\"button\">1:1</button></p></header>\n")
	b.WriteString("<main><div id=\"canvas\">\n")
	b.Write(svg.Bytes())
	b.WriteString("</div>\n<aside id=\"panel\"><p class=\"hint\">No node selected.</p></aside></main>\n")
	b.WriteString("<script id=\"nodes\" type=\"application/json\">")
	b.Write(scriptSafe(data))
	b.WriteString("</script>\n<script>\n" + htmlJS + "</script>\n</body>\n</html>\n")
	_, err = w.Write(b.Bytes())
	return err
}

// scriptSafe escapes JSON for a <script> element: no "</" or "<!--" can
// end it early.
func scriptSafe(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("<"), []byte(`\u003c`))
}

const htmlCSS = `body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1a1a1a;background:#fafafa}
header{padding:10px 16px;border-bottom:1px solid #ddd;background:#fff}
h1{font-size:17px;margin:0 0 4px}
.note{margin:4px 0;color:#8a5a00}
.hint{margin:2px 0;color:#666;font-size:13px}
button{font:inherit;padding:0 8px}
main{display:flex;height:calc(100vh - 80px)}
#canvas{flex:1;overflow:auto;background:#fff}
#canvas svg{transform-origin:0 0}
#panel{width:360px;overflow:auto;border-left:1px solid #ddd;padding:10px 14px;background:#fafafa}
#panel h2{font-size:15px;margin:4px 0}
#panel ul{padding-left:18px;margin:6px 0}
#panel pre{background:#fff;border:1px solid #ddd;padding:6px;overflow:auto;font-size:12px}
#panel .hl{background:#fff3b0;display:block}
.kind{display:inline-block;font-size:12px;padding:0 6px;border-radius:8px;background:#e8e8e8}
g.node{cursor:pointer}
g.node.selected rect{stroke:#d0342c;stroke-width:2.5}
`

const htmlJS = `(function(){
"use strict";
var nodes = JSON.parse(document.getElementById("nodes").textContent);
var panel = document.getElementById("panel");
var svg = document.querySelector("#canvas svg");
var scale = 1;
function zoom(f){ scale = f === 0 ? 1 : Math.min(4, Math.max(0.2, scale * f)); svg.style.transform = "scale(" + scale + ")"; }
document.getElementById("zin").onclick = function(){ zoom(1.25); };
document.getElementById("zout").onclick = function(){ zoom(0.8); };
document.getElementById("zfit").onclick = function(){ zoom(0); };
function el(tag, text, cls){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
function show(id){
  var n = nodes[id]; if (!n) return;
  var prev = document.querySelector("g.node.selected"); if (prev) prev.classList.remove("selected");
  var g = document.getElementById(id); if (g) g.classList.add("selected");
  panel.textContent = "";
  panel.appendChild(el("span", n.kind + (n.lazy ? " (lazy)" : ""), "kind"));
  panel.appendChild(el("h2", n.label));
  if (n.details && n.details.length) { var ul = el("ul"); n.details.forEach(function(d){ ul.appendChild(el("li", d)); }); panel.appendChild(ul); }
  if (n.source) panel.appendChild(el("p", n.source));
  if (n.excerpt) {
    var pre = el("pre");
    n.excerpt.forEach(function(l, i){ var no = n.first + i; var s = el("span", String(no).padStart(4) + "  " + l + "\n", no === n.line ? "hl" : ""); pre.appendChild(s); });
    panel.appendChild(pre);
  }
}
document.querySelectorAll("g.node").forEach(function(g){
  g.addEventListener("click", function(ev){ ev.preventDefault(); show(g.id); });
});
document.body.dataset.ready = "1";
})();
`
