package graph

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Formats lists the output formats, as their file extensions.
var Formats = []string{"mmd", "dot", "svg", "png", "html"}

// FormatOf returns the format of an output file from its extension
// (".mermaid" is "mmd", ".gv" is "dot", ".htm" is "html"), or an error
// naming the formats.
func FormatOf(path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch ext {
	case "mermaid":
		ext = "mmd"
	case "gv":
		ext = "dot"
	case "htm":
		ext = "html"
	}
	for _, f := range Formats {
		if ext == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("%s: unknown picture format %q: name the file .mmd, .dot, .svg, .png or .html", path, ext)
}

// Write writes g in format (one of Formats).
func Write(w io.Writer, g *Graph, format string, opts HTMLOptions) error {
	switch format {
	case "mmd":
		return WriteMermaid(w, g)
	case "dot":
		return WriteDOT(w, g)
	case "svg":
		return WriteSVG(w, g)
	case "png":
		return WritePNG(w, g)
	case "html":
		return WriteHTML(w, g, opts)
	}
	return fmt.Errorf("unknown picture format %q: use one of %s", format, strings.Join(Formats, ", "))
}
