package analysis

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"

	"github.com/bazelbuild/buildtools/build"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
)

// layoutRewrites are the buildtools rewrites Format applies: the ones
// that change only how the file is laid out. The others change what a
// file does or means and are left out: moving load() statements to the
// top (above statements that then run after them), merging and sorting
// loads, sorting lists and reordering call arguments (which changes the
// order in which they are evaluated).
var layoutRewrites = []string{
	"editoctal",        // 0755 is written 0o755
	"editfloat",        // .5 is written 0.5
	"collapseEmpty",    // f(\n) is written f()
	"formatdocstrings", // a docstring is re-indented with its function
}

// Format returns src formatted by buildtools (as buildifier formats a
// generic Starlark file) with only the rewrites that change layout:
// statements keep their order, load() statements included, and calls
// keep the order of their arguments.
//
// Formatting never changes what a file does: src must parse as AML (else
// Format returns the syntax error), and the formatted file has the same
// syntax tree as src except for positions,
// comments, parentheses, the spelling of literals and the indentation of
// docstrings, and Format returns an error instead of a result that would
// not.
func Format(path string, src []byte) (out []byte, err error) {
	// The AML parser first: a file it refuses gets the words and the
	// position aml check and aml run report.
	if _, err := Parse(path, src); err != nil {
		var se syntax.Error
		if errors.As(err, &se) {
			return nil, starlib.ExplainSyntax(se, src)
		}
		return nil, err
	}
	err = guard(func() error {
		f, err := parseBuild(path, src)
		if err != nil {
			return err
		}
		out = build.FormatWithRewriter(&build.Rewriter{RewriteSet: layoutRewrites}, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := guard(func() error { return sameSyntax(path, src, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// sameSyntax returns an error naming the first statement of before whose
// syntax tree differs in after, other than in layout. A before that does
// not parse as AML is an error: the generic Starlark formatter accepts
// what AML refuses (0755, "\q", def f(a=1, b)) and would rewrite it into
// something else, sometimes into a program that runs.
func sameSyntax(path string, before, after []byte) error {
	fb, err := starlib.FileOptions.Parse(path, before, 0)
	if err != nil {
		return fmt.Errorf("%w; a file that does not parse is left as it is", err)
	}
	fa, err := starlib.FileOptions.Parse(path, after, 0)
	if err != nil {
		return fmt.Errorf("%s: formatting would make the file unparsable (%v); it is left as it is", path, err)
	}
	for i, st := range fb.Stmts {
		if i >= len(fa.Stmts) || !SameSyntax(st, fa.Stmts[i]) {
			start, _ := st.Span()
			return fmt.Errorf("%s:%d:%d: formatting would change this statement beyond its layout; the file is left as it is", path, start.Line, start.Col)
		}
	}
	if len(fa.Stmts) > len(fb.Stmts) {
		start, _ := fa.Stmts[len(fb.Stmts)].Span()
		return fmt.Errorf("%s: formatting would add a statement (line %d of the result); the file is left as it is", path, start.Line)
	}
	return nil
}

// SameSyntax reports whether the syntax trees of two go.starlark.net
// nodes are the same but for what formatting may change: positions,
// comments, parentheses, the spelling of literals (their values must be
// equal) and the indentation of docstrings (string statements).
func SameSyntax(a, b syntax.Node) bool {
	return same(reflect.ValueOf(a), reflect.ValueOf(b))
}

var (
	positionType = reflect.TypeOf(syntax.Position{})
	literalType  = reflect.TypeOf(syntax.Literal{})
	exprStmtType = reflect.TypeOf(syntax.ExprStmt{})
)

func same(a, b reflect.Value) bool {
	a, b = unparen(a), unparen(b)
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case reflect.Interface, reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return same(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !same(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		t := a.Type()
		if b.Type() != t {
			return false
		}
		switch t {
		case literalType:
			la, lb := a.Addr().Interface().(*syntax.Literal), b.Addr().Interface().(*syntax.Literal)
			return la.Token == lb.Token && sameValue(la.Value, lb.Value)
		case exprStmtType:
			// A statement that is only a string (a docstring) has no
			// effect: its text is compared without its indentation.
			da, db := stringStmt(a.Addr().Interface().(*syntax.ExprStmt)), stringStmt(b.Addr().Interface().(*syntax.ExprStmt))
			if da != nil || db != nil {
				return da != nil && db != nil && docText(da.Value.(string)) == docText(db.Value.(string))
			}
		}
		for i := range t.NumField() {
			f := t.Field(i)
			// Left out: comments (unexported), positions, the resolver's
			// annotations (empty interfaces) and the file's options.
			if !f.IsExported() || f.Type == positionType || f.Name == "Options" ||
				f.Type.Kind() == reflect.Interface && f.Type.NumMethod() == 0 {
				continue
			}
			if !same(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	default:
		panic(fmt.Sprintf("analysis.SameSyntax: unexpected %s in a syntax tree", a.Type()))
	}
}

// unparen is the expression in v's parentheses, if v holds a
// parenthesized expression (the printer writes not (not x) for
// not not x; the parentheses only group, and the tree already does).
// An interface is replaced by its value.
func unparen(v reflect.Value) reflect.Value {
	for {
		if v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return v
		}
		p, ok := v.Interface().(*syntax.ParenExpr)
		if !ok {
			return v
		}
		v = reflect.ValueOf(p.X)
	}
}

// stringStmt is the string of a statement that is only a string literal
// (a docstring), or nil.
func stringStmt(st syntax.Stmt) *syntax.Literal {
	if e, ok := st.(*syntax.ExprStmt); ok {
		if lit, ok := e.X.(*syntax.Literal); ok && lit.Token == syntax.STRING {
			return lit
		}
	}
	return nil
}

// sameValue reports whether two literal values are equal and of the
// same type (1 and 1.0 are not the same).
func sameValue(a, b any) bool {
	if x, ok := a.(*big.Int); ok {
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	}
	return a == b // int64, float64 or string
}

// docText is a docstring without trailing spaces on its lines and
// without the indentation its lines after the first share.
func docText(s string) string {
	lines := strings.Split(s, "\n")
	indent := -1
	for i, l := range lines {
		l = strings.TrimRight(l, " \t")
		lines[i] = l
		if i == 0 || l == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " \t")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i := 1; i < len(lines) && indent > 0; i++ {
		if lines[i] != "" {
			lines[i] = lines[i][indent:]
		}
	}
	return strings.Join(lines, "\n")
}
