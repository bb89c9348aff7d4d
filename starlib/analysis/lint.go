package analysis

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bazelbuild/buildtools/build"
	"go.starlark.net/resolve"
	"go.starlark.net/syntax"
)

// CodeUnusedVariable is the code of an unused variable or private
// function, as buildtools names it.
const CodeUnusedVariable = "unused-variable"

// CodeLoadOnTop is the code of a load() after other statements, as
// buildtools names the warning.
const CodeLoadOnTop = "load-on-top"

// Finding is one warning of a linter (Options.Lint), positioned by
// line and rune column (1-based).
type Finding struct {
	// Category is the warning's code.
	Category string
	// Message is its text; only its first line is reported.
	Message string
	// StartLine, StartRune, EndLine and EndRune are its span.
	StartLine, StartRune, EndLine, EndRune int
	// Replacement, when set, is the edit that fixes it.
	Replacement *Edit
}

// lint reports the lint warnings: the analysis's own (unused variables,
// loads after statements) and the linter's findings, except those
// inside an error's range.
func (a *analyzer) lint(findings []Finding) {
	a.unusedVariables(a.file.Syntax)
	a.loadsOnTop(a.file.Syntax)
	var errs []Diagnostic // a warning inside an error's range is left out
	for _, d := range a.file.Diagnostics {
		if d.Severity == Error {
			errs = append(errs, d)
		}
	}
	for _, fd := range findings {
		p := syntax.MakePosition(&a.file.Path, int32(fd.StartLine), int32(fd.StartRune))
		if slices.ContainsFunc(errs, func(d Diagnostic) bool {
			return !before(p, d.Start) && (p.Line == d.Start.Line && p.Col == d.Start.Col || before(p, d.End))
		}) {
			continue
		}
		msg, _, _ := strings.Cut(fd.Message, "\n") // the first line; the rest is buildifier advice
		d := Diagnostic{
			Severity: Warning,
			Code:     fd.Category,
			Message:  strings.TrimSpace(msg),
			Start:    syntax.MakePosition(&a.file.Path, int32(fd.StartLine), int32(fd.StartRune)),
			End:      syntax.MakePosition(&a.file.Path, int32(fd.EndLine), int32(fd.EndRune)),
			Edit:     fd.Replacement,
		}
		if fd.Category == "load" && d.Edit == nil {
			d.Edit = a.removeLoad(d.Start)
		}
		a.report(d)
	}
}

// parseBuild parses src with buildtools. buildtools appends a newline to
// the slice it is given, which would write into src's spare capacity: a
// document's text is shared by the requests that read it, so the slice is
// capped at its length and the append copies instead.
func parseBuild(path string, src []byte) (*build.File, error) {
	return build.ParseDefault(path, src[:len(src):len(src)])
}

// guard runs fn, turning a panic of buildtools (which has a few on odd
// input) into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the formatter failed on this input: %v", r)
		}
	}()
	return fn()
}

// unusedVariables reports the local variables of functions that are
// assigned and never read, and the private (underscore) top-level
// functions and variables nothing in the file reads. Locals whose names
// start with "_" are meant to be unused; parameters are never reported.
// Suppressed, as buildtools' warnings are, by a
// "# buildifier: disable=unused-variable" comment on the line.
func (a *analyzer) unusedVariables(f *syntax.File) {
	reads := map[*syntax.Ident]int{} // by the binding's first identifier
	writes := map[*syntax.Ident]bool{}
	var mark func(e syntax.Expr)
	mark = func(e syntax.Expr) { // assignment targets
		switch e := e.(type) {
		case *syntax.Ident:
			writes[e] = true
		case *syntax.TupleExpr:
			for _, x := range e.List {
				mark(x)
			}
		case *syntax.ListExpr:
			for _, x := range e.List {
				mark(x)
			}
		case *syntax.ParenExpr:
			mark(e.X)
		}
	}
	var candidates []*syntax.Ident
	inDef := 0
	var walk func(n syntax.Node) bool
	walk = func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.DefStmt:
			writes[n.Name] = true
			for _, p := range n.Params {
				if id := paramIdent(p); id != nil {
					writes[id] = true
				} else if u, ok := p.(*syntax.UnaryExpr); ok {
					if id, ok := u.X.(*syntax.Ident); ok {
						writes[id] = true
					}
				}
			}
			if inDef == 0 && strings.HasPrefix(n.Name.Name, "_") {
				candidates = append(candidates, n.Name)
			}
			inDef++
			for _, p := range n.Params {
				syntax.Walk(p, walk)
			}
			for _, st := range n.Body {
				syntax.Walk(st, walk)
			}
			inDef--
			return false
		case *syntax.AssignStmt:
			if n.Op == syntax.EQ {
				mark(n.LHS)
				for _, id := range TargetNames(n.LHS) {
					if inDef > 0 && !strings.HasPrefix(id.Name, "_") || inDef == 0 && strings.HasPrefix(id.Name, "_") {
						candidates = append(candidates, id)
					}
				}
			}
		case *syntax.ForStmt:
			mark(n.Vars)
		case *syntax.ForClause:
			mark(n.Vars)
		case *syntax.LoadStmt:
			for _, id := range n.To {
				writes[id] = true
			}
		case *syntax.Ident:
			if b := bindingOf(n); b != nil && b.First != nil && !writes[n] {
				reads[b.First]++
			}
		}
		return true
	}
	syntax.Walk(f, walk)
	reported := map[*syntax.Ident]bool{}
	for _, id := range candidates {
		b := bindingOf(id)
		if b == nil || b.First == nil || reads[b.First] > 0 || reported[b.First] {
			continue
		}
		if b.Scope != resolve.Local && b.Scope != resolve.Cell && b.Scope != resolve.Global {
			continue
		}
		if a.disabled(id.NamePos.Line, CodeUnusedVariable) {
			continue
		}
		reported[b.First] = true
		kind := "Variable"
		if b.First != id {
			continue // reported at its first assignment
		}
		if inDefName(f, id) {
			kind = "Function"
		}
		start, end := id.Span()
		a.report(Diagnostic{Severity: Warning, Code: CodeUnusedVariable, Start: start, End: end,
			Message: fmt.Sprintf("%s %q is unused. Please remove it.", kind, id.Name)})
	}
}

// loadsOnTop warns about each load() that comes after a statement other
// than the module docstring. Such a load runs after those statements, so
// moving it changes what the file does: the warning says where it
// belongs and leaves the move to the author (aml fmt never moves it).
// Suppressed by a "# buildifier: disable=load-on-top" comment on the
// load's line.
func (a *analyzer) loadsOnTop(f *syntax.File) {
	if f == nil {
		return
	}
	var first syntax.Stmt // the first statement that is not a load
	for i, st := range f.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok {
			if first == nil && !(i == 0 && stringStmt(st) != nil) {
				first = st
			}
			continue
		}
		if first == nil || a.disabled(ld.Load.Line, CodeLoadOnTop) {
			continue
		}
		top, _ := first.Span()
		start, end := ld.Span()
		a.report(Diagnostic{Severity: Warning, Code: CodeLoadOnTop, Start: start, End: end,
			Message: fmt.Sprintf("load() after other statements runs after them; Starlark style puts loads at the top of the file, after the module docstring: move it above line %d unless the statements from there must run first", top.Line)})
	}
}

// inDefName reports whether id is the name of a top-level def.
func inDefName(f *syntax.File, id *syntax.Ident) bool {
	for _, st := range f.Stmts {
		if d, ok := st.(*syntax.DefStmt); ok && d.Name == id {
			return true
		}
	}
	return false
}

// disabled reports whether line carries a "buildifier: disable=" comment
// naming the warning.
func (a *analyzer) disabled(line int32, warning string) bool {
	text := string(a.file.Lines().Line(int(line)))
	i := strings.Index(text, "buildifier: disable=")
	if i < 0 {
		return false
	}
	for _, w := range strings.Split(text[i+len("buildifier: disable="):], ",") {
		if strings.TrimSpace(strings.Fields(w + " ")[0]) == warning {
			return true
		}
	}
	return false
}

// removeLoad returns the edit that removes the load() symbol whose
// string or alias starts at p: the whole statement when it is the only
// symbol, else the symbol and its comma.
func (a *analyzer) removeLoad(p syntax.Position) *Edit {
	if a.file.Syntax == nil {
		return nil
	}
	lines, src := a.file.Lines(), a.file.Src
	for _, st := range a.file.Syntax.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		for i := range ld.From {
			argStart := ld.From[i].NamePos
			argStart.Col-- // the quote
			if ld.To[i] != ld.From[i] {
				argStart = ld.To[i].NamePos
			}
			same := func(q syntax.Position) bool { return q.Line == p.Line && q.Col == p.Col }
			if !same(ld.From[i].NamePos) && !same(argStart) && !same(ld.To[i].NamePos) {
				continue
			}
			name := ld.From[i].Name
			if len(ld.From) == 1 {
				start := lines.LineStart(int(ld.Load.Line))
				end := lines.LineStart(int(ld.Rparen.Line) + 1)
				return &Edit{Description: fmt.Sprintf("Remove the unused load of %q", name), Start: start, End: end}
			}
			litEnd := func(j int) int {
				q := ld.From[j].NamePos
				q.Col--
				return stringEnd(src, lines.Offset(q))
			}
			argOff := func(j int) int {
				if ld.To[j] != ld.From[j] {
					return lines.Offset(ld.To[j].NamePos)
				}
				q := ld.From[j].NamePos
				q.Col--
				return lines.Offset(q)
			}
			start, end := argOff(i), litEnd(i)
			if i > 0 {
				start = litEnd(i - 1)
			} else {
				end = argOff(i + 1)
			}
			return &Edit{Description: fmt.Sprintf("Remove the unused load of %q", name), Start: start, End: end}
		}
	}
	return nil
}
