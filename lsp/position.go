package lsp

import (
	"fmt"
	"path/filepath"
	"unicode/utf8"

	"go.lsp.dev/protocol"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib/analysis"
)

// offsetOf returns the byte offset of a protocol position in text. A line
// past the end is an error; a character past the end of its line is the
// end of the line, as the protocol says.
func offsetOf(lines *analysis.Lines, text []byte, p protocol.Position, utf8Units bool) (int, error) {
	if int(p.Line) >= lines.Count() {
		return 0, invalidParams("position %d:%d is outside the document, which has %d lines", p.Line, p.Character, lines.Count())
	}
	start := lines.LineStart(int(p.Line) + 1)
	line := lines.Line(int(p.Line) + 1)
	units := uint32(0)
	off := 0
	for off < len(line) && units < p.Character {
		r, size := utf8.DecodeRune(line[off:])
		switch {
		case utf8Units:
			units += uint32(size)
		case r >= 0x10000:
			units += 2
		default:
			units++
		}
		off += size
	}
	return start + off, nil
}

// starlarkPos converts a protocol position to a Starlark one.
func starlarkPos(d *document, p protocol.Position, utf8Units bool) (syntax.Position, int, error) {
	off, err := offsetOf(d.lines, d.text, p, utf8Units)
	if err != nil {
		return syntax.Position{}, 0, err
	}
	return d.lines.Position(&d.path, off), off, nil
}

// protoPos converts a Starlark position of a text to a protocol one.
func protoPos(lines *analysis.Lines, p syntax.Position, utf8Units bool) protocol.Position {
	if p.Line < 1 {
		return protocol.Position{}
	}
	line := lines.Line(int(p.Line))
	units := uint32(0)
	off := 0
	for col := int32(1); col < p.Col && off < len(line); col++ {
		r, size := utf8.DecodeRune(line[off:])
		switch {
		case utf8Units:
			units += uint32(size)
		case r >= 0x10000:
			units += 2
		default:
			units++
		}
		off += size
	}
	return protocol.Position{Line: uint32(p.Line - 1), Character: units}
}

// offsetPos converts a byte offset of a text to a protocol position.
func offsetPos(lines *analysis.Lines, path string, off int, utf8Units bool) protocol.Position {
	return protoPos(lines, lines.Position(&path, off), utf8Units)
}

// protoRange converts a Starlark range of a text; an empty range grows to
// the rune after its start so that editors can show it.
func protoRange(lines *analysis.Lines, start, end syntax.Position, utf8Units bool) protocol.Range {
	if end.Line < start.Line || end.Line == start.Line && end.Col <= start.Col {
		end = start
		if int(start.Col) <= utf8.RuneCount(lines.Line(int(start.Line))) {
			end.Col++
		}
	}
	return protocol.Range{Start: protoPos(lines, start, utf8Units), End: protoPos(lines, end, utf8Units)}
}

// location converts an analysis location, reading the file's lines from
// the snapshot.
func (sn *snapshot) location(l analysis.Location) (protocol.Location, error) {
	lines := sn.linesOf(l.Path)
	if lines == nil {
		return protocol.Location{}, fmt.Errorf("%s cannot be read", l.Path)
	}
	return protocol.Location{URI: fileURI(l.Path), Range: protoRange(lines, l.Start, l.End, sn.utf8)}, nil
}

// linesOf returns the lines of the text that positions in path refer
// to: an open document's last text that parsed, an indexed file's, else
// the file's on disk; nil when there is none.
func (sn *snapshot) linesOf(path string) *analysis.Lines {
	path = filepath.Clean(path)
	if d, ok := sn.docs[path]; ok {
		return d.parsed().lines
	}
	if e, ok := sn.index[path]; ok {
		return e.lines
	}
	if f := sn.File(path); f != nil {
		return f.Lines()
	}
	return nil
}
