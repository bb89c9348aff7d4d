package analysis

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/stdlib"
)

// Completion kinds.
const (
	KindFunction = "function"
	KindKeyword  = "keyword" // a keyword argument
	KindValue    = "value"   // a string a parameter accepts
	KindVariable = "variable"
	KindModule   = "module"
	KindFile     = "file"
	KindField    = "field"
	KindLanguage = "language" // a Starlark keyword
)

// Completion is one proposal.
type Completion struct {
	Label string
	Kind  string
	// Detail is a signature or type; Doc the documentation (Markdown).
	Detail, Doc string
	// Insert is the text to insert in place of the word being typed
	// (Label when empty).
	Insert string
}

// Complete proposes what may be written at byte offset off of src, the
// current text of the file at path. f is the file's last parse that
// succeeded (nil when there is none): it supplies the file's own names,
// while the context comes from src, which need not parse.
func (q *Query) Complete(path string, f *File, src []byte, off int) (items []Completion, wordStart int) {
	c := scanContext(src, off)
	if c.comment {
		return nil, off
	}
	if items, start, ok := q.completeDictKey(c, off); ok {
		return items, start
	}
	top := c.top()
	if c.inString {
		return q.completeString(path, c, top), off - len(c.strText)
	}
	word := c.word
	if dot := strings.LastIndexByte(word, '.'); dot >= 0 {
		return q.completeMember(f, word[:dot], word[dot+1:]), c.wordStart + dot + 1
	}
	if top != nil && top.call != "" && top.kw != "" && strings.TrimSpace(string(src[c.wordStart:off])) == word && afterEquals(src, top, c.wordStart) {
		if b, ok := starlib.Lookup(top.call, q.Extensions...); ok {
			if p := paramOf(b, top.kw); p != nil && len(p.Enum) > 0 {
				for _, v := range p.Enum {
					items = append(items, Completion{Label: fmt.Sprintf("%q", v), Kind: KindValue, Detail: p.Name + ": " + p.Type, Doc: p.Doc})
				}
			}
		}
	}
	if top != nil && top.call != "" && top.kw == "" && strings.TrimSpace(string(src[top.argStart:off])) == word {
		items = append(items, q.completeKeywords(f, top)...)
	}
	items = append(items, q.completeNames(f, off)...)
	return filterPrefix(items, word), c.wordStart
}

// completeDictKey proposes inside a dict literal written as the
// argument of a builtin parameter whose catalog entry lists its keys
// (permissions=, save=, transport=, a schema): the keys not given yet at
// a key's place, and a key's strings (its Enum) at its value's place. ok
// is false elsewhere.
func (q *Query) completeDictKey(c *textContext, off int) (items []Completion, start int, ok bool) {
	if len(c.frames) < 2 {
		return nil, 0, false
	}
	dict, call := c.frames[len(c.frames)-1], c.frames[len(c.frames)-2]
	if c.src[dict.open] != '{' || call.call == "" {
		return nil, 0, false
	}
	b, found := starlib.Lookup(call.call, q.Extensions...)
	if !found {
		return nil, 0, false
	}
	// The dict must be the argument itself: "kw = {" or a positional "{".
	before := strings.TrimSpace(string(c.src[call.argStart:dict.open]))
	var p *starlib.Param
	switch {
	case before == "" && call.kw == "":
		i := 0
		for j := range b.Params {
			if b.Params[j].Variadic || !b.Params[j].Positional {
				break
			}
			if i == call.args {
				p = &b.Params[j]
			}
			i++
		}
	case call.kw != "" && strings.HasSuffix(before, "="):
		p = paramOf(b, call.kw)
	}
	if p == nil || len(p.Keys) == 0 {
		return nil, 0, false
	}
	entry := string(c.src[dict.argStart:off])
	if c.inString {
		entry = string(c.src[dict.argStart:c.strStart])
	}
	key, atValue := entryKey(entry)
	typed, start := c.word, c.wordStart
	quote := func(s string) string { return strconv.Quote(s) }
	if c.inString {
		typed, start = c.strText, off-len(c.strText)
		quote = func(s string) string { return s }
	} else if strings.TrimSpace(strings.TrimSuffix(entry, c.word)) != "" && !atValue {
		return []Completion{}, off, true // after a key's text: nothing to add
	}
	if atValue {
		for _, k := range p.Keys {
			if k.Name != key {
				continue
			}
			for _, v := range k.Enum {
				items = append(items, Completion{Label: quote(v), Kind: KindValue, Detail: fmt.Sprintf("%s[%q]: %s", p.Name, k.Name, k.Type)})
			}
		}
		return filterPrefix(items, typed), start, true
	}
	given := dictKeysGiven(c.src, dict.open, off)
	for _, k := range p.Keys {
		if given[k.Name] {
			continue
		}
		doc := k.Doc
		if doc == "" {
			doc = p.Doc
		}
		it := Completion{Label: quote(k.Name), Kind: KindField, Detail: k.Type, Doc: doc}
		if !c.inString {
			it.Insert = quote(k.Name) + ": "
		}
		items = append(items, it)
	}
	return filterPrefix(items, typed), start, true
}

// entryKey returns the key of a dict entry's text up to the cursor and
// whether the cursor is past its colon (at the value's place).
func entryKey(entry string) (key string, atValue bool) {
	for i := 0; i < len(entry); i++ {
		switch ch := entry[i]; ch {
		case '"', '\'':
			j := i + 1
			for j < len(entry) && entry[j] != ch {
				if entry[j] == '\\' {
					j++
				}
				j++
			}
			if key == "" && j < len(entry) {
				if k, err := strconv.Unquote(`"` + strings.ReplaceAll(entry[i+1:j], `"`, `\"`) + `"`); err == nil {
					key = k
				}
			}
			i = j
		case ':':
			return key, true
		}
	}
	return "", false
}

// dictKeysGiven returns the string keys written directly in the dict
// opened at open (not those of dicts nested in it), before and after the
// cursor up to its closing brace.
func dictKeysGiven(src []byte, open, cur int) map[string]bool {
	out := map[string]bool{}
	depth := 0
	for i := open + 1; i < len(src); i++ {
		switch ch := src[i]; ch {
		case '"', '\'':
			end := stringEnd(src, i)
			if depth == 0 && end > i+1 && closedString(src, i, end) {
				j := end
				for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
					j++
				}
				if j < len(src) && src[j] == ':' {
					if k, err := strconv.Unquote(`"` + strings.ReplaceAll(string(src[i+1:end-1]), `"`, `\"`) + `"`); err == nil {
						out[k] = true
					}
				}
			}
			i = end - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				return out
			}
			depth--
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		}
	}
	return out
}

// afterEquals reports whether only blanks separate "kw =" from wordStart.
func afterEquals(src []byte, f *frame, wordStart int) bool {
	seg := strings.TrimRight(string(src[f.argStart:wordStart]), " \t")
	return strings.HasSuffix(seg, "=")
}

func filterPrefix(items []Completion, word string) []Completion {
	if word == "" {
		return items
	}
	out := items[:0]
	for _, it := range items {
		label := strings.Trim(it.Label, `"`)
		if strings.HasPrefix(label, word) || strings.HasPrefix(it.Label, word) {
			out = append(out, it)
		}
	}
	return out
}

// completeString proposes inside a string: load() paths and symbols, and
// the values of a string parameter.
func (q *Query) completeString(path string, c *textContext, top *frame) []Completion {
	if top == nil {
		return nil
	}
	if top.call == "load" {
		if top.args == 0 {
			return filterPrefix(loadPaths(path, c.strText), c.strText)
		}
		if top.kw == "" || top.args > 0 {
			return filterPrefix(q.moduleSymbols(path, top.first(c.src)), c.strText)
		}
	}
	if top.kw == "" {
		return nil
	}
	b, ok := starlib.Lookup(top.call, q.Extensions...)
	if !ok {
		return nil
	}
	p := paramOf(b, top.kw)
	if p == nil {
		return nil
	}
	var out []Completion
	for _, v := range p.Enum {
		out = append(out, Completion{Label: v, Kind: KindValue, Detail: p.Name + ": " + p.Type, Doc: p.Doc})
	}
	return filterPrefix(out, c.strText)
}

// loadPaths proposes the @std modules and the .star files near path
// (this directory and two levels below; typed directories are followed).
func loadPaths(path, typed string) []Completion {
	var out []Completion
	for _, m := range stdlib.Names() {
		out = append(out, Completion{Label: m, Kind: KindModule, Doc: stdlib.Doc(m)})
	}
	if strings.HasPrefix(typed, "@") {
		return out
	}
	dir := filepath.Dir(path)
	sub, _ := filepath.Split(typed) // "../lib/" follows the typed directories
	root := filepath.Join(dir, filepath.FromSlash(sub))
	self, _ := filepath.Abs(path)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		depth := strings.Count(rel, string(filepath.Separator))
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || depth >= 2) {
				return filepath.SkipDir
			}
			return nil
		}
		if abs, _ := filepath.Abs(p); !strings.HasSuffix(p, ".star") || abs == self {
			return nil
		}
		out = append(out, Completion{Label: sub + filepath.ToSlash(rel), Kind: KindFile})
		return nil
	})
	return out
}

// moduleSymbols proposes the symbols a module exports.
func (q *Query) moduleSymbols(path, module string) []Completion {
	var out []Completion
	if strings.HasPrefix(module, "@") {
		g, ok := stdlib.Module(module)
		if !ok {
			return nil
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range g {
				if !yield(n) {
					return
				}
			}
		}) {
			out = append(out, Completion{Label: name, Kind: KindFunction, Doc: stdlib.Doc(module)})
		}
		return out
	}
	m := modulePath(path, module)
	mf := q.Program.File(m)
	if mf == nil || mf.Syntax == nil {
		return nil
	}
	for _, s := range Symbols(mf) {
		if strings.HasPrefix(s.Name, "_") {
			continue
		}
		kind := KindVariable
		if s.Kind == "function" {
			kind = KindFunction
		}
		out = append(out, Completion{Label: s.Name, Kind: kind, Detail: s.Detail})
	}
	return out
}

// completeMember proposes the members of x in "x.": schema builders,
// json functions and the functions of a loaded @std module value.
func (q *Query) completeMember(f *File, x, word string) []Completion {
	var out []Completion
	for _, b := range starlib.Catalog(q.Extensions...) {
		if name, ok := strings.CutPrefix(b.Name, x+"."); ok {
			out = append(out, Completion{Label: name, Kind: KindFunction, Detail: b.Signature(), Doc: summary(b.Doc)})
		}
	}
	if x == "json" {
		for _, name := range []string{"encode", "decode", "indent", "encode_indent"} {
			out = append(out, Completion{Label: name, Kind: KindFunction, Detail: "json." + name})
		}
	}
	if f != nil && f.Syntax != nil {
		for _, st := range f.Syntax.Stmts {
			ld, ok := st.(*syntax.LoadStmt)
			if !ok {
				continue
			}
			for i := range ld.To {
				if ld.To[i].Name != x {
					continue
				}
				for _, m := range stdlib.Members(ld.ModuleName()) {
					if name, ok := strings.CutPrefix(m.Name, ld.From[i].Name+"."); ok {
						out = append(out, Completion{Label: name, Kind: KindFunction, Detail: m.Signature, Doc: m.Doc})
					}
				}
			}
		}
	}
	return filterPrefix(out, word)
}

// completeKeywords proposes the keyword arguments of the call under the
// cursor that are not given yet.
func (q *Query) completeKeywords(f *File, top *frame) []Completion {
	var out []Completion
	if b, ok := starlib.Lookup(top.call, q.Extensions...); ok {
		for i := range b.Params {
			p := &b.Params[i]
			if p.Variadic || p.Kwargs || top.keywords[p.Name] {
				continue
			}
			detail := p.Type
			if p.Default != "" {
				detail += " = " + p.Default
			}
			out = append(out, Completion{Label: p.Name, Kind: KindKeyword, Detail: detail, Doc: paramDoc(b, p), Insert: p.Name + " = "})
		}
		return out
	}
	if f == nil {
		return nil
	}
	if d, df := q.functionNamed(f, top.call); d != nil {
		for _, p := range d.Params {
			id := paramIdent(p)
			if id == nil || top.keywords[id.Name] {
				continue
			}
			out = append(out, Completion{Label: id.Name, Kind: KindKeyword, Detail: df.text(p), Insert: id.Name + " = "})
		}
	}
	return out
}

// paramIdent returns the name of a plain or defaulted parameter.
func paramIdent(p syntax.Expr) *syntax.Ident {
	switch p := p.(type) {
	case *syntax.Ident:
		return p
	case *syntax.BinaryExpr:
		if id, ok := p.X.(*syntax.Ident); ok {
			return id
		}
	}
	return nil
}

// completeNames proposes every name visible at off: the function's
// locals, the file's globals and loaded symbols, the builtins and the
// Starlark universe and keywords.
func (q *Query) completeNames(f *File, off int) []Completion {
	var out []Completion
	seen := map[string]bool{}
	add := func(c Completion) {
		if !seen[c.Label] {
			seen[c.Label] = true
			out = append(out, c)
		}
	}
	if f != nil && f.Syntax != nil {
		p := f.Lines().Position(&f.Path, off)
		for _, st := range f.Syntax.Stmts {
			if d, ok := st.(*syntax.DefStmt); ok && contains(d, p) {
				for _, id := range functionLocals(d) {
					add(Completion{Label: id.Name, Kind: KindVariable, Detail: "local"})
				}
			}
		}
		for _, st := range f.Syntax.Stmts {
			if ld, ok := st.(*syntax.LoadStmt); ok {
				for i := range ld.To {
					add(Completion{Label: ld.To[i].Name, Kind: KindVariable, Detail: "from " + ld.ModuleName()})
				}
			}
		}
		for _, s := range Symbols(f) {
			kind := KindVariable
			if s.Kind == "function" {
				kind = KindFunction
			}
			add(Completion{Label: s.Name, Kind: kind, Detail: s.Detail})
		}
	}
	for _, b := range starlib.Catalog(q.Extensions...) {
		if !strings.Contains(b.Name, ".") {
			add(Completion{Label: b.Name, Kind: KindFunction, Detail: b.Signature(), Doc: summary(b.Doc)})
		}
	}
	for _, n := range starlib.Predeclared(q.Extensions...) {
		add(Completion{Label: n, Kind: KindVariable, Doc: predeclaredDoc(n)})
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range starlark.Universe {
			if !yield(n) {
				return
			}
		}
	}) {
		add(Completion{Label: n, Kind: KindFunction, Detail: "Starlark built-in"})
	}
	for _, k := range keywords {
		add(Completion{Label: k, Kind: KindLanguage})
	}
	return out
}

// functionLocals returns the parameters and assigned names of a def.
func functionLocals(d *syntax.DefStmt) []*syntax.Ident {
	var out []*syntax.Ident
	for _, p := range d.Params {
		switch p := p.(type) {
		case *syntax.UnaryExpr:
			if id, ok := p.X.(*syntax.Ident); ok {
				out = append(out, id)
			}
		default:
			if id := paramIdent(p); id != nil {
				out = append(out, id)
			}
		}
	}
	syntax.Walk(d, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.AssignStmt:
			out = append(out, TargetNames(n.LHS)...)
		case *syntax.ForStmt:
			out = append(out, TargetNames(n.Vars)...)
		}
		return true
	})
	return out
}

// SignatureHelp is the signature of the call under the cursor.
type SignatureHelp struct {
	// Label is the whole signature; Params the label of each parameter
	// (substrings of Label).
	Label  string
	Doc    string
	Params []string
	// ParamDocs documents each parameter.
	ParamDocs []string
	// Active is the index of the parameter the cursor is on, -1 for none.
	Active int
}

// Signature returns the signature of the call around byte offset off of
// src (which need not parse), or nil outside a call of a known function.
func (q *Query) Signature(f *File, src []byte, off int) *SignatureHelp {
	c := scanContext(src, off)
	var top *frame
	for i := len(c.frames) - 1; i >= 0; i-- {
		if c.frames[i].call != "" {
			top = c.frames[i]
			break
		}
		if c.frames[i].call == "" && src[c.frames[i].open] == '(' {
			return nil
		}
	}
	if top == nil || c.comment {
		return nil
	}
	if b, ok := starlib.Lookup(top.call, q.Extensions...); ok {
		h := &SignatureHelp{Doc: b.Doc, Active: -1}
		var labels []string
		for i := range b.Params {
			p := &b.Params[i]
			label := p.Name
			switch {
			case p.Variadic:
				label = "*" + p.Name
			case p.Kwargs:
				label = "**" + p.Name
			case p.Default != "":
				label += "=" + p.Default
			}
			labels = append(labels, label)
			h.ParamDocs = append(h.ParamDocs, paramDoc(b, p))
		}
		h.Label = top.call + "(" + strings.Join(labels, ", ") + ")"
		h.Params = labels
		h.Active = activeParam(b, top)
		return h
	}
	if f == nil {
		return nil
	}
	d, df := q.functionNamed(f, top.call)
	if d == nil {
		return nil
	}
	h := &SignatureHelp{Label: df.defSignature(d), Doc: docstring(d), Params: df.paramLabels(d), Active: -1}
	for i, p := range d.Params {
		h.ParamDocs = append(h.ParamDocs, "")
		id := paramIdent(p)
		switch {
		case top.kw != "" && id != nil && id.Name == top.kw:
			h.Active = i
		case top.kw == "" && i == top.args:
			h.Active = i
		}
	}
	return h
}

func activeParam(b *starlib.Builtin, top *frame) int {
	if top.kw != "" {
		for i, p := range b.Params {
			if p.Name == top.kw && !p.Variadic {
				return i
			}
		}
		for i, p := range b.Params {
			if p.Kwargs {
				return i
			}
		}
		return -1
	}
	pos := 0
	for i, p := range b.Params {
		if p.Variadic {
			return i
		}
		if p.Positional {
			if pos == top.args {
				return i
			}
			pos++
		}
	}
	return -1
}

// ModuleForSymbol returns the @std module that exports name, or "".
func ModuleForSymbol(name string) string {
	for _, m := range stdlib.Names() {
		if g, ok := stdlib.Module(m); ok {
			if _, ok := g[name]; ok {
				return m
			}
		}
	}
	return ""
}

// summary is the first paragraph of a reference text: what a completion
// list shows (hover shows the rest).
func summary(doc string) string {
	first, _, _ := strings.Cut(doc, "\n\n")
	return first
}
