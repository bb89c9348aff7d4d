package analysis

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/stdlib"
)

// module is what the analysis knows of a loaded module file.
type module struct {
	path string
	// err is why it could not be read or parsed.
	err  error
	dir  bool
	f    *syntax.File
	exps map[string]bool
	// loads are the files it loads, in order.
	loads []string
}

// moduleKey identifies a module file by its absolute path.
func moduleKey(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// module reads, parses and summarizes the module file p (once).
func (a *analyzer) module(p string) *module {
	key := moduleKey(p)
	if m, ok := a.modules[key]; ok {
		return m
	}
	m := &module{path: p}
	a.modules[key] = m
	if info, err := os.Stat(p); err == nil && info.IsDir() {
		m.dir = true
		return m
	}
	if a.opts.ReadFile == nil {
		if _, err := os.Stat(p); err != nil {
			m.err = err
			return m
		}
	}
	src, err := a.opts.readFile(p)
	if err != nil {
		m.err = err
		return m
	}
	f, err := Parse(p, src)
	if err != nil {
		m.err = err
		return m
	}
	m.f = f
	m.exps = Exports(f)
	for _, st := range f.Stmts {
		if ld, ok := st.(*syntax.LoadStmt); ok {
			if name := ld.ModuleName(); !strings.HasPrefix(name, "@") {
				m.loads = append(m.loads, starlib.ModuleFile(p, name))
			}
		}
	}
	return m
}

// Exports returns the names a module file defines at top level that
// load() can import (those not starting with "_").
func Exports(f *syntax.File) map[string]bool {
	out := map[string]bool{}
	add := func(id *syntax.Ident) {
		if !strings.HasPrefix(id.Name, "_") {
			out[id.Name] = true
		}
	}
	var targets func(e syntax.Expr)
	targets = func(e syntax.Expr) {
		switch e := e.(type) {
		case *syntax.Ident:
			add(e)
		case *syntax.TupleExpr:
			for _, x := range e.List {
				targets(x)
			}
		case *syntax.ListExpr:
			for _, x := range e.List {
				targets(x)
			}
		case *syntax.ParenExpr:
			targets(e.X)
		}
	}
	for _, st := range f.Stmts {
		switch st := st.(type) {
		case *syntax.DefStmt:
			add(st.Name)
		case *syntax.AssignStmt:
			targets(st.LHS)
		case *syntax.LoadStmt:
			for _, to := range st.To {
				add(to)
			}
		case *syntax.ForStmt:
			targets(st.Vars)
		}
	}
	return out
}

// checkLoads follows the load() statements of f (at path): the module
// must exist and be a file or a standard module, each loaded name must be
// one it exports, and no chain of loads may lead back to a module on it.
func (a *analyzer) checkLoads(f *syntax.File, path string) {
	for _, st := range f.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		name := ld.ModuleName()
		start, end := ld.Module.Span()
		var exps map[string]bool
		if strings.HasPrefix(name, "@") {
			m, ok := stdlib.Module(name)
			if !ok {
				a.report(Diagnostic{Start: start, End: end, Pos: ld.Load, Code: CodeLoadMissing, Message: fmt.Sprintf("cannot load %s: unknown standard module %q (available: %s)", name, name, strings.Join(stdlib.Names(), ", "))})
				continue
			}
			exps = map[string]bool{}
			for k := range m {
				exps[k] = true
			}
		} else {
			file := starlib.ModuleFile(path, name)
			m := a.module(file)
			switch {
			case m.dir:
				a.report(Diagnostic{Start: start, End: end, Pos: ld.Load, Code: CodeLoadDirectory, Message: fmt.Sprintf("cannot load %s: it is a directory; load a .star file", name)})
				continue
			case errors.Is(m.err, fs.ErrNotExist):
				a.report(Diagnostic{Start: start, End: end, Pos: ld.Load, Code: CodeLoadMissing, Message: fmt.Sprintf("cannot load %s: cannot read module: %v", name, m.err)})
				continue
			case m.err != nil:
				a.report(Diagnostic{Start: start, End: end, Pos: ld.Load, Code: CodeLoadError, Message: fmt.Sprintf("cannot load %s: %v", name, m.err)})
				continue
			}
			if chain := a.cycle(moduleKey(path), moduleKey(file)); chain != nil {
				a.report(Diagnostic{Start: start, End: end, Pos: ld.Load, Code: CodeLoadCycle, Message: fmt.Sprintf("cannot load %s: %s", name, starlib.LoadCycle(chain[:len(chain)-1], chain[len(chain)-1]))})
			}
			exps = m.exps
		}
		for _, from := range ld.From {
			if !exps[from.Name] {
				s, e := a.quotedSpan(from)
				if strings.HasPrefix(from.Name, "_") {
					continue // resolve reports it
				}
				msg := fmt.Sprintf("load: name %s not found in module %s", from.Name, name)
				names := make([]string, 0, len(exps))
				for n := range exps {
					names = append(names, n)
				}
				d := Diagnostic{Start: s, End: e, Pos: ld.Load, Code: CodeLoadSymbol, Message: msg}
				if sug := starlib.Nearest(from.Name, names); sug != "" {
					d.Message += fmt.Sprintf(" (did you mean %s?)", sug)
					d.Suggestion = sug
				}
				a.report(d)
			}
		}
	}
}

// cycle returns the chain from (the file analyzed) -> next -> ... -> a
// module already on the chain, when loading next leads back to from or to
// a cycle through it; nil when it does not.
func (a *analyzer) cycle(from, next string) []string {
	chain := []string{from}
	seen := map[string]bool{}
	var walk func(k string) []string
	walk = func(k string) []string {
		for i, c := range chain {
			if c == k {
				// A cycle through from, or one further down that
				// loading from runs into all the same.
				return append(append([]string(nil), chain[i:]...), k)
			}
		}
		if seen[k] {
			return nil
		}
		seen[k] = true
		m := a.modules[k]
		if m == nil {
			m = a.module(k)
		}
		chain = append(chain, k)
		defer func() { chain = chain[:len(chain)-1] }()
		for _, l := range m.loads {
			if c := walk(moduleKey(l)); c != nil {
				return c
			}
		}
		return nil
	}
	return walk(next)
}

// quotedSpan returns the span of the string literal of a load() symbol,
// whose identifier starts after the opening quote.
func (a *analyzer) quotedSpan(from *syntax.Ident) (syntax.Position, syntax.Position) {
	start := from.NamePos
	start.Col--
	lines := a.file.Lines()
	return start, lines.Position(&a.file.Path, stringEnd(a.file.Src, lines.Offset(start)))
}
