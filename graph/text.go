package graph

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// The text formats (Mermaid and DOT) draw the same tree as the SVG:
// nodes for leaves and parallel() heads, subgraphs (clusters) for frames,
// and edges for the order things run in. A sequence links each part's
// exits to the next part's entries; a parallel() links its head to each
// branch, and every branch's exit to what follows.

// ends are the nodes a subtree is entered and left through.
type ends struct{ in, out []string }

type edge struct{ from, to string }

// links collects the edges of n's subtree and returns its ends; frame
// and leaf visit n's frames and leaves, in tree order.
func links(n *Node, edges *[]edge) ends {
	switch {
	case n.Kind == KindSequence:
		return linkSequence(n.Children, edges)
	case n.Kind == KindParallel:
		e := ends{in: []string{n.ID}}
		for _, c := range n.Children {
			ce := links(c, edges)
			for _, to := range ce.in {
				*edges = append(*edges, edge{n.ID, to})
			}
			e.out = append(e.out, ce.out...)
		}
		if len(e.out) == 0 {
			e.out = []string{n.ID}
		}
		return e
	case n.Frame():
		if len(n.Children) == 0 {
			return ends{in: []string{n.ID + "_empty"}, out: []string{n.ID + "_empty"}}
		}
		return linkSequence(n.Children, edges)
	}
	return ends{in: []string{n.ID}, out: []string{n.ID}}
}

func linkSequence(children []*Node, edges *[]edge) ends {
	var e ends
	for i, c := range children {
		ce := links(c, edges)
		if i == 0 {
			e.in = ce.in
		} else {
			for _, from := range e.out {
				for _, to := range ce.in {
					*edges = append(*edges, edge{from, to})
				}
			}
		}
		e.out = ce.out
	}
	return e
}

// WriteMermaid writes g as a Mermaid flowchart.
func WriteMermaid(w io.Writer, g *Graph) error {
	bw := bufio.NewWriter(w)
	if g.Title != "" {
		fmt.Fprintf(bw, "---\ntitle: %s\n---\n", mermaidTitle(g.Title))
	}
	bw.WriteString("flowchart TD\n")
	var classes []string
	var clicks []string
	var node func(n *Node, indent string)
	node = func(n *Node, indent string) {
		switch {
		case n.Kind == KindSequence:
			for _, c := range n.Children {
				node(c, indent)
			}
			return
		case n.Kind == KindParallel:
			fmt.Fprintf(bw, "%s%s([\"%s\"])\n", indent, n.ID, mermaidLabel(n))
			classes = append(classes, n.ID+" parallel")
			for _, c := range n.Children {
				node(c, indent)
			}
		case n.Frame():
			fmt.Fprintf(bw, "%ssubgraph %s[\"%s\"]\n", indent, n.ID, mermaidLabel(n))
			fmt.Fprintf(bw, "%s  direction TB\n", indent)
			if len(n.Children) == 0 {
				fmt.Fprintf(bw, "%s  %s_empty[\"(empty)\"]\n", indent, n.ID)
			}
			for _, c := range n.Children {
				node(c, indent+"  ")
			}
			fmt.Fprintf(bw, "%send\n", indent)
			classes = append(classes, n.ID+" "+n.Kind)
		default:
			fmt.Fprintf(bw, "%s%s[\"%s\"]\n", indent, n.ID, mermaidLabel(n))
			cls := n.Kind
			if n.Lazy {
				cls = "lazy"
			}
			classes = append(classes, n.ID+" "+cls)
		}
		if src, href := source(n); href != "" {
			clicks = append(clicks, fmt.Sprintf("click %s href \"%s\" \"%s\"", n.ID, mermaidAttr(href), mermaidAttr(src)))
		}
	}
	node(g.Root, "  ")
	var edges []edge
	links(g.Root, &edges)
	for _, e := range edges {
		fmt.Fprintf(bw, "  %s --> %s\n", e.from, e.to)
	}
	for _, c := range clicks {
		fmt.Fprintf(bw, "  %s\n", c)
	}
	for _, d := range []struct{ name, def string }{
		{"agent", "fill:#e8f0fe,stroke:#3b6fd8"},
		{"lazy", "fill:#f6f6f6,stroke:#8a8a8a,stroke-dasharray:5 3"},
		{"component", "fill:#fbfbfb,stroke:#5a5a5a"},
		{"parallel", "fill:#efe6fb,stroke:#7b4fd0"},
		{"script", "fill:#fff4e5,stroke:#d98a1c"},
		{"sandbox", "fill:#f2fbf5,stroke:#2e9d5b"},
		{"workspace", "fill:#fffbea,stroke:#b8860b"},
		{"provide", "fill:#ffffff,stroke:#9a9a9a,stroke-dasharray:5 3"},
		{"budget", "fill:#fdf0f0,stroke:#c0504d,stroke-dasharray:5 3"},
		{"file", "fill:#f3f3f3,stroke:#9a9a9a"},
		{"include", "fill:#f3f3f3,stroke:#9a9a9a"},
		{"text", "fill:#f3f3f3,stroke:#9a9a9a"},
		{"more", "fill:#ffffff,stroke:#b0b0b0,stroke-dasharray:5 3"},
	} {
		fmt.Fprintf(bw, "  classDef %s %s\n", d.name, d.def)
	}
	for _, c := range classes {
		fmt.Fprintf(bw, "  class %s\n", c)
	}
	if g.Note != "" {
		fmt.Fprintf(bw, "%%%% note: %s\n", strings.ReplaceAll(g.Note, "\n", " "))
	}
	return bw.Flush()
}

// mermaidLabel is n's title (bold) and details, one per line.
func mermaidLabel(n *Node) string {
	title, details := n.Label, n.Details
	parts := []string{"<b>" + mermaidText(title) + "</b>"}
	for _, d := range details {
		parts = append(parts, mermaidText(d))
	}
	return strings.Join(parts, "<br/>")
}

// mermaidText escapes s for a quoted Mermaid label.
func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "&", "#amp;").Replace(s)
}

func mermaidAttr(s string) string { return strings.ReplaceAll(s, `"`, "%22") }

func mermaidTitle(s string) string { return strings.NewReplacer("\n", " ", ":", " -").Replace(s) }

// WriteDOT writes g as a Graphviz DOT digraph.
func WriteDOT(w io.Writer, g *Graph) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("digraph workflow {\n")
	bw.WriteString("  graph [rankdir=TB, fontname=\"monospace\", fontsize=11, nodesep=0.3, ranksep=0.35")
	if g.Title != "" {
		fmt.Fprintf(bw, ", label=%s, labelloc=t", dotQuote(g.Title))
	}
	bw.WriteString("];\n")
	bw.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];\n")
	bw.WriteString("  edge [color=\"#666666\"];\n")
	var node func(n *Node, indent string)
	node = func(n *Node, indent string) {
		switch {
		case n.Kind == KindSequence:
			for _, c := range n.Children {
				node(c, indent)
			}
			return
		case n.Frame():
			st := styleOf(shape{kind: "frame", node: n})
			fmt.Fprintf(bw, "%ssubgraph cluster_%s {\n", indent, n.ID)
			fmt.Fprintf(bw, "%s  label=%s; labeljust=l; style=\"rounded,filled%s\"; fillcolor=%s; color=%s;\n",
				indent, dotLabel(n), dashed(st), dotQuote(st.fill), dotQuote(st.stroke))
			if src, href := source(n); href != "" {
				fmt.Fprintf(bw, "%s  URL=%s; tooltip=%s;\n", indent, dotQuote(href), dotQuote(src))
			}
			if len(n.Children) == 0 {
				fmt.Fprintf(bw, "%s  %s_empty [label=\"(empty)\", style=dashed];\n", indent, n.ID)
			}
			for _, c := range n.Children {
				node(c, indent+"  ")
			}
			fmt.Fprintf(bw, "%s}\n", indent)
			return
		}
		kind := "box"
		if n.Kind == KindParallel {
			kind = "pill"
		}
		st := styleOf(shape{kind: kind, node: n})
		shapeAttr := ""
		if kind == "pill" {
			shapeAttr = ", shape=box, style=\"rounded,filled,bold\""
		}
		fmt.Fprintf(bw, "%s%s [label=%s, fillcolor=%s, color=%s%s", indent, n.ID, dotLabel(n), dotQuote(st.fill), dotQuote(st.stroke), shapeAttr)
		if st.dashed {
			bw.WriteString(", style=\"rounded,filled,dashed\"")
		}
		if src, href := source(n); href != "" {
			fmt.Fprintf(bw, ", URL=%s, tooltip=%s", dotQuote(href), dotQuote(src))
		}
		bw.WriteString("];\n")
		for _, c := range n.Children {
			node(c, indent)
		}
	}
	node(g.Root, "  ")
	var edges []edge
	links(g.Root, &edges)
	for _, e := range edges {
		fmt.Fprintf(bw, "  %s -> %s;\n", e.from, e.to)
	}
	if g.Note != "" {
		fmt.Fprintf(bw, "  // note: %s\n", strings.ReplaceAll(g.Note, "\n", " "))
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

func dashed(st style) string {
	if st.dashed {
		return ",dashed"
	}
	return ""
}

// dotLabel is n's title and details, left-aligned lines.
func dotLabel(n *Node) string {
	title, details := n.Label, n.Details
	var b strings.Builder
	b.WriteByte('"')
	b.WriteString(dotEscape(title))
	b.WriteString(`\l`)
	for _, d := range details {
		b.WriteString(dotEscape(d))
		b.WriteString(`\l`)
	}
	b.WriteByte('"')
	return b.String()
}

func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func dotQuote(s string) string { return `"` + dotEscape(s) + `"` }
