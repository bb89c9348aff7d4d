package lsp

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayers: the protocol layer and the analysis import no provider
// package (the analysis only describes and checks the catalog's calls;
// it never runs one), and the analysis knows nothing of the protocol.
func TestLayers(t *testing.T) {
	for _, c := range []struct {
		dir    string
		banned []string
	}{
		{".", []string{"/providers", "os/exec"}},
		{"../starlib/analysis", []string{"/providers", "go.lsp.dev", "/lsp", "os/exec"}},
	} {
		files, _ := filepath.Glob(filepath.Join(c.dir, "*.go"))
		n := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			n++
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range c.banned {
					if strings.Contains(path, b) {
						t.Errorf("%s imports %s", f, path)
					}
				}
			}
		}
		if n == 0 {
			t.Fatalf("no Go files in %s", c.dir)
		}
	}
}
