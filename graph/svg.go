package graph

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// style is how a kind of node is drawn: its fill and stroke colours,
// and whether the outline is dashed (a lazy component).
type style struct {
	fill, stroke string
	dashed       bool
}

func styleOf(s shape) style {
	n := s.node
	switch {
	case s.kind == "pill":
		return style{fill: "#efe6fb", stroke: "#7b4fd0"}
	case n.Kind == KindAgent:
		return style{fill: "#e8f0fe", stroke: "#3b6fd8"}
	case n.Kind == KindComponent && n.Lazy:
		return style{fill: "#f6f6f6", stroke: "#8a8a8a", dashed: true}
	case n.Kind == KindComponent:
		return style{fill: "#fbfbfb", stroke: "#5a5a5a"}
	case n.Kind == KindScript:
		return style{fill: "#fff4e5", stroke: "#d98a1c"}
	case n.Kind == KindSandbox:
		return style{fill: "#f2fbf5", stroke: "#2e9d5b"}
	case n.Kind == KindWorkspace:
		return style{fill: "#fffbea", stroke: "#b8860b"}
	case n.Kind == KindProvide:
		return style{fill: "#ffffff", stroke: "#9a9a9a", dashed: true}
	case n.Kind == KindBudget:
		return style{fill: "#fdf0f0", stroke: "#c0504d", dashed: true}
	case n.Kind == KindMore:
		return style{fill: "#ffffff", stroke: "#b0b0b0", dashed: true}
	}
	return style{fill: "#f3f3f3", stroke: "#9a9a9a"}
}

// Source is where a node links to: its file:line:col, and a link to the
// file (relative, with #L<line>) that opens next to the workflow.
func source(n *Node) (text, href string) {
	if n.Pos.File == "" {
		return "", ""
	}
	text = n.Pos.String()
	href = n.Pos.File
	if n.Pos.Line > 0 {
		href += "#L" + strconv.Itoa(int(n.Pos.Line))
	}
	return text, href
}

// WriteSVG writes g as a standalone SVG document. Each node is a group
// with the node's id, class "node <kind>", data-kind and data-source
// attributes, a tooltip with its source position and a link to it.
func WriteSVG(w io.Writer, g *Graph) error {
	var b bytes.Buffer
	writeSVG(&b, g, layout(g))
	_, err := w.Write(b.Bytes())
	return err
}

func writeSVG(b *bytes.Buffer, g *Graph, p *picture) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="Go Mono, DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="%s">`+"\n",
		num(p.w), num(p.h+noteHeight(g)), num(p.w), num(p.h+noteHeight(g)), num(fontSize))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#666"/></marker></defs>` + "\n")
	if g.Title != "" {
		fmt.Fprintf(b, "<title>%s</title>\n", esc(g.Title))
	}
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	// Frames first, so that what they enclose is drawn over them.
	for _, s := range p.shapes {
		if s.kind == "frame" {
			writeNodeSVG(b, s)
		}
	}
	for _, s := range p.shapes {
		switch s.kind {
		case "line", "arrow":
			pts := make([]string, len(s.points))
			for i, pt := range s.points {
				pts[i] = num(pt[0]) + "," + num(pt[1])
			}
			marker := ""
			if s.kind == "arrow" {
				marker = ` marker-end="url(#arrow)"`
			}
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="#666" stroke-width="1.2"%s/>`+"\n", strings.Join(pts, " "), marker)
		}
	}
	for _, s := range p.shapes {
		if s.kind == "box" || s.kind == "pill" {
			writeNodeSVG(b, s)
		}
	}
	if g.Note != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" fill="#8a5a00">%s</text>`+"\n", num(margin), num(p.h+fontSize), esc("note: "+g.Note))
	}
	b.WriteString("</svg>\n")
}

// noteHeight is the room under the picture for the graph's note.
func noteHeight(g *Graph) float64 {
	if g.Note == "" {
		return 0
	}
	return 2 * detailHeight
}

func writeNodeSVG(b *bytes.Buffer, s shape) {
	n := s.node
	st := styleOf(s)
	src, href := source(n)
	fmt.Fprintf(b, `<g id="%s" class="node %s" data-kind="%s"`, n.ID, n.Kind, n.Kind)
	if src != "" {
		fmt.Fprintf(b, ` data-source="%s"`, esc(src))
	}
	b.WriteString(">")
	if href != "" {
		fmt.Fprintf(b, `<a href="%s">`, esc(href))
	}
	tip := n.Label
	if src != "" {
		tip += " (" + src + ")"
	}
	fmt.Fprintf(b, "<title>%s</title>", esc(tip))
	rx := "6"
	if s.kind == "pill" {
		rx = num(s.h / 2)
	}
	dash := ""
	if st.dashed {
		dash = ` stroke-dasharray="5 3"`
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="1.2"%s/>`,
		num(s.x), num(s.y), num(s.w), num(s.h), rx, st.fill, st.stroke, dash)
	title, details := n.Label, n.Details
	y := s.y + padY + titleSize - 1
	fmt.Fprintf(b, `<text x="%s" y="%s" font-weight="bold" fill="#1a1a1a">%s</text>`, num(s.x+padX), num(y), esc(title))
	for _, d := range details {
		y += detailHeight
		fmt.Fprintf(b, `<text x="%s" y="%s" fill="#444444">%s</text>`, num(s.x+padX), num(y), esc(d))
	}
	if href != "" {
		b.WriteString("</a>")
	}
	b.WriteString("</g>\n")
}

// num formats a coordinate with at most one decimal.
func num(f float64) string {
	return strconv.FormatFloat(float64(int64(f*10+0.5))/10, 'f', -1, 64)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
