package starlib

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// suggestNames adds a "did you mean" to every "undefined: NAME" error of
// a resolve error list, choosing the nearest name that is in scope at the
// error: a local of an enclosing function or comprehension, a global or
// loaded symbol of the file, a predeclared AML builtin or a Starlark
// universal. A syntax error gets ExplainSyntax's words. Other errors are
// returned unchanged.
func suggestNames(err error, path string, src any, predeclared starlark.StringDict) error {
	var se syntax.Error
	if errors.As(err, &se) {
		return ExplainSyntax(se, src)
	}
	var list resolve.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	var f *syntax.File
	changed := false
	out := make(resolve.ErrorList, len(list))
	for i, e := range list {
		out[i] = e
		name, ok := strings.CutPrefix(e.Msg, "undefined: ")
		if !ok {
			continue
		}
		if f == nil {
			if f, _ = FileOptions.Parse(path, src, 0); f == nil {
				return err
			}
		}
		if s := nearestName(name, namesInScope(f, e.Pos, predeclared)); s != "" {
			out[i].Msg = fmt.Sprintf("%s (did you mean %s?)", e.Msg, s)
			changed = true
		}
	}
	if !changed && len(list) == 1 {
		return err
	}
	return resolveErrors{out}
}

// resolveErrors reports every error of a resolve error list, one per
// line (the list's own Error names only the first); errors.As still finds
// the resolve.ErrorList.
type resolveErrors struct{ list resolve.ErrorList }

func (e resolveErrors) Error() string {
	lines := make([]string, len(e.list))
	for i, x := range e.list {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

func (e resolveErrors) Unwrap() error { return e.list }

// namesInScope lists the names visible at pos in f, sorted.
func namesInScope(f *syntax.File, pos syntax.Position, predeclared starlark.StringDict) []string {
	seen := map[string]bool{}
	for name := range predeclared {
		seen[name] = true
	}
	for name := range starlark.Universe {
		seen[name] = true
	}
	for _, b := range bindings(f) {
		if b.scope == nil || contains(b.scope, pos) {
			seen[b.name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// binding is one name bound in a file and the innermost function or
// comprehension it is local to (nil for a global).
type binding struct {
	name  string
	scope syntax.Node
}

// bindings lists the names f binds: assignments, definitions, parameters,
// loop and comprehension variables and loaded symbols.
func bindings(f *syntax.File) []binding {
	var out []binding
	var scopes []syntax.Node
	var walk func(n syntax.Node) bool
	innermost := func() syntax.Node {
		if len(scopes) == 0 {
			return nil
		}
		return scopes[len(scopes)-1]
	}
	bindExpr := func(e syntax.Expr, scope syntax.Node) {
		syntax.Walk(e, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.Ident:
				out = append(out, binding{n.Name, scope})
			case *syntax.IndexExpr, *syntax.DotExpr:
				return false // x[i] = v and x.f = v bind nothing
			}
			return true
		})
	}
	bindParams := func(params []syntax.Expr, scope syntax.Node) {
		for _, p := range params {
			switch p := p.(type) {
			case *syntax.Ident:
				out = append(out, binding{p.Name, scope})
			case *syntax.BinaryExpr: // name = default
				if id, ok := p.X.(*syntax.Ident); ok {
					out = append(out, binding{id.Name, scope})
				}
			case *syntax.UnaryExpr: // *args, **kwargs
				if id, ok := p.X.(*syntax.Ident); ok {
					out = append(out, binding{id.Name, scope})
				}
			}
		}
	}
	walk = func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.AssignStmt:
			bindExpr(n.LHS, innermost())
		case *syntax.ForStmt:
			bindExpr(n.Vars, innermost())
		case *syntax.LoadStmt:
			for _, id := range n.To {
				out = append(out, binding{id.Name, nil})
			}
		case *syntax.DefStmt:
			out = append(out, binding{n.Name.Name, innermost()})
			scopes = append(scopes, n)
			bindParams(n.Params, n)
			for _, s := range n.Body {
				syntax.Walk(s, walk)
			}
			scopes = scopes[:len(scopes)-1]
			return false
		case *syntax.LambdaExpr:
			scopes = append(scopes, n)
			bindParams(n.Params, n)
			syntax.Walk(n.Body, walk)
			scopes = scopes[:len(scopes)-1]
			return false
		case *syntax.Comprehension:
			scopes = append(scopes, n)
			for _, c := range n.Clauses {
				if fc, ok := c.(*syntax.ForClause); ok {
					bindExpr(fc.Vars, n)
				}
				syntax.Walk(c, walk)
			}
			syntax.Walk(n.Body, walk)
			scopes = scopes[:len(scopes)-1]
			return false
		}
		return true
	}
	for _, s := range f.Stmts {
		syntax.Walk(s, walk)
	}
	return out
}

// contains reports whether pos lies within n's span.
func contains(n syntax.Node, pos syntax.Position) bool {
	start, end := n.Span()
	before := func(a, b syntax.Position) bool {
		return a.Line < b.Line || a.Line == b.Line && a.Col <= b.Col
	}
	return before(start, pos) && before(pos, end)
}

// nearestName returns the candidate closest to name when it is close
// enough to be a likely typo: at most one edit (insertion, deletion,
// substitution or transposition of neighbours) per four characters, at
// least one; ties go to the first candidate in order.
func nearestName(name string, candidates []string) string {
	best, bestD := "", max(1, (len(name)+2)/4)+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := osaDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// osaDistance is the optimal string alignment distance of a and b: the
// Levenshtein distance with transposition of adjacent bytes as one edit.
func osaDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(a)][len(b)]
}

// SuggestName returns the name nearest to an undefined name among those
// in scope at pos in f (locals, globals, loaded symbols, the predeclared
// names of a workflow loaded with exts, Starlark universals), or "": the
// "did you mean" of the runtime's undefined-name errors.
func SuggestName(f *syntax.File, pos syntax.Position, name string, exts ...*Extension) string {
	pre, err := predeclaredWith(exts)
	if err != nil {
		pre = predeclared()
	}
	return nearestName(name, namesInScope(f, pos, pre))
}

// Nearest returns the candidate nearest to s by edit distance when it is
// close enough to be a likely misspelling, or "": the rule of the
// runtime's "did you mean" for keywords and values.
func Nearest(s string, candidates []string) string { return nearest(s, candidates) }

// NearestName returns the candidate nearest to name as "did you mean"
// offers it for undefined names (edits and transpositions of adjacent
// letters, within a quarter of the name's length), or "" when none is
// near enough. The command line uses it for commands and aml doc names.
func NearestName(name string, candidates []string) string {
	return nearestName(name, candidates)
}
