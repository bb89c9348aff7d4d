package analysis

import (
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
// Formatting never changes what a file does: when src parses as AML, the
// formatted file has the same syntax tree as src except for positions,
// comments, the spelling of literals and the indentation of docstrings,
// and Format returns an error instead of a result that would not.
func Format(path string, src []byte) (out []byte, err error) {
	if i := firstInvalidUTF8(src); i >= 0 {
		return nil, fmt.Errorf("%s is not UTF-8 text: invalid byte at offset %d", path, i)
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
	if err := sameSyntax(path, src, out); err != nil {
		return nil, err
	}
	return out, nil
}

// sameSyntax returns an error naming the first statement of before whose
// syntax tree differs in after, other than in layout. A before that does
// not parse as AML is not compared: there is no meaning to keep.
func sameSyntax(path string, before, after []byte) error {
	fb, err := starlib.FileOptions.Parse(path, before, 0)
	if err != nil {
		return nil
	}
	fa, err := starlib.FileOptions.Parse(path, after, 0)
	if err != nil {
		return fmt.Errorf("%s: formatting would make the file unparsable (%v); it is left as it is", path, err)
	}
	for i, st := range fb.Stmts {
		if i >= len(fa.Stmts) || SyntaxDump(st) != SyntaxDump(fa.Stmts[i]) {
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

// SyntaxDump renders the syntax tree of n (a go.starlark.net node) with
// what formatting may change left out: positions, comments, the
// spelling of literals (their values are kept) and the indentation of
// docstrings. Two nodes with equal dumps mean the same.
func SyntaxDump(n syntax.Node) string {
	var b strings.Builder
	dump(&b, reflect.ValueOf(n))
	return b.String()
}

var (
	positionType = reflect.TypeOf(syntax.Position{})
	literalType  = reflect.TypeOf(syntax.Literal{})
	exprStmtType = reflect.TypeOf(syntax.ExprStmt{})
)

func dump(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dump(b, v.Elem())
	case reflect.Slice:
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(' ')
			}
			dump(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.Struct:
		t := v.Type()
		switch t {
		case literalType:
			lit := v.Addr().Interface().(*syntax.Literal)
			fmt.Fprintf(b, "Literal{%s %s}", lit.Token, literalValue(lit.Value))
			return
		case exprStmtType:
			// A statement that is only a string (a docstring) has no
			// effect: its text is compared without its indentation.
			st := v.Addr().Interface().(*syntax.ExprStmt)
			if lit, ok := st.X.(*syntax.Literal); ok && lit.Token == syntax.STRING {
				fmt.Fprintf(b, "Doc{%q}", docText(lit.Value.(string)))
				return
			}
		}
		b.WriteString(t.Name())
		b.WriteByte('{')
		for i := range t.NumField() {
			f := t.Field(i)
			// Left out: comments (unexported), positions, the resolver's
			// annotations (empty interfaces) and the file's options.
			if !f.IsExported() || f.Type == positionType || f.Name == "Options" ||
				f.Type.Kind() == reflect.Interface && f.Type.NumMethod() == 0 {
				continue
			}
			b.WriteString(f.Name)
			b.WriteByte(':')
			dump(b, v.Field(i))
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

func literalValue(v any) string {
	switch v := v.(type) {
	case *big.Int:
		return v.String()
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprintf("%T(%v)", v, v)
	}
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
