package eval

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoModulePackage: the evaluator imports no other package of
// this module (DESIGN.md's layering: starlib and the providers point at
// eval, never the reverse), not even an internal helper.
func TestImportsNoModulePackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
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
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "github.com/aml-go/aml/") {
				t.Errorf("%s imports %s: eval must import no other package of this module", f, path)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go files in eval")
	}
}
