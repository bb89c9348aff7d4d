package analysis

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/stdlib"
)

// Location is a range of a file.
type Location struct {
	Path       string
	Start, End syntax.Position
}

// Program is the set of files the queries may cross: a language server's
// open documents over its workspace index, or the files on disk.
// Implementations must be safe for concurrent use.
type Program interface {
	// File returns the parsed and resolved file at path (ParseFile or
	// Analyze), or nil when it cannot be read or parsed.
	File(path string) *File
	// Loaders returns the paths of the known files that load path.
	Loaders(path string) []string
}

// Query answers editor questions about files of a Program: hover,
// definitions, references, renames, symbols, completion and signature
// help. It only reads; a Query is safe for concurrent use when its
// Program is.
type Query struct {
	Program    Program
	Extensions []*starlib.Extension
}

// ParseFile parses and resolves src without checking it: what the
// queries need of a file that is not open.
func ParseFile(path string, src []byte, exts ...*starlib.Extension) *File {
	file := &File{Path: path, Src: src}
	f, err := Parse(path, src)
	if err != nil {
		return file
	}
	file.Syntax = f
	file.resolveErr = resolveFile(f, exts)
	return file
}

func predeclaredSet(exts []*starlib.Extension) map[string]bool {
	pre := map[string]bool{}
	for _, n := range starlib.Predeclared(exts...) {
		pre[n] = true
	}
	return pre
}

// Lines returns the line index of the file's source.
func (f *File) Lines() *Lines {
	f.linesOnce.Do(func() { f.lines = NewLines(f.Src) })
	return f.lines
}

// spot is what lies under a position: the identifier and its ancestors.
type spot struct {
	id *syntax.Ident
	// path is the chain of enclosing nodes, outermost first (id last).
	path []syntax.Node
}

func (s *spot) parent(n int) syntax.Node {
	if i := len(s.path) - 1 - n; i >= 0 {
		return s.path[i]
	}
	return nil
}

func contains(n syntax.Node, p syntax.Position) bool {
	start, end := n.Span()
	return !before(p, start) && !before(end, p)
}

// before reports whether p comes before q.
func before(p, q syntax.Position) bool {
	return p.Line < q.Line || p.Line == q.Line && p.Col < q.Col
}

// at finds the identifier at p (a position on its first rune up to just
// after its last).
func at(f *syntax.File, p syntax.Position) *spot {
	var stack []syntax.Node
	var found *spot
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		if found != nil {
			stack = append(stack, n)
			return false
		}
		stack = append(stack, n)
		if id, ok := n.(*syntax.Ident); ok && contains(id, p) {
			found = &spot{id: id, path: slices.Clone(stack)}
		}
		return true
	})
	if found != nil {
		return found
	}
	// The quoted symbols of load(): the identifier starts after the quote.
	for _, st := range f.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		for _, id := range ld.From {
			start, end := id.Span()
			start.Col--
			end.Col++
			if !before(p, start) && !before(end, p) {
				return &spot{id: id, path: []syntax.Node{f, ld, id}}
			}
		}
	}
	return nil
}

// loadOf returns the load statement and index that binds id (as its
// local name or its quoted symbol), or nil.
func loadOf(f *syntax.File, id *syntax.Ident) (*syntax.LoadStmt, int) {
	for _, st := range f.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		for i := range ld.To {
			if ld.To[i] == id || ld.From[i] == id {
				return ld, i
			}
		}
	}
	return nil, -1
}

// sameBinding reports whether two bindings are one variable: a closure's
// free variable is a binding of its own with the same first identifier.
func sameBinding(a, b *resolve.Binding) bool {
	return a != nil && b != nil && (a == b || a.First != nil && a.First == b.First)
}

func bindingOf(id *syntax.Ident) *resolve.Binding {
	b, _ := id.Binding.(*resolve.Binding)
	return b
}

// topDef returns the top-level definition of name in f: its def
// statement or the first assignment, and the defining identifier.
func topDef(f *syntax.File, name string) (syntax.Stmt, *syntax.Ident) {
	for _, st := range f.Stmts {
		switch st := st.(type) {
		case *syntax.DefStmt:
			if st.Name.Name == name {
				return st, st.Name
			}
		case *syntax.AssignStmt:
			for _, id := range TargetNames(st.LHS) {
				if id.Name == name {
					return st, id
				}
			}
		}
	}
	return nil, nil
}

// TargetNames returns the names an assignment or loop target binds: a
// name, or the names of a tuple or list of targets (in parentheses or
// not).
func TargetNames(e syntax.Expr) []*syntax.Ident {
	switch e := e.(type) {
	case *syntax.Ident:
		return []*syntax.Ident{e}
	case *syntax.TupleExpr:
		var out []*syntax.Ident
		for _, x := range e.List {
			out = append(out, TargetNames(x)...)
		}
		return out
	case *syntax.ListExpr:
		var out []*syntax.Ident
		for _, x := range e.List {
			out = append(out, TargetNames(x)...)
		}
		return out
	case *syntax.ParenExpr:
		return TargetNames(e.X)
	}
	return nil
}

// modulePath returns the file a load of name from path refers to, or ""
// for @std modules.
func modulePath(from, name string) string {
	if strings.HasPrefix(name, "@") {
		return ""
	}
	return starlib.ModuleFile(from, name)
}

func identLocation(path string, id *syntax.Ident) Location {
	start, end := id.Span()
	return Location{Path: path, Start: start, End: end}
}

// symbol names a top-level binding of a file: what references and
// renames follow across load().
type symbol struct {
	path, name string
}

// canonical returns the file-level symbol id stands for: a global of f,
// or the global of a loaded file that a load binds; ok is false for
// locals, builtins and @std symbols.
func canonical(f *File, id *syntax.Ident) (symbol, bool) {
	if ld, i := loadOf(f.Syntax, id); ld != nil {
		m := modulePath(f.Path, ld.ModuleName())
		return symbol{m, ld.From[i].Name}, m != ""
	}
	b := bindingOf(id)
	if b == nil || b.First == nil {
		return symbol{}, false
	}
	if ld, i := loadOf(f.Syntax, b.First); ld != nil {
		m := modulePath(f.Path, ld.ModuleName())
		return symbol{m, ld.From[i].Name}, m != ""
	}
	if b.Scope == resolve.Global {
		return symbol{f.Path, id.Name}, true
	}
	return symbol{}, false
}

// Definition returns where the name at p is defined, across load(); nil
// for builtins and positions that are not on a name.
func (q *Query) Definition(f *File, p syntax.Position) []Location {
	if f == nil || f.Syntax == nil {
		return nil
	}
	s := at(f.Syntax, p)
	if s == nil {
		if ld := loadAt(f.Syntax, p); ld != nil {
			if m := modulePath(f.Path, ld.ModuleName()); m != "" {
				start := syntax.MakePosition(&m, 1, 1)
				return []Location{{Path: m, Start: start, End: start}}
			}
		}
		return nil
	}
	if sym, ok := canonical(f, s.id); ok && sym.path != f.Path {
		if mf := q.Program.File(sym.path); mf != nil && mf.Syntax != nil {
			if _, id := topDef(mf.Syntax, sym.name); id != nil {
				return []Location{identLocation(sym.path, id)}
			}
		}
		return nil
	}
	if b := bindingOf(s.id); b != nil && b.First != nil {
		return []Location{identLocation(f.Path, b.First)}
	}
	return nil
}

// loadAt returns the load statement whose module string contains p.
func loadAt(f *syntax.File, p syntax.Position) *syntax.LoadStmt {
	for _, st := range f.Stmts {
		if ld, ok := st.(*syntax.LoadStmt); ok && contains(ld.Module, p) {
			return ld
		}
	}
	return nil
}

// occurrence is one place a symbol's name is written; quoted is set for
// the string of a load() symbol.
type occurrence struct {
	path   string
	id     *syntax.Ident
	quoted bool
	// alias is set for an unaliased load symbol ("x" binds x): renaming
	// the local name alone would need an alias.
	unaliased bool
}

// occurrences returns every place the name at p is written: within its
// function for a local, and for a top-level symbol in its file and in the
// files that load it.
func (q *Query) occurrences(f *File, p syntax.Position) ([]occurrence, *syntax.Ident, error) {
	if f == nil || f.Syntax == nil {
		return nil, nil, fmt.Errorf("%s does not parse", f.Path)
	}
	s := at(f.Syntax, p)
	if s == nil {
		return nil, nil, fmt.Errorf("no name at %d:%d", p.Line, p.Col)
	}
	sym, ok := canonical(f, s.id)
	if !ok {
		b := bindingOf(s.id)
		if b == nil || b.Scope == resolve.Predeclared || b.Scope == resolve.Universal || b.Scope == resolve.Undefined {
			return nil, s.id, fmt.Errorf("%s is not defined in this file", s.id.Name)
		}
		return localOccurrences(f, b), s.id, nil
	}
	var out []occurrence
	if sf := q.Program.File(sym.path); sf != nil && sf.Syntax != nil {
		out = append(out, globalOccurrences(sf, sym.name)...)
	}
	for _, lp := range q.Program.Loaders(sym.path) {
		lf := q.Program.File(lp)
		if lf == nil || lf.Syntax == nil {
			continue
		}
		out = append(out, loaderOccurrences(lf, sym)...)
	}
	if len(out) == 0 { // the defining file is unknown: this file's uses
		out = loaderOccurrences(f, sym)
	}
	return out, s.id, nil
}

func localOccurrences(f *File, b *resolve.Binding) []occurrence {
	var out []occurrence
	seen := map[*syntax.Ident]bool{}
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok && !seen[id] && sameBinding(bindingOf(id), b) {
			seen[id] = true
			out = append(out, occurrence{path: f.Path, id: id})
		}
		return true
	})
	return out
}

func globalOccurrences(f *File, name string) []occurrence {
	var out []occurrence
	syntax.Walk(f.Syntax, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok && id.Name == name {
			if b := bindingOf(id); b != nil && b.Scope == resolve.Global {
				out = append(out, occurrence{path: f.Path, id: id})
			}
		}
		return true
	})
	return out
}

// loaderOccurrences returns the load() symbols of f that import sym and
// the uses of the names they bind.
func loaderOccurrences(f *File, sym symbol) []occurrence {
	var out []occurrence
	for _, st := range f.Syntax.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok || modulePath(f.Path, ld.ModuleName()) != sym.path {
			continue
		}
		for i := range ld.From {
			if ld.From[i].Name != sym.name {
				continue
			}
			unaliased := ld.From[i] == ld.To[i]
			out = append(out, occurrence{path: f.Path, id: ld.From[i], quoted: true, unaliased: unaliased})
			if !unaliased {
				continue // the local name is the file's own
			}
			b := bindingOf(ld.To[i])
			if b == nil {
				continue
			}
			for _, o := range localOccurrences(f, b) {
				if o.id != ld.To[i] {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// References returns every place the name at p is written, across the
// files that load its file; includeDecl keeps the definition.
func (q *Query) References(f *File, p syntax.Position, includeDecl bool) []Location {
	occ, _, err := q.occurrences(f, p)
	if err != nil {
		return nil
	}
	var defs []Location
	if !includeDecl {
		defs = q.Definition(f, p)
	}
	var out []Location
	for _, o := range occ {
		loc := q.occurrenceLocation(o)
		if slices.Contains(defs, loc) {
			continue
		}
		out = append(out, loc)
	}
	return out
}

func (q *Query) occurrenceLocation(o occurrence) Location {
	if !o.quoted {
		return identLocation(o.path, o.id)
	}
	start := o.id.NamePos
	start.Col-- // the opening quote
	end := start
	if f := q.Program.File(o.path); f != nil {
		lines := f.Lines()
		off := lines.Offset(start)
		end = lines.Position(&o.path, stringEnd(f.Src, off))
	}
	return Location{Path: o.path, Start: start, End: end}
}

// TextEdit replaces a range of a file with Text.
type TextEdit struct {
	Location
	Text string
}

// Rename returns the edits that rename the name at p to newName in its
// file and the files that load it.
func (q *Query) Rename(f *File, p syntax.Position, newName string) ([]TextEdit, error) {
	if !validIdent(newName) {
		return nil, fmt.Errorf("%q is not a valid Starlark name", newName)
	}
	occ, id, err := q.occurrences(f, p)
	if err != nil {
		return nil, fmt.Errorf("cannot rename: %w", err)
	}
	if _, builtin := starlib.Lookup(newName, q.Extensions...); builtin || starlark.Universe.Has(newName) {
		return nil, fmt.Errorf("cannot rename %s to %s: %s is a builtin, and the new name would shadow it", id.Name, newName, newName)
	}
	var edits []TextEdit
	for _, o := range occ {
		loc := q.occurrenceLocation(o)
		text := newName
		if o.quoted {
			text = fmt.Sprintf("%q", newName)
		}
		edits = append(edits, TextEdit{Location: loc, Text: text})
	}
	return edits, nil
}

var keywords = []string{"and", "break", "continue", "def", "elif", "else", "for", "if", "in", "lambda", "load", "not", "or", "pass", "return", "while"}

func validIdent(s string) bool {
	if s == "" || slices.Contains(keywords, s) || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Symbol is a top-level definition of a file.
type Symbol struct {
	Name string
	// Kind is "function" or "variable".
	Kind string
	// Detail is a function's signature or a value's source text.
	Detail string
	// Range covers the whole definition; Name the defining identifier.
	Range, NameRange Location
}

// Symbols returns the functions and top-level assignments of f.
func Symbols(f *File) []Symbol {
	if f == nil || f.Syntax == nil {
		return nil
	}
	var out []Symbol
	seen := map[string]bool{}
	for _, st := range f.Syntax.Stmts {
		start, end := st.Span()
		whole := Location{Path: f.Path, Start: start, End: end}
		switch st := st.(type) {
		case *syntax.DefStmt:
			out = append(out, Symbol{Name: st.Name.Name, Kind: "function", Detail: f.defSignature(st), Range: whole, NameRange: identLocation(f.Path, st.Name)})
		case *syntax.AssignStmt:
			for _, id := range TargetNames(st.LHS) {
				if seen[id.Name] {
					continue
				}
				seen[id.Name] = true
				out = append(out, Symbol{Name: id.Name, Kind: "variable", Detail: shorten(f.text(st.RHS), 80), Range: whole, NameRange: identLocation(f.Path, id)})
			}
		}
	}
	return out
}

// text returns the source text of a node.
func (f *File) text(n syntax.Node) string {
	start, end := n.Span()
	lines := f.Lines()
	a, b := lines.Offset(start), lines.Offset(end)
	if a > b {
		return ""
	}
	return string(f.Src[a:b])
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// defSignature renders a def's signature: "name(a, b = 1, *args)".
func (f *File) defSignature(d *syntax.DefStmt) string {
	return d.Name.Name + "(" + strings.Join(f.paramLabels(d), ", ") + ")"
}

func (f *File) paramLabels(d *syntax.DefStmt) []string {
	var out []string
	for _, p := range d.Params {
		out = append(out, shorten(f.text(p), 60))
	}
	return out
}

func docstring(d *syntax.DefStmt) string {
	if len(d.Body) == 0 {
		return ""
	}
	if es, ok := d.Body[0].(*syntax.ExprStmt); ok {
		if lit, ok := es.X.(*syntax.Literal); ok {
			if s, ok := lit.Value.(string); ok {
				return dedentDocstring(s)
			}
		}
	}
	return ""
}

// dedentDocstring removes a docstring's indentation as Python does: the
// first line is taken as it is, the others lose their common indent.
func dedentDocstring(s string) string {
	first, rest, _ := strings.Cut(s, "\n")
	out := strings.TrimSpace(first)
	if rest = stdlib.Dedent("\n" + rest); rest != "" {
		if out != "" {
			out += "\n"
		}
		out += rest
	}
	return strings.TrimSpace(out)
}

// Hover is what to show for a position.
type Hover struct {
	// Markdown is the text to show.
	Markdown string
	// Range is the hovered token.
	Range Location
}

// Hover describes the name at p: a builtin's reference (and the
// parameter under the cursor), a function's signature and docstring with
// its definition site, a simple constant's value.
func (q *Query) Hover(f *File, p syntax.Position) *Hover {
	if f == nil || f.Syntax == nil {
		return nil
	}
	s := at(f.Syntax, p)
	if s == nil {
		if ld := loadAt(f.Syntax, p); ld != nil {
			start, end := ld.Module.Span()
			return &Hover{Markdown: q.moduleDoc(f.Path, ld.ModuleName()), Range: Location{Path: f.Path, Start: start, End: end}}
		}
		return nil
	}
	h := &Hover{Range: identLocation(f.Path, s.id)}
	// A keyword argument: the parameter.
	if bin, ok := s.parent(1).(*syntax.BinaryExpr); ok && bin.Op == syntax.EQ && bin.X == s.id {
		if call, ok := s.parent(2).(*syntax.CallExpr); ok {
			if b := q.builtinOfCall(call); b != nil {
				if prm := paramOf(b, s.id.Name); prm != nil {
					h.Markdown = fmt.Sprintf("```python\n%s\n```\n\n%s", b.Signature(), paramDoc(b, prm))
					return h
				}
			}
			if fn, ff := q.functionOf(f, call); fn != nil {
				h.Markdown = fmt.Sprintf("```python\n%s\n```\n\nparameter `%s` of `%s`", ff.defSignature(fn), s.id.Name, fn.Name.Name)
				return h
			}
		}
		return nil
	}
	// schema.object and friends.
	if dot, ok := s.parent(1).(*syntax.DotExpr); ok && dot.Name == s.id {
		if x, ok := dot.X.(*syntax.Ident); ok {
			if b, ok := starlib.Lookup(x.Name+"."+s.id.Name, q.Extensions...); ok {
				h.Markdown = builtinDoc(b)
				return h
			}
			for _, m := range stdlibMembers(f, x) {
				if strings.HasPrefix(m.Signature, x.Name+"."+s.id.Name+"(") {
					h.Markdown = fmt.Sprintf("```python\n%s\n```\n\n%s", m.Signature, m.Doc)
					return h
				}
			}
		}
		return nil
	}
	if ld, i := loadOf(f.Syntax, s.id); ld != nil {
		h.Markdown = q.loadedDoc(f, ld, i)
		return nonEmpty(h)
	}
	b := bindingOf(s.id)
	if b == nil {
		return nil
	}
	switch b.Scope {
	case resolve.Predeclared:
		if bi, ok := starlib.Lookup(s.id.Name, q.Extensions...); ok {
			h.Markdown = builtinDoc(bi)
			return h
		}
		h.Markdown = predeclaredDoc(s.id.Name)
		return nonEmpty(h)
	case resolve.Universal:
		h.Markdown = fmt.Sprintf("```python\n%s\n```\n\nA Starlark built-in (see the Starlark language specification).", s.id.Name)
		return h
	}
	if b.First != nil {
		if ld, i := loadOf(f.Syntax, b.First); ld != nil {
			h.Markdown = q.loadedDoc(f, ld, i)
			return nonEmpty(h)
		}
	}
	if b.Scope == resolve.Global {
		if st, _ := topDef(f.Syntax, s.id.Name); st != nil {
			h.Markdown = defDoc(f, st, s.id.Name)
			return nonEmpty(h)
		}
	}
	if b.First != nil {
		h.Markdown = fmt.Sprintf("```python\n%s\n```\n\nlocal, defined at line %d", s.id.Name, b.First.NamePos.Line)
		return h
	}
	return nil
}

func nonEmpty(h *Hover) *Hover {
	if h.Markdown == "" {
		return nil
	}
	return h
}

// defDoc describes a top-level definition.
func defDoc(f *File, st syntax.Stmt, name string) string {
	base := filepath.Base(f.Path)
	switch st := st.(type) {
	case *syntax.DefStmt:
		doc := fmt.Sprintf("```python\ndef %s\n```", f.defSignature(st))
		if ds := docstring(st); ds != "" {
			doc += "\n\n" + strings.TrimSpace(ds)
		}
		return doc + fmt.Sprintf("\n\ndefined at %s:%d", base, st.Name.NamePos.Line)
	case *syntax.AssignStmt:
		value := ""
		if _, simple := st.LHS.(*syntax.Ident); simple && isConstant(st.RHS) && st.Op == syntax.EQ {
			value = " = " + shorten(f.text(st.RHS), 200)
		}
		start, _ := st.Span()
		return fmt.Sprintf("```python\n%s%s\n```\n\ndefined at %s:%d", name, value, base, start.Line)
	}
	return ""
}

// isConstant reports whether e is a literal value (strings, numbers,
// booleans, None and collections of them).
func isConstant(e syntax.Expr) bool {
	return literal(e) != starlib.Unknown
}

// loadedDoc describes the symbol a load binds.
func (q *Query) loadedDoc(f *File, ld *syntax.LoadStmt, i int) string {
	name := ld.From[i].Name
	mod := ld.ModuleName()
	m := modulePath(f.Path, mod)
	if m == "" {
		for _, mem := range stdlib.Members(mod) {
			if mem.Name == name || strings.HasPrefix(mem.Signature, name+".") || strings.HasPrefix(mem.Signature, name+"(") {
				return fmt.Sprintf("```python\n%s\n```\n\n%s\n\nfrom %s", mem.Signature, mem.Doc, mod)
			}
		}
		return fmt.Sprintf("`%s` from %s\n\n%s", name, mod, stdlib.Doc(mod))
	}
	mf := q.Program.File(m)
	if mf == nil || mf.Syntax == nil {
		return ""
	}
	st, _ := topDef(mf.Syntax, name)
	if st == nil {
		return ""
	}
	return defDoc(mf, st, name)
}

func (q *Query) moduleDoc(from, name string) string {
	if doc := stdlib.Doc(name); doc != "" {
		return fmt.Sprintf("`%s`\n\n%s", name, doc)
	}
	if strings.HasPrefix(name, "@") {
		return ""
	}
	m := modulePath(from, name)
	shown := m
	if rel, err := filepath.Rel(filepath.Dir(from), m); err == nil {
		shown = filepath.ToSlash(rel)
	}
	mf := q.Program.File(m)
	if mf == nil || mf.Syntax == nil {
		return fmt.Sprintf("`%s` (cannot be read)", shown)
	}
	var names []string
	for n := range Exports(mf.Syntax) {
		names = append(names, n)
	}
	slices.Sort(names)
	return fmt.Sprintf("`%s`\n\nexports: %s", shown, strings.Join(names, ", "))
}

// stdlibMembers returns the members of the @std module value x was
// loaded as, if any.
func stdlibMembers(f *File, x *syntax.Ident) []stdlib.Member {
	b := bindingOf(x)
	if b == nil || b.First == nil {
		return nil
	}
	ld, _ := loadOf(f.Syntax, b.First)
	if ld == nil {
		return nil
	}
	return stdlib.Members(ld.ModuleName())
}

func (q *Query) builtinOfCall(call *syntax.CallExpr) *starlib.Builtin {
	switch fn := call.Fn.(type) {
	case *syntax.Ident:
		if b := bindingOf(fn); b != nil && b.Scope != resolve.Predeclared {
			return nil
		}
		b, _ := starlib.Lookup(fn.Name, q.Extensions...)
		return b
	case *syntax.DotExpr:
		if x, ok := fn.X.(*syntax.Ident); ok {
			b, _ := starlib.Lookup(x.Name+"."+fn.Name.Name, q.Extensions...)
			return b
		}
	}
	return nil
}

// functionOf returns the def a call calls, when it is a function of f or
// one f loads, with the file that defines it.
func (q *Query) functionOf(f *File, call *syntax.CallExpr) (*syntax.DefStmt, *File) {
	id, ok := call.Fn.(*syntax.Ident)
	if !ok {
		return nil, nil
	}
	return q.functionNamed(f, id.Name)
}

func (q *Query) functionNamed(f *File, name string) (*syntax.DefStmt, *File) {
	if f.Syntax == nil {
		return nil, nil
	}
	if st, _ := topDef(f.Syntax, name); st != nil {
		d, _ := st.(*syntax.DefStmt)
		return d, f
	}
	for _, st := range f.Syntax.Stmts {
		ld, ok := st.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		for i := range ld.To {
			if ld.To[i].Name != name {
				continue
			}
			m := modulePath(f.Path, ld.ModuleName())
			if m == "" {
				return nil, nil
			}
			mf := q.Program.File(m)
			if mf == nil || mf.Syntax == nil {
				return nil, nil
			}
			st, _ := topDef(mf.Syntax, ld.From[i].Name)
			d, _ := st.(*syntax.DefStmt)
			return d, mf
		}
	}
	return nil, nil
}

func paramOf(b *starlib.Builtin, name string) *starlib.Param {
	for i := range b.Params {
		if p := &b.Params[i]; p.Name == name && !p.Variadic && !p.Kwargs {
			return p
		}
	}
	return nil
}

// builtinDoc is a builtin's reference as Markdown: signature, text,
// parameters, result and example.
func builtinDoc(b *starlib.Builtin) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "```python\n%s\n```\n\n%s", b.Signature(), b.Doc)
	if len(b.Params) > 0 {
		sb.WriteString("\n\n")
		for i := range b.Params {
			fmt.Fprintf(&sb, "- %s\n", paramDoc(b, &b.Params[i]))
		}
	}
	if b.Returns != "" {
		fmt.Fprintf(&sb, "\nReturns %s", b.Returns)
	}
	if b.Example != "" {
		// The example `aml doc` shows.
		fmt.Fprintf(&sb, "\n\nExample:\n\n```python\n%s\n```", b.Example)
	}
	return strings.TrimRight(sb.String(), "\n")
}

// paramDoc is one line on a parameter: name, type, default, values, doc.
func paramDoc(b *starlib.Builtin, p *starlib.Param) string {
	name := p.Name
	switch {
	case p.Variadic:
		name = "*" + name
	case p.Kwargs:
		name = "**" + name
	}
	s := fmt.Sprintf("**%s** `%s`", name, p.Type)
	if p.Default != "" {
		s += fmt.Sprintf(" = `%s`", p.Default)
	}
	if len(p.Enum) > 0 {
		s += " — one of " + quoteAll(p.Enum)
	}
	if p.Doc != "" {
		s += ": " + p.Doc
	}
	return s
}

func quoteAll(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// predeclaredDoc documents the predeclared values that are not catalog
// builtins.
func predeclaredDoc(name string) string {
	switch name {
	case "schema":
		return "```python\nschema\n```\n\nThe JSON Schema builders: schema.object, schema.string, schema.integer, schema.number, schema.boolean, schema.array, schema.enum, schema.literal, schema.nullable, schema.optional, schema.describe."
	case "json":
		return "```python\njson\n```\n\nJSON encoding and decoding: json.encode(x), json.decode(x[, default]), json.indent(str), json.encode_indent(x)."
	case "struct":
		return "```python\nstruct(**fields)\n```\n\nAn immutable record whose fields are the keyword arguments."
	}
	return ""
}

// LoadedFiles returns the files f loads (not @std modules), as paths.
func LoadedFiles(f *File) []string {
	if f == nil || f.Syntax == nil {
		return nil
	}
	var out []string
	for _, st := range f.Syntax.Stmts {
		if ld, ok := st.(*syntax.LoadStmt); ok {
			if m := modulePath(f.Path, ld.ModuleName()); m != "" {
				out = append(out, filepath.Clean(m))
			}
		}
	}
	return out
}
