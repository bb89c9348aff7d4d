package analysis_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// TestFormatKeepsSyntax formats every .star file of the repository and
// compares the syntax trees before and after, without positions and
// comments: formatting changes layout only. Files that do not parse are
// skipped (the testdata of errors).
func TestFormatKeepsSyntax(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".star") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		before, err := starlib.FileOptions.Parse(path, src, 0)
		if err != nil {
			return nil
		}
		out, err := analysis.Format(path, src)
		if err != nil {
			if strings.Contains(err.Error(), "left as it is") {
				t.Errorf("%v", err)
			}
			return nil // buildtools parses a little differently
		}
		n++
		after, err := starlib.FileOptions.Parse(path, out, 0)
		if err != nil {
			t.Errorf("%s: the formatted file does not parse: %v\n%s", path, err, out)
			return nil
		}
		// SameSyntax and the dump of this test are two ways of saying it.
		if b, a := syntaxDump(before), syntaxDump(after); b != a || !analysis.SameSyntax(before, after) {
			t.Errorf("%s: formatting changed the syntax tree:\nbefore: %s\nafter:  %s", path, b, a)
		}
		again, err := analysis.Format(path, out)
		if err != nil || !bytes.Equal(again, out) {
			t.Errorf("%s: formatting the formatted file changes it again (err %v):\n%s\n---\n%s", path, err, out, again)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("only %d .star files were formatted; is the walk at the repository's root?", n)
	}
	t.Logf("%d files formatted", n)
}

// TestFormatKeepsLoadPlace formats a file whose load() comes after a
// statement with an effect: the load stays where it was, so the print
// still runs before the load.
func TestFormatKeepsLoadPlace(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "eval", "load_cycle_entry.star")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := analysis.Format(path, src)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(src []byte) []string {
		f, err := starlib.FileOptions.Parse(path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		var k []string
		for _, st := range f.Stmts {
			switch st.(type) {
			case *syntax.LoadStmt:
				k = append(k, "load")
			case *syntax.ExprStmt:
				k = append(k, "expr")
			case *syntax.DefStmt:
				k = append(k, "def")
			default:
				k = append(k, "other")
			}
		}
		return k
	}
	if got, want := strings.Join(kinds(out), " "), strings.Join(kinds(src), " "); got != want || want != "expr load def" {
		t.Errorf("statements after formatting: %s, want %s (as before: %s)\n%s", got, "expr load def", want, out)
	}

	// Loads, calls and lists in an order buildifier would change.
	for _, src := range []string{
		"print(1)\nload(\"b.star\", \"b\")\nload(\"a.star\", \"a\")\n",
		"load(\"b.star\", \"z\", \"a\")\nload(\"a.star\", \"a2\")\nload(\"b.star\", \"c\")\n",
		"f(**kw, x = 1)\nf(*args, g())\nf(a = 1, *b)\n",
		"x = [\"b\", \"a\"]  # keep sorted\n",
	} {
		out, err := analysis.Format("f.star", []byte(src))
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		b, err := starlib.FileOptions.Parse("f.star", []byte(src), 0)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		a, err := starlib.FileOptions.Parse("f.star", out, 0)
		if err != nil {
			t.Fatalf("%q formatted as %q: %v", src, out, err)
		}
		if !analysis.SameSyntax(b, a) || syntaxDump(b) != syntaxDump(a) {
			t.Errorf("formatting changed the meaning of %q: %q", src, out)
		}
	}
}

// TestSameSyntax checks that the comparison (and this test's dump) keeps what a program does and
// leaves out its layout.
func TestSameSyntax(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"f('x', y=1)\n", "f(\n    \"x\",\n    y = 1,  # why\n)\n", true},
		{"x = 1.\n", "x = 1.0\n", true},
		{"x = 0x10\n", "x = 16\n", true},
		{"def f():\n  \"\"\"Doc.\n\n  More.\n  \"\"\"\n  return 1\n", "def f():\n    \"\"\"Doc.\n\n    More.\n    \"\"\"\n    return 1\n", true},
		{"f(a, b)\n", "f(b, a)\n", false},
		{"print(1)\nload('a.star', 'a')\n", "load('a.star', 'a')\nprint(1)\n", false},
		{"load('a.star', 'a', 'b')\n", "load('a.star', 'b', 'a')\n", false},
		{"x = 'a b'\n", "x = 'a  b'\n", false},
		{"x = 1\n", "x = 1.0\n", false},
		{"y = not not x\n", "y = not (not x)\n", true},
		{"y = (a + b) * c\n", "y = a + b * c\n", false},
	} {
		fa, err := starlib.FileOptions.Parse("a.star", []byte(c.a), 0)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := starlib.FileOptions.Parse("b.star", []byte(c.b), 0)
		if err != nil {
			t.Fatal(err)
		}
		fb.Path = fa.Path
		if same := analysis.SameSyntax(fa, fb); same != c.same {
			t.Errorf("%q and %q: same %v, want %v\n%s\n%s", c.a, c.b, same, c.same, syntaxDump(fa), syntaxDump(fb))
		}
		if same := syntaxDump(fa) == syntaxDump(fb); same != c.same {
			t.Errorf("%q and %q: same dumps %v, want %v\n%s\n%s", c.a, c.b, same, c.same, syntaxDump(fa), syntaxDump(fb))
		}
	}
}

// syntaxDump renders the syntax tree of n without positions, comments,
// parentheses, the spelling of literals (their values are kept) and the indentation of
// docstrings: what SameSyntax compares, written independently.
func syntaxDump(n syntax.Node) string {
	var b strings.Builder
	dump(&b, reflect.ValueOf(n))
	return b.String()
}

func dump(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if p, ok := v.Interface().(*syntax.ParenExpr); ok {
			dump(b, reflect.ValueOf(p.X))
			return
		}
		dump(b, v.Elem())
	case reflect.Slice:
		b.WriteByte('[')
		for i := range v.Len() {
			dump(b, v.Index(i))
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.Struct:
		switch n := v.Addr().Interface().(type) {
		case *syntax.Literal:
			fmt.Fprintf(b, "Literal{%s %T %v}", n.Token, n.Value, n.Value)
			return
		case *syntax.ExprStmt:
			if lit, ok := n.X.(*syntax.Literal); ok && lit.Token == syntax.STRING {
				fmt.Fprintf(b, "Doc{%q}", dedentDoc(lit.Value.(string)))
				return
			}
		}
		t := v.Type()
		b.WriteString(t.Name() + "{")
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Type == reflect.TypeOf(syntax.Position{}) || f.Name == "Options" || f.Type.String() == "interface {}" {
				continue
			}
			b.WriteString(f.Name + ":")
			dump(b, v.Field(i))
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

// dedentDoc is s without trailing blanks and without the indentation of
// its lines after the first.
func dedentDoc(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t")
		if i > 0 {
			lines[i] = strings.TrimLeft(lines[i], " \t")
		}
	}
	return strings.Join(lines, "\n")
}
