package sizetest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Marked lists the tests under root (a module's root) that call
// SkipUnderRace, sorted by directory and name. A call outside a Test
// function is an error: nothing would run it.
func Marked(root string) ([]Test, error) {
	var out []Test
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		dir := "./" + filepath.ToSlash(rel)
		var fn string
		var errs []string
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok {
				fn = fd.Name.Name
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "SkipUnderRace" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "sizetest" {
				return true
			}
			if !strings.HasPrefix(fn, "Test") {
				errs = append(errs, fmt.Sprintf("%s: sizetest.SkipUnderRace is called in %s, not a Test function", fset.Position(call.Pos()), fn))
				return true
			}
			out = append(out, Test{Dir: dir, Name: fn})
			return true
		})
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir < out[j].Dir
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}
