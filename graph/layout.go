package graph

import (
	"github.com/mattn/go-runewidth"
)

// The picture is laid out as nested boxes: a sequence stacks its
// children top to bottom with an arrow between each, a parallel() puts
// its branches side by side between a fork and a join, and a frame
// (sandbox, workspace, provide, an expanded component) encloses its
// children under a title. Text is set in a monospaced face, so a line's
// width is its column count times charWidth: the SVG and the PNG agree
// without measuring glyphs.
const (
	fontSize     = 12.0
	titleSize    = 12.0
	charWidth    = 7.2 // a monospaced face's advance at fontSize (0.6 em)
	titleHeight  = 16.0
	detailHeight = 14.0
	padX         = 10.0
	padY         = 7.0
	minBoxWidth  = 120.0
	seqGap       = 22.0 // vertical room for an arrow
	branchGap    = 18.0
	forkHeight   = 18.0
	framePad     = 12.0
	margin       = 16.0
)

// shape is a drawn element of a laid-out picture.
type shape struct {
	// kind is "box" (a node), "frame", "pill" (a parallel()'s head),
	// "line" or "arrow".
	kind string
	node *Node // box, frame, pill
	x, y float64
	w, h float64
	// points are a line's or an arrow's, in order.
	points [][2]float64
}

// picture is a laid-out graph.
type picture struct {
	w, h   float64
	shapes []shape
}

// box is the size of a laid-out subtree and how to place it.
type box struct {
	w, h float64
	// place draws the subtree with its top-left corner at x, y.
	place func(p *picture, x, y float64)
}

func textWidth(s string) float64 { return float64(runewidth.StringWidth(s)) * charWidth }

// layout lays g out.
func layout(g *Graph) *picture {
	p := &picture{}
	b := measure(g.Root)
	b.place(p, margin, margin)
	p.w, p.h = b.w+2*margin, b.h+2*margin
	return p
}

// measure lays out n's subtree.
func measure(n *Node) box {
	switch {
	case n.Kind == KindSequence:
		return measureSequence(n.Children)
	case n.Kind == KindParallel:
		return measureParallel(n)
	case n.Frame():
		return measureFrame(n)
	}
	return measureLeaf(n)
}

func leafSize(n *Node) (w, h float64) {
	title, details := n.Label, n.Details
	w = textWidth(title)
	for _, d := range details {
		w = max(w, textWidth(d))
	}
	w = max(w+2*padX, minBoxWidth)
	h = 2*padY + titleHeight + float64(len(details))*detailHeight
	return w, h
}

func measureLeaf(n *Node) box {
	w, h := leafSize(n)
	return box{w: w, h: h, place: func(p *picture, x, y float64) {
		p.shapes = append(p.shapes, shape{kind: "box", node: n, x: x, y: y, w: w, h: h})
	}}
}

func measureSequence(children []*Node) box {
	if len(children) == 0 {
		return box{place: func(*picture, float64, float64) {}}
	}
	parts := make([]box, len(children))
	var w, h float64
	for i, c := range children {
		parts[i] = measure(c)
		w = max(w, parts[i].w)
		h += parts[i].h
	}
	h += seqGap * float64(len(parts)-1)
	return box{w: w, h: h, place: func(p *picture, x, y float64) {
		cx := x + w/2
		for i, part := range parts {
			if i > 0 {
				p.shapes = append(p.shapes, shape{kind: "arrow", points: [][2]float64{{cx, y - seqGap}, {cx, y}}})
			}
			part.place(p, cx-part.w/2, y)
			y += part.h + seqGap
		}
	}}
}

func measureParallel(n *Node) box {
	headW, headH := leafSize(n)
	branches := make([]box, len(n.Children))
	var bw, bh float64
	for i, c := range n.Children {
		branches[i] = measure(c)
		bw += branches[i].w
		bh = max(bh, branches[i].h)
	}
	if len(branches) > 1 {
		bw += branchGap * float64(len(branches)-1)
	}
	w := max(headW, bw)
	h := headH
	if len(branches) > 0 {
		h += forkHeight + bh + forkHeight
	}
	return box{w: w, h: h, place: func(p *picture, x, y float64) {
		cx := x + w/2
		p.shapes = append(p.shapes, shape{kind: "pill", node: n, x: cx - headW/2, y: y, w: headW, h: headH})
		if len(branches) == 0 {
			return
		}
		top := y + headH
		forkY := top + forkHeight/2
		joinY := top + forkHeight + bh + forkHeight/2
		bx := cx - bw/2
		first, last := 0.0, 0.0
		for i, br := range branches {
			bcx := bx + br.w/2
			if i == 0 {
				first = bcx
			}
			last = bcx
			p.shapes = append(p.shapes, shape{kind: "arrow", points: [][2]float64{{bcx, forkY}, {bcx, top + forkHeight}}})
			br.place(p, bx, top+forkHeight)
			p.shapes = append(p.shapes, shape{kind: "line", points: [][2]float64{{bcx, top + forkHeight + br.h}, {bcx, joinY}}})
			bx += br.w + branchGap
		}
		p.shapes = append(p.shapes,
			shape{kind: "line", points: [][2]float64{{cx, top}, {cx, forkY}}},
			shape{kind: "line", points: [][2]float64{{min(first, cx), forkY}, {max(last, cx), forkY}}},
			shape{kind: "line", points: [][2]float64{{min(first, cx), joinY}, {max(last, cx), joinY}}},
		)
	}}
}

func measureFrame(n *Node) box {
	title, details := n.Label, n.Details
	headW := textWidth(title)
	for _, d := range details {
		headW = max(headW, textWidth(d))
	}
	headW += 2 * padX
	headH := padY + titleHeight + float64(len(details))*detailHeight + padY/2
	inner := measureSequence(n.Children)
	w := max(headW, inner.w+2*framePad, minBoxWidth)
	h := headH + inner.h + framePad
	if len(n.Children) == 0 {
		h = headH + padY
	}
	return box{w: w, h: h, place: func(p *picture, x, y float64) {
		p.shapes = append(p.shapes, shape{kind: "frame", node: n, x: x, y: y, w: w, h: h})
		inner.place(p, x+(w-inner.w)/2, y+headH)
	}}
}
