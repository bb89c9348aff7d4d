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
// eval, never the reverse), but leaf helpers that import none either.
func TestImportsNoModulePackage(t *testing.T) {
	// leaves are the module's packages eval may import: each imports no
	// package of this module itself, which is checked here too.
	leaves := map[string]bool{"github.com/aml-go/aml/internal/jsonstr": true, "github.com/aml-go/aml/internal/filekind": true}
	for leaf := range leaves {
		dir := filepath.Join("..", strings.TrimPrefix(leaf, "github.com/aml-go/aml/"))
		srcs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(srcs) == 0 {
			t.Errorf("no Go files in %s", dir)
		}
		for _, f := range srcs {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "github.com/aml-go/aml/") {
					t.Errorf("%s imports %s: a package eval imports must import no package of this module", f, path)
				}
			}
		}
	}
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
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "github.com/aml-go/aml/") && !leaves[path] {
				t.Errorf("%s imports %s: eval must import no other package of this module (but the leaves %v)", f, path, leaves)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go files in eval")
	}
}
