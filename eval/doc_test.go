package eval

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// listEntry matches a line of the package documentation's interface
// lists: an exported name, two or more spaces, what it is.
var listEntry = regexp.MustCompile(`^([A-Z][A-Za-z0-9_]*) {2,}\S`)

// TestPackageDocListsInterfaces keeps the package documentation's lists
// of contracts, capabilities and executor hooks complete: every exported
// interface type of the package is an entry of a list, and every entry
// names one.
func TestPackageDocListsInterfaces(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := map[string]string{} // interface name -> file
	var pkgDoc string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package eval ") {
			if pkgDoc != "" {
				t.Errorf("%s: a second package documentation", name)
			}
			pkgDoc = f.Doc.Text()
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() {
					declared[ts.Name.Name] = name
				}
			}
		}
	}
	if pkgDoc == "" {
		t.Fatal("no package documentation (a comment starting \"Package eval \")")
	}
	if len(declared) == 0 {
		t.Fatal("no exported interface found")
	}

	listed := map[string]bool{}
	var p comment.Parser
	for _, b := range p.Parse(pkgDoc).Content {
		code, ok := b.(*comment.Code)
		if !ok {
			continue
		}
		for _, line := range strings.Split(code.Text, "\n") {
			m := listEntry.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if listed[m[1]] {
				t.Errorf("the package documentation lists %s twice", m[1])
			}
			listed[m[1]] = true
		}
	}

	var missing, stale []string
	for name, file := range declared {
		if !listed[name] {
			missing = append(missing, name+" ("+file+")")
		}
	}
	for name := range listed {
		if _, ok := declared[name]; !ok {
			stale = append(stale, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	for _, m := range missing {
		t.Errorf("exported interface %s is in none of the package documentation's lists (doc.go)", m)
	}
	for _, s := range stale {
		t.Errorf("the package documentation lists %s, which is no exported interface of the package", s)
	}
}
