package graph

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/gomonobold"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// pngScale is how many pixels a unit of the layout takes in a PNG: the
// picture is rendered at twice its SVG size, for sharp text.
const pngScale = 2

// The PNG is drawn with the Go fonts (golang.org/x/image/font/gofont),
// whose monospaced faces have the 0.6 em advance the layout assumes, so
// no font has to be installed.
var (
	facesOnce             sync.Once
	regularFace, boldFace font.Face
	facesErr              error
)

func faces() (regular, bold font.Face, err error) {
	facesOnce.Do(func() {
		open := func(ttf []byte) (font.Face, error) {
			f, err := opentype.Parse(ttf)
			if err != nil {
				return nil, err
			}
			return opentype.NewFace(f, &opentype.FaceOptions{Size: fontSize * pngScale, DPI: 72, Hinting: font.HintingFull})
		}
		if regularFace, facesErr = open(gomono.TTF); facesErr != nil {
			return
		}
		boldFace, facesErr = open(gomonobold.TTF)
	})
	if facesErr != nil {
		return nil, nil, fmt.Errorf("cannot load the Go Mono font: %w", facesErr)
	}
	return regularFace, boldFace, nil
}

// WritePNG writes g as a PNG image, rendered in Go.
func WritePNG(w io.Writer, g *Graph) error {
	img, err := renderPNG(g)
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

func renderPNG(g *Graph) (*image.RGBA, error) {
	regular, bold, err := faces()
	if err != nil {
		return nil, err
	}
	p := layout(g)
	W := int(math.Ceil(p.w * pngScale))
	H := int(math.Ceil((p.h + noteHeight(g)) * pngScale))
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	c := &canvas{img: img}
	for _, s := range p.shapes {
		if s.kind == "frame" {
			c.node(s, regular, bold)
		}
	}
	grey := hexColor("#666666")
	for _, s := range p.shapes {
		if s.kind != "line" && s.kind != "arrow" {
			continue
		}
		for i := 1; i < len(s.points); i++ {
			a, b := s.points[i-1], s.points[i]
			c.line(a[0], a[1], b[0], b[1], 1.2, grey)
		}
		if s.kind == "arrow" && len(s.points) >= 2 {
			end := s.points[len(s.points)-1]
			c.arrowHead(end[0], end[1], grey)
		}
	}
	for _, s := range p.shapes {
		if s.kind == "box" || s.kind == "pill" {
			c.node(s, regular, bold)
		}
	}
	if g.Note != "" {
		c.text(regular, margin, p.h+fontSize, "note: "+g.Note, hexColor("#8a5a00"))
	}
	return img, nil
}

// canvas draws in layout units on a scaled image.
type canvas struct{ img *image.RGBA }

// fill fills the path that path adds (in image pixels, relative to the
// origin org) with col. The rasterizer covers only rect, the path's
// bounds in layout units, so small shapes cost little on a big picture.
func (c *canvas) fill(x, y, w, h float64, path func(r *vector.Rasterizer, ox, oy float64), col color.Color) {
	const s = float64(pngScale)
	r := image.Rect(int(math.Floor(x*s))-1, int(math.Floor(y*s))-1, int(math.Ceil((x+w)*s))+1, int(math.Ceil((y+h)*s))+1).Intersect(c.img.Bounds())
	if r.Empty() {
		return
	}
	z := vector.NewRasterizer(r.Dx(), r.Dy())
	path(z, float64(r.Min.X), float64(r.Min.Y))
	z.Draw(c.img, r, image.NewUniform(col), image.Point{})
}

// roundRect adds a rounded rectangle (layout units) to r, whose origin
// is the image pixel ox, oy.
func roundRect(r *vector.Rasterizer, ox, oy, x, y, w, h, rad float64) {
	s := float64(pngScale)
	x, y, w, h, rad = x*s-ox, y*s-oy, w*s, h*s, min(rad*s, w*s/2, h*s/2)
	f := func(v float64) float32 { return float32(v) }
	r.MoveTo(f(x+rad), f(y))
	r.LineTo(f(x+w-rad), f(y))
	r.QuadTo(f(x+w), f(y), f(x+w), f(y+rad))
	r.LineTo(f(x+w), f(y+h-rad))
	r.QuadTo(f(x+w), f(y+h), f(x+w-rad), f(y+h))
	r.LineTo(f(x+rad), f(y+h))
	r.QuadTo(f(x), f(y+h), f(x), f(y+h-rad))
	r.LineTo(f(x), f(y+rad))
	r.QuadTo(f(x), f(y), f(x+rad), f(y))
	r.ClosePath()
}

// fillRoundRect fills a rounded rectangle with col.
func (c *canvas) fillRoundRect(x, y, w, h, rad float64, col color.Color) {
	c.fill(x, y, w, h, func(r *vector.Rasterizer, ox, oy float64) { roundRect(r, ox, oy, x, y, w, h, rad) }, col)
}

func (c *canvas) node(s shape, regular, bold font.Face) {
	st := styleOf(s)
	rad := 6.0
	if s.kind == "pill" {
		rad = s.h / 2
	}
	const sw = 1.2
	stroke, fillCol := hexColor(st.stroke), hexColor(st.fill)
	if st.dashed {
		c.fillRoundRect(s.x, s.y, s.w, s.h, rad, fillCol)
		c.dashedBorder(s.x, s.y, s.w, s.h, sw, stroke)
	} else {
		c.fillRoundRect(s.x, s.y, s.w, s.h, rad, stroke)
		c.fillRoundRect(s.x+sw, s.y+sw, s.w-2*sw, s.h-2*sw, rad-sw, fillCol)
	}
	title, details := s.node.Label, s.node.Details
	y := s.y + padY + titleSize - 1
	c.text(bold, s.x+padX, y, title, hexColor("#1a1a1a"))
	for _, d := range details {
		y += detailHeight
		c.text(regular, s.x+padX, y, d, hexColor("#444444"))
	}
}

// dashedBorder strokes a rectangle's straight edges with dashes.
func (c *canvas) dashedBorder(x, y, w, h, sw float64, col color.Color) {
	const dash, gap = 5.0, 3.0
	for _, e := range [][4]float64{{x + 6, y, x + w - 6, y}, {x + 6, y + h, x + w - 6, y + h}, {x, y + 6, x, y + h - 6}, {x + w, y + 6, x + w, y + h - 6}} {
		length := math.Hypot(e[2]-e[0], e[3]-e[1])
		for t := 0.0; t < length; t += dash + gap {
			u := min(t+dash, length)
			c.line(e[0]+(e[2]-e[0])*t/length, e[1]+(e[3]-e[1])*t/length, e[0]+(e[2]-e[0])*u/length, e[1]+(e[3]-e[1])*u/length, sw, col)
		}
	}
}

// line strokes a straight segment of width sw.
func (c *canvas) line(x0, y0, x1, y1, sw float64, col color.Color) {
	dx, dy := x1-x0, y1-y0
	l := math.Hypot(dx, dy)
	if l == 0 {
		return
	}
	nx, ny := -dy/l*sw/2, dx/l*sw/2
	s := float64(pngScale)
	minX, minY := min(x0, x1)-sw, min(y0, y1)-sw
	c.fill(minX, minY, math.Abs(dx)+2*sw, math.Abs(dy)+2*sw, func(r *vector.Rasterizer, ox, oy float64) {
		f := func(v, o float64) float32 { return float32(v*s - o) }
		r.MoveTo(f(x0+nx, ox), f(y0+ny, oy))
		r.LineTo(f(x1+nx, ox), f(y1+ny, oy))
		r.LineTo(f(x1-nx, ox), f(y1-ny, oy))
		r.LineTo(f(x0-nx, ox), f(y0-ny, oy))
		r.ClosePath()
	}, col)
}

// arrowHead draws a downward arrowhead ending at x, y.
func (c *canvas) arrowHead(x, y float64, col color.Color) {
	s := float64(pngScale)
	c.fill(x-4, y-7, 8, 7, func(r *vector.Rasterizer, ox, oy float64) {
		f := func(v, o float64) float32 { return float32(v*s - o) }
		r.MoveTo(f(x, ox), f(y, oy))
		r.LineTo(f(x-4, ox), f(y-7, oy))
		r.LineTo(f(x+4, ox), f(y-7, oy))
		r.ClosePath()
	}, col)
}

// text draws s with its baseline at y.
func (c *canvas) text(face font.Face, x, y float64, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: face,
		Dot: fixed.P(int(math.Round(x*pngScale)), int(math.Round(y*pngScale)))}
	d.DrawString(s)
}

func hexColor(s string) color.RGBA {
	v, _ := strconv.ParseUint(s[1:], 16, 32)
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}
