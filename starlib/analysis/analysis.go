// Package analysis checks AML workflow files without running them: what
// `aml check` prints and what the language server shows as diagnostics.
//
// A file is parsed with the one AML dialect (starlib.FileOptions), its
// names are resolved against the predeclared surface, every call of a
// builtin is matched against the builtin catalog (unknown, duplicate and
// missing arguments, wrong types, strings outside a parameter's values,
// unknown dict keys, negative limits: starlib.Builtin.CheckArguments, in
// the runtime's words), load() statements are followed (missing files,
// missing symbols, cycles), configure() placement is checked, and the
// node trees the entry function returns literally are given to the
// evaluator's own static check (eval.Runtime.Check): tool() outside
// agent(), text after follow_up(), file() with no scope and the other
// placement rules. Lint warnings come from buildtools.
//
// Nothing is executed and no provider is constructed, so what only
// exists at run time is not checked: values computed by expressions
// (an argument that is not a literal is assumed valid), the nodes that
// component bodies and other functions build and return, and node trees
// held in variables. Those are checked by the runtime when they run.
//
// The same package answers an editor's questions over a Program (a set
// of files: Query): hover from the builtin catalog and from docstrings,
// completion and signature help from a text that need not parse,
// definitions, references and renames across load(), and symbols. The
// language server (package lsp) is a protocol layer over it.
//
// The analysis imports no provider package and calls no builtin's
// implementation: the catalog is only matched against the calls.
//
// Positions are Starlark positions: 1-based lines and 1-based columns
// counted in runes.
package analysis

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
)

// Severity grades a diagnostic.
type Severity int

// Severities.
const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic codes.
const (
	CodeSyntax           = "syntax"
	CodeUndefined        = "undefined"
	CodeResolve          = "resolve"
	CodeUnknownKeyword   = "unknown-keyword"
	CodeDuplicate        = "duplicate-argument"
	CodeMissingArgument  = "missing-argument"
	CodeTooMany          = "too-many-arguments"
	CodeBadValue         = "bad-value"
	CodeLoadMissing      = "load-missing"
	CodeLoadDirectory    = "load-directory"
	CodeLoadSymbol       = "load-symbol"
	CodeLoadCycle        = "load-cycle"
	CodeLoadError        = "load-error"
	CodeConfigure        = "configure"
	CodePlacement        = "placement"
	CodeNotUTF8          = "encoding"
	CodeInvalidCall      = "invalid-call"
	CodeNoProvider       = "no-provider"
	CodeOutsideComponent = "outside-component"
	CodeStructured       = "structured"
)

// Diagnostic is one problem found in a file.
type Diagnostic struct {
	File string
	// Start and End delimit the offending text (End is exclusive).
	Start, End syntax.Position
	// Pos, when valid, is where a run reports the same failure, which
	// `aml check` prints: the opening parenthesis of the call for a
	// builtin's rules and the placement of its node, the load statement
	// for a load. Otherwise Start is.
	Pos      syntax.Position
	Severity Severity
	Code     string
	Message  string
	// Suggestion is the nearest valid name or value, when the problem is a
	// likely misspelling; replacing the range with it fixes the problem.
	Suggestion string
	// Edit is a fix the check knows (a lint replacement), or nil.
	Edit *Edit
	// Limit, for a finding that a tree exceeds one of the evaluation's
	// limits as configure() sets them, names the limit ("max_depth",
	// "max_turns_per_agent"): a run whose caller overrides the limit may
	// not exceed it.
	Limit string
}

// Edit replaces the bytes [Start, End) of the file with Text.
type Edit struct {
	Description string
	Start, End  int
	Text        string
}

// At is where the diagnostic is reported: Pos when it is valid, else
// Start.
func (d Diagnostic) At() syntax.Position {
	if d.Pos.IsValid() {
		return d.Pos
	}
	return d.Start
}

// String renders the diagnostic as "file:line:col: severity: message
// [code]", at the position At returns.
func (d Diagnostic) String() string {
	at := d.At()
	return fmt.Sprintf("%s:%d:%d: %s: %s [%s]", d.File, at.Line, at.Col, d.Severity, d.Message, d.Code)
}

// Options configure an analysis.
type Options struct {
	// Extensions are the builtins beyond the core ones (as in
	// starlib.LoadOptions).
	Extensions []*starlib.Extension
	// ReadFile reads loaded modules; default starlib.ReadSource. The language
	// server reads open documents from its own snapshots.
	ReadFile func(path string) ([]byte, error)
	// Entry is the entry function whose returned trees get the placement
	// check; default "main".
	Entry string
	// NoLint leaves out the lint warnings: the analysis's own (unused
	// variables, loads after statements) and Lint's.
	NoLint bool
	// Lint, when set, adds the findings of a linter to the lint
	// warnings: package buildlint's Findings are the buildtools
	// warnings that aml check reports. It must be safe to call
	// concurrently; it runs beside the other checks.
	Lint func(path string, src []byte) []Finding
	// Parsed, when it is ParseFile's result for the same path, source and
	// extensions, is used instead of parsing and resolving the source
	// again (the language server keeps one tree per text). Analyze only
	// reads it, so it may be shared with concurrent readers.
	Parsed *File
}

func (o *Options) readFile(path string) ([]byte, error) {
	if o.ReadFile != nil {
		return o.ReadFile(path)
	}
	return starlib.ReadSource(path)
}

// File is the analysis of one file.
type File struct {
	Path string
	// Syntax is the parsed file, or nil when it does not parse.
	Syntax      *syntax.File
	Diagnostics []Diagnostic
	// Src is the analyzed source.
	Src []byte

	linesOnce sync.Once
	lines     *Lines
	// resolveErr is what resolving Syntax reported (ParseFile).
	resolveErr error
}

// Analyze checks one file whose source is src.
func Analyze(path string, src []byte, opts *Options) *File {
	if opts == nil {
		opts = &Options{}
	}
	a := &analyzer{opts: opts, file: &File{Path: path, Src: src}, modules: map[string]*module{}}
	a.run(path, src)
	sortDiagnostics(a.file.Diagnostics)
	return a.file
}

type analyzer struct {
	opts    *Options
	file    *File
	modules map[string]*module
	// bad are the builtin calls with a finding of their own arguments:
	// a run fails there first, so later checks leave them alone.
	bad map[*syntax.CallExpr]bool
}

func (a *analyzer) report(d Diagnostic) {
	d.File = a.file.Path
	a.file.Diagnostics = append(a.file.Diagnostics, d)
}

func (a *analyzer) run(path string, src []byte) {
	if p := a.opts.Parsed; p != nil && p.Syntax != nil && p.Path == path && bytes.Equal(p.Src, src) {
		a.check(p.Syntax, p.resolveErr, path, src)
		return
	}
	f, err := Parse(path, src)
	if err != nil {
		var se syntax.Error
		var enc *EncodingError
		if errors.As(err, &enc) {
			a.report(Diagnostic{Start: enc.Pos, End: enc.Pos, Code: CodeNotUTF8, Message: enc.Msg()})
		} else if errors.As(err, &se) {
			se = starlib.ExplainSyntax(se, src)
			a.report(Diagnostic{Start: se.Pos, End: se.Pos, Code: CodeSyntax, Message: se.Msg})
		} else {
			p := syntax.MakePosition(&path, 1, 1)
			a.report(Diagnostic{Start: p, End: p, Code: CodeNotUTF8, Message: err.Error()})
		}
		return
	}
	a.check(f, resolveFile(f, a.opts.Extensions), path, src)
}

// resolveFile resolves f's names against the predeclared builtins and
// returns what resolve reported.
func resolveFile(f *syntax.File, exts []*starlib.Extension) error {
	pre := predeclaredSet(exts)
	return resolve.File(f, func(name string) bool { return pre[name] }, starlark.Universe.Has)
}

// check runs the checks over f, parsed from src and resolved with
// resolveErr.
func (a *analyzer) check(f *syntax.File, resolveErr error, path string, src []byte) {
	a.file.Syntax = f
	// The linter parses and walks the text on its own: it runs beside
	// the checks, and its findings join theirs at the end.
	var lint chan []Finding
	if !a.opts.NoLint {
		lint = make(chan []Finding, 1)
		if a.opts.Lint != nil {
			go func() { lint <- a.opts.Lint(path, src) }()
		} else {
			lint <- nil
		}
	}
	a.resolve(f, resolveErr)
	a.checkCalls(f)
	a.checkLoads(f, path)
	a.checkConfigure(f)
	a.checkPlacement(f)
	a.checkTopLevel(f)
	a.checkStructured(f)
	a.checkFollowUps(f)
	if lint != nil {
		a.lint(<-lint)
	}
}

// Parse parses src in the AML dialect, keeping comments. A file that is
// not valid UTF-8 is refused with an error naming the first bad byte.
func Parse(path string, src []byte) (*syntax.File, error) {
	if i := firstInvalidUTF8(src); i >= 0 {
		return nil, encodingError(path, src, i)
	}
	return starlib.FileOptions.Parse(path, src, syntax.RetainComments)
}

// EncodingError reports a source file that is not UTF-8 text (a binary
// file, or text in another encoding): aml run, aml check, aml fmt and
// the editor report it with the same words, at the first bad byte.
type EncodingError struct {
	// Pos is the line and column (in runes) of the first bad byte.
	Pos syntax.Position
	// Offset is the byte offset of that byte; Byte is its value.
	Offset int
	Byte   byte
}

// Msg is the error without its position.
func (e *EncodingError) Msg() string {
	return fmt.Sprintf("not UTF-8 text: byte 0x%02x at offset %d (a workflow is a UTF-8 text file; is this a binary file?)", e.Byte, e.Offset)
}

// Error is "file:line:col: " and Msg.
func (e *EncodingError) Error() string { return e.Pos.String() + ": " + e.Msg() }

// encodingError is the *EncodingError of the byte at offset i of src.
func encodingError(path string, src []byte, i int) *EncodingError {
	line, col := int32(1), int32(1)
	for _, r := range string(src[:i]) {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &EncodingError{Pos: syntax.MakePosition(&path, line, col), Offset: i, Byte: src[i]}
}

// resolve reports undefined names, with the runtime's "did you mean".
func (a *analyzer) resolve(f *syntax.File, err error) {
	var list resolve.ErrorList
	if !errors.As(err, &list) {
		return
	}
	for _, e := range list {
		d := Diagnostic{Start: e.Pos, End: e.Pos, Code: CodeResolve, Message: e.Msg}
		if name, ok := strings.CutPrefix(e.Msg, "undefined: "); ok {
			d.Code = CodeUndefined
			d.End = advance(e.Pos, name)
			if s := starlib.SuggestName(f, e.Pos, name, a.opts.Extensions...); s != "" {
				d.Message += fmt.Sprintf(" (did you mean %s?)", s)
				d.Suggestion = s
			}
		}
		a.report(d)
	}
}

// builtinOf returns the catalog builtin that call calls, when its callee
// is a predeclared name (not shadowed).
func (a *analyzer) builtinOf(call *syntax.CallExpr) *starlib.Builtin {
	id, ok := call.Fn.(*syntax.Ident)
	if !ok {
		return nil
	}
	if b, ok := id.Binding.(*resolve.Binding); ok && b.Scope != resolve.Predeclared {
		return nil
	}
	b, ok := starlib.Lookup(id.Name, a.opts.Extensions...)
	if !ok {
		return nil
	}
	return b
}

// checkCalls matches every call of a builtin against the catalog.
func (a *analyzer) checkCalls(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		b := a.builtinOf(call)
		if b == nil {
			return true
		}
		args, kwargs, argExprs, kwExprs, ok := staticArgs(call)
		if !ok {
			return true // *args or **kwargs: the arguments are not known
		}
		problems := b.CheckArguments(args, kwargs)
		if len(problems) > 0 {
			a.flag(call)
		} else {
			if err := b.CheckRules(args, kwargs); err != nil {
				a.flag(call)
				d := Diagnostic{Code: CodeInvalidCall, Message: err.Error(), Pos: call.Lparen}
				d.Start, _ = call.Fn.Span()
				_, d.End = call.Span()
				a.report(d)
			}
		}
		for _, e := range problems {
			d := Diagnostic{Message: e.Msg, Suggestion: e.Suggestion, Pos: call.Lparen}
			var at syntax.Node = call.Fn
			switch {
			case e.Value:
				d.Code = CodeBadValue
				if e.Keyword != "" {
					at = kwExprs[e.Keyword].value
				} else if e.Arg >= 0 && e.Arg < len(argExprs) {
					at = argExprs[e.Arg]
				}
			case e.Param == "" && e.Keyword == "":
				d.Code = CodeTooMany
				if e.Arg < len(argExprs) {
					at = argExprs[e.Arg]
				}
			case e.Keyword != "" && e.Param == "":
				d.Code = CodeUnknownKeyword
				at = kwExprs[e.Keyword].name
			case e.Keyword != "":
				d.Code = CodeDuplicate
				at = kwExprs[e.Keyword].name
			default:
				d.Code = CodeMissingArgument
			}
			d.Start, d.End = span(at)
			if e.Value && e.Suggestion != "" {
				if dict, ok := at.(*syntax.DictExpr); ok {
					narrowToSuggestion(&d, dict) // the misspelled key
				}
			}
			a.report(d)
		}
		return true
	})
}

// didYouMean finds the misspelled string and the suggestion of a
// builtin's message: `"wrong" (did you mean "right"?)`.
var didYouMean = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`("(?:[^"\\]|\\.)*") \(did you mean ("(?:[^"\\]|\\.)*")\?\)`)
})

// narrowToSuggestion points a finding about a dict argument whose
// message suggests a replacement for a misspelled key or value at that
// string in the dict, and records the suggestion, so that an editor
// underlines the string and offers the fix.
func narrowToSuggestion(d *Diagnostic, in syntax.Expr) {
	m := didYouMean().FindStringSubmatch(d.Message)
	if m == nil {
		return
	}
	wrong, err1 := strconv.Unquote(m[1])
	right, err2 := strconv.Unquote(m[2])
	if err1 != nil || err2 != nil {
		return
	}
	var found *syntax.Literal
	syntax.Walk(in, func(n syntax.Node) bool {
		if lit, ok := n.(*syntax.Literal); ok && found == nil && lit.Token == syntax.STRING && lit.Value == wrong {
			found = lit
		}
		return found == nil
	})
	if found != nil {
		d.Start, d.End = found.Span()
		d.Suggestion = right
	}
}

// flag records a call with a finding of its own arguments.
func (a *analyzer) flag(call *syntax.CallExpr) {
	if a.bad == nil {
		a.bad = map[*syntax.CallExpr]bool{}
	}
	a.bad[call] = true
}

// keyword is one keyword argument of a call.
type keyword struct {
	name  *syntax.Ident
	value syntax.Expr
}

// staticArgs returns a call's arguments as Starlark values (literals,
// starlib.Unknown for everything else), with their expressions; ok is
// false when the call spreads *args or **kwargs. Of a keyword given twice,
// the expressions of the second are kept.
func staticArgs(call *syntax.CallExpr) (args starlark.Tuple, kwargs []starlark.Tuple, argExprs []syntax.Expr, kwExprs map[string]keyword, ok bool) {
	kwExprs = map[string]keyword{}
	for _, arg := range call.Args {
		switch arg := arg.(type) {
		case *syntax.BinaryExpr:
			if arg.Op == syntax.EQ {
				name := arg.X.(*syntax.Ident)
				kwargs = append(kwargs, starlark.Tuple{starlark.String(name.Name), literal(arg.Y)})
				kwExprs[name.Name] = keyword{name, arg.Y}
				continue
			}
		case *syntax.UnaryExpr:
			if arg.Op == syntax.STAR || arg.Op == syntax.STARSTAR {
				return nil, nil, nil, nil, false
			}
		}
		args = append(args, literal(arg))
		argExprs = append(argExprs, arg)
	}
	return args, kwargs, argExprs, kwExprs, true
}

// literal returns the value of a literal expression (strings, numbers,
// True, False, None, and lists, tuples and dicts of them), or
// starlib.Unknown.
func literal(e syntax.Expr) starlark.Value {
	switch e := e.(type) {
	case *syntax.Literal:
		switch v := e.Value.(type) {
		case string:
			return starlark.String(v)
		case int64:
			return starlark.MakeInt64(v)
		case float64:
			return starlark.Float(v)
		}
		if v, ok := e.Value.(*big.Int); ok {
			return starlark.MakeBigInt(v)
		}
	case *syntax.Ident:
		if b, ok := e.Binding.(*resolve.Binding); ok && b.Scope == resolve.Universal {
			switch e.Name {
			case "True":
				return starlark.True
			case "False":
				return starlark.False
			case "None":
				return starlark.None
			}
		}
	case *syntax.UnaryExpr:
		if e.Op == syntax.MINUS {
			if i, ok := literal(e.X).(starlark.Int); ok {
				return starlark.MakeInt(0).Sub(i)
			}
		}
	case *syntax.BinaryExpr:
		return foldStrings(e)
	case *syntax.ParenExpr:
		return literal(e.X)
	case *syntax.ListExpr:
		vs := make([]starlark.Value, len(e.List))
		for i, x := range e.List {
			vs[i] = literal(x)
		}
		return starlark.NewList(vs)
	case *syntax.TupleExpr:
		vs := make(starlark.Tuple, len(e.List))
		for i, x := range e.List {
			vs[i] = literal(x)
		}
		return vs
	case *syntax.DictExpr:
		d := starlark.NewDict(len(e.List))
		for _, x := range e.List {
			kv := x.(*syntax.DictEntry)
			k := literal(kv.Key)
			if k == starlib.Unknown {
				return starlib.Unknown // a computed key could be anything
			}
			if err := d.SetKey(k, literal(kv.Value)); err != nil {
				return starlib.Unknown
			}
		}
		return d
	}
	return starlib.Unknown
}

// maxFolded bounds a string the analysis computes from literals.
const maxFolded = 1 << 20

// foldStrings returns the value of a concatenation of literal strings or
// a literal string repeated a literal number of times (up to maxFolded
// bytes), as Starlark computes it, or starlib.Unknown.
func foldStrings(e *syntax.BinaryExpr) starlark.Value {
	x, y := literal(e.X), literal(e.Y)
	switch e.Op {
	case syntax.PLUS:
		a, ok1 := x.(starlark.String)
		b, ok2 := y.(starlark.String)
		if ok1 && ok2 && len(a)+len(b) <= maxFolded {
			return a + b
		}
	case syntax.STAR:
		s, ok1 := x.(starlark.String)
		n, ok2 := y.(starlark.Int)
		if !ok1 || !ok2 {
			s, ok1 = y.(starlark.String)
			n, ok2 = x.(starlark.Int)
		}
		if k, exact := n.Int64(); ok1 && ok2 && exact && k >= 0 && k <= maxFolded && int64(len(s))*k <= maxFolded {
			return starlark.String(strings.Repeat(string(s), int(k)))
		}
	}
	return starlib.Unknown
}

// checkConfigure reports configure() calls that are not top-level
// statements, and every call after the first.
func (a *analyzer) checkConfigure(f *syntax.File) {
	top := map[*syntax.CallExpr]bool{}
	for _, st := range f.Stmts {
		if es, ok := st.(*syntax.ExprStmt); ok {
			if call, ok := es.X.(*syntax.CallExpr); ok {
				top[call] = true
			}
		}
	}
	var first *syntax.CallExpr
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		if b := a.builtinOf(call); b == nil || b.Name != "configure" {
			return true
		}
		d := Diagnostic{Code: CodeConfigure, Pos: call.Lparen}
		d.Start, d.End = span(call.Fn)
		switch {
		case !top[call]:
			d.Message = starlib.ConfigureNotTopLevel
		case first != nil:
			p := first.Lparen // where the runtime places a call
			d.Message = starlib.ConfigureTwice(fmt.Sprintf("%s:%d:%d", a.file.Path, p.Line, p.Col))
		default:
			first = call
			return true
		}
		a.report(d)
		return true
	})
}

// span returns the start and end of a node.
func span(n syntax.Node) (syntax.Position, syntax.Position) {
	return n.Span()
}

// advance returns the position just after text starting at p (text on one
// line).
func advance(p syntax.Position, text string) syntax.Position {
	p.Col += int32(len([]rune(text)))
	return p
}

func sortDiagnostics(ds []Diagnostic) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Start, ds[j].Start
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// Files returns the .star files named by paths: files as given, and the
// .star files below directories (skipping hidden directories and
// testdata directories only when they are not named).
func Files(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && q != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			// Only regular files (and links to them): a FIFO or a
			// device named *.star would be waited on or read forever.
			if !d.IsDir() && strings.HasSuffix(q, ".star") {
				if info, err := os.Stat(q); err == nil && info.Mode().IsRegular() {
					out = append(out, q)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return slices.Compact(out), nil
}
