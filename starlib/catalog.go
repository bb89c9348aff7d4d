package starlib

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/option"
)

// Param describes one parameter of a builtin. The same description drives
// argument unpacking, type checks, `aml doc` and editor help.
type Param struct {
	// Name is the parameter name; a variadic parameter is written without
	// the star (its Variadic field is set).
	Name string
	// Type is the accepted types, separated by " | ": str, int, bool,
	// None, dict, list, callable, renderable, agent_provider, component,
	// any.
	Type string
	// Default is the default value as Starlark source, or "" when the
	// parameter is required.
	Default string
	// Doc says what the parameter does.
	Doc string
	// Variadic marks *children-style parameters that collect the remaining
	// positional arguments.
	Variadic bool
	// Positional lets the parameter be passed by position (it precedes the
	// variadic parameter); other named parameters are keyword-only.
	Positional bool
	// Kwargs marks a **name parameter that collects arbitrary keyword
	// arguments.
	Kwargs bool
	// Secret marks a credential: errors never quote its value.
	Secret bool
	// Enum lists the strings a parameter accepts when it is given a
	// string (its other types are unaffected), for checks, completion and
	// the reference.
	Enum []string
	// Keys lists the keys a dict parameter accepts, each with its type
	// and strings: the check rejects others, and completion offers them.
	Keys []Key
	// OpenKeys makes Keys the usual keys rather than the only ones (a
	// JSON Schema): completion offers them and their values are checked,
	// and other keys are accepted.
	OpenKeys bool
	// NonNegative rejects negative integers.
	NonNegative bool
	// Positive rejects integers below 1; Unit names what the integer
	// counts and OmitFor what leaving the parameter out means, for the
	// message ("timeout_ms must be a positive integer (milliseconds), got
	// 0; omit it for no timeout").
	Positive      bool
	Unit, OmitFor string
}

// Key is one key a dict parameter accepts.
type Key struct {
	Name string
	// Type is the accepted types of its value, as in Param.Type.
	Type string
	// Enum lists the strings it accepts, as in Param.Enum.
	Enum []string
	// Doc is one sentence on what the key does (completion and aml doc
	// show it).
	Doc string
}

// Builtin is one predeclared function: its reference documentation and its
// implementation.
type Builtin struct {
	// Name is the Starlark name.
	Name string
	// Group orders the reference ("nodes", "components", "runtime",
	// "providers", "values").
	Group string
	// Doc is the reference text: the first sentence summarizes.
	Doc string
	// Params are the parameters in declaration order.
	Params []Param
	// Returns describes the result.
	Returns string
	// Example is a short usage example.
	Example string
	// Impl implements the builtin; it receives the arguments unpacked
	// and type-checked against Params.
	Impl func(c *Call) (starlark.Value, error)
	// Static marks a builtin whose Impl only checks its arguments and
	// builds its value (no effects, nothing read but its arguments, no
	// use of the thread), so that the analysis runs the same Impl on a
	// call whose arguments are literals (CheckRules): run and check
	// decide its rules with one piece of code.
	Static bool
	// OutsideComponent, when set, is the error of a call while no
	// component is active (at the top level of a module, or in a provider
	// callback): the builtin fails with it, and the analysis reports it
	// for a call that a module's top level always makes.
	OutsideComponent string
	// Rules, for a builtin that is not Static, are the checks of its
	// Impl that need only its arguments, made by the code the Impl calls
	// for them (where its order of checks puts them); the analysis calls
	// Rules on literal arguments (CheckRules).
	Rules func(c *Call) error
	// raw, when set, replaces catalog unpacking for builtins that take
	// arbitrary keyword arguments.
	raw func(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)
}

// Signature renders the builtin's Starlark signature, e.g.
// `agent(*children, provider=None, model=None)`.
func (b *Builtin) Signature() string {
	var parts []string
	for _, p := range b.Params {
		switch {
		case p.Variadic:
			parts = append(parts, "*"+p.Name)
		case p.Kwargs:
			parts = append(parts, "**"+p.Name)
		case p.Default == "":
			parts = append(parts, p.Name)
		default:
			parts = append(parts, p.Name+"="+p.Default)
		}
	}
	return b.Name + "(" + strings.Join(parts, ", ") + ")"
}

// Summary returns the first sentence of the builtin's documentation.
func (b *Builtin) Summary() string {
	doc := b.Doc
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i+1]
	}
	if i := strings.IndexByte(doc, '\n'); i >= 0 {
		doc = doc[:i]
	}
	return doc
}

// core lists the builtins every workflow has, by group: the nodes and
// components of the evaluator, its capabilities and resources, the
// runtime, the credential-free and local providers, and the schema
// builders. Provider families with heavier dependencies (ACP agents,
// persistent workspaces, ...) are Extensions in packages of their own.
var core = []*Builtin{
	// nodes and components
	agentBuiltin, systemBuiltin, followUpBuiltin, blockBuiltin, fragmentBuiltin, parallelBuiltin, budgetBuiltin, includeBuiltin,
	componentBuiltin, evaluateBuiltin, evaluateAllBuiltin, withTraceSpanBuiltin, askBuiltin, approveBuiltin,
	createContextBuiltin, provideBuiltin, useContextBuiltin,
	// capabilities
	defineToolBuiltin, toolBuiltin, defineMCPServerBuiltin, mcpBuiltin, skillBuiltin,
	// resources
	sandboxBuiltin, workspaceBuiltin, fileBuiltin, scriptBuiltin,
	// runtime
	configureBuiltin, envBuiltin,
	// providers
	deterministicAgentBuiltin, deterministicSandboxBuiltin, deterministicWorkspaceBuiltin,
	localSandboxBuiltin, localWorkspaceBuiltin,
	// schema
	schemaObject, schemaString, schemaInteger, schemaNumber, schemaBoolean, schemaArray,
	schemaEnum, schemaLiteral, schemaOptional, schemaNullable, schemaDescribe,
}

// Extension is a group of builtins that joins the Starlark surface of the
// workflows loaded with it (LoadOptions.Extensions): the way provider
// families with their own dependencies, and an embedder's own Go
// builtins and provider factories, reach Starlark. Its builtins appear in
// Catalog and aml doc next to the core ones. An Extension must not be
// changed after its first use; it is safe for concurrent use then.
type Extension struct {
	// Name identifies the extension in errors.
	Name string
	// Builtins are the functions it predeclares. Their names must be
	// unique among all builtins a workflow is loaded with.
	Builtins []*Builtin
}

// Catalog returns the core builtins and those of exts, sorted by group
// then name. The result must not be modified.
func Catalog(exts ...*Extension) []*Builtin {
	if len(exts) == 0 {
		return coreCatalog()
	}
	all := append([]*Builtin(nil), coreCatalog()...)
	for _, x := range exts {
		all = append(all, x.Builtins...)
	}
	sortCatalog(all)
	return all
}

// StandIn returns a builtin that takes the place of one a program does
// not link: it has the name, group and doc given, accepts any
// arguments, and fails every call with "NAME: err". Its signature
// takes none, so a check of its calls is left to the program that
// links the real one.
func StandIn(name, group, doc string, err error) *Builtin {
	b := &Builtin{Name: name, Group: group, Doc: doc, Returns: "what " + name + " returns where it is linked"}
	b.raw = func(*starlark.Thread, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b
}

// Lookup returns the builtin named name among the core builtins and those
// of exts.
func Lookup(name string, exts ...*Extension) (*Builtin, bool) {
	for _, x := range exts {
		for _, b := range x.Builtins {
			if b.Name == name {
				return b, true
			}
		}
	}
	b, ok := coreByName()[name]
	return b, ok
}

var coreCatalog = sync.OnceValue(func() []*Builtin {
	all := append([]*Builtin(nil), core...)
	sortCatalog(all)
	return all
})

var coreByName = sync.OnceValue(func() map[string]*Builtin {
	m := make(map[string]*Builtin, len(core))
	for _, b := range core {
		if _, dup := m[b.Name]; dup {
			panic("duplicate builtin " + b.Name)
		}
		m[b.Name] = b
	}
	return m
})

var groupOrder = map[string]int{"nodes": 0, "components": 1, "capabilities": 2, "resources": 3, "runtime": 4, "providers": 5, "schema": 6, "values": 7}

func sortCatalog(bs []*Builtin) {
	sort.SliceStable(bs, func(i, j int) bool {
		gi, gj := groupOrder[bs[i].Group], groupOrder[bs[j].Group]
		if gi != gj {
			return gi < gj
		}
		return bs[i].Name < bs[j].Name
	})
}

// value returns the Starlark builtin function for b.
func (b *Builtin) value() *starlark.Builtin {
	return starlark.NewBuiltin(b.Name, func(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if b.raw != nil {
			return b.raw(thread, args, kwargs)
		}
		c, err := b.unpack(thread, args, kwargs)
		if err != nil {
			return nil, err
		}
		v, err := b.Impl(c)
		if err == nil {
			switch x := v.(type) {
			case *AgentProviderValue:
				if e := envOf(thread); e != nil {
					e.addProvider(x.Provider)
					e.recordFactory(x.Provider, b.Name, args, kwargs, c.pos)
				}
			case *ToolValue:
				if e := envOf(thread); e != nil {
					e.addTool(x.Tool)
				}
			case *MCPServerValue:
				if e := envOf(thread); e != nil {
					e.addMCPServer(x.Server)
				}
			case *SandboxProviderValue:
				if e := envOf(thread); e != nil {
					e.addSandbox(x.Provider)
					e.recordFactory(x.Provider, b.Name, args, kwargs, c.pos)
				}
			case *WorkspaceProviderValue:
				if e := envOf(thread); e != nil {
					e.addWorkspace(x.Provider)
					e.recordFactory(x.Provider, b.Name, args, kwargs, c.pos)
				}
			}
		}
		return v, err
	})
}

// Call is one invocation of a builtin with its arguments unpacked and
// type-checked against the builtin's parameters. A Call is used only by
// the goroutine running the builtin.
type Call struct {
	b      *Builtin
	thread *starlark.Thread
	pos    eval.Position
	vals   []starlark.Value // by parameter index; nil when omitted
	rest   starlark.Tuple   // variadic arguments
}

// unpack matches args and kwargs to b's parameters and checks their
// types and values; it fails with the first problem.
func (b *Builtin) unpack(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (*Call, error) {
	c := &Call{b: b, thread: thread, pos: callerPos(thread)}
	var first error
	b.match(c, args, kwargs, func(e *ArgumentError) bool {
		first = e
		return false
	})
	if first != nil {
		return nil, first
	}
	if e := envOf(thread); e != nil {
		for pi, p := range b.Params {
			if s, ok := c.vals[pi].(starlark.String); ok && p.Secret {
				e.addSecret(string(s)) // for Workflow.Secrets
			}
		}
	}
	return c, nil
}

// ArgumentError is a problem with the arguments of a call of a builtin,
// in the words the runtime uses, with the argument it concerns so that a
// static checker can point at it.
type ArgumentError struct {
	// Msg is the message, starting with the builtin's name.
	Msg string
	// Arg is the index of the positional argument concerned, or -1.
	Arg int
	// Keyword is the keyword argument concerned, or "".
	Keyword string
	// Value reports that the argument's value is wrong (rather than its
	// name, its position or its absence).
	Value bool
	// Param is the parameter concerned, or "" (too many arguments).
	Param string
	// Suggestion is the nearest valid keyword or value, when one is close.
	Suggestion string
	// err is the underlying error, for errors.Is (option errors).
	err error
}

func (e *ArgumentError) Error() string { return e.Msg }

// Unwrap returns the underlying error, if any.
func (e *ArgumentError) Unwrap() error { return e.err }

// Unknown stands for an argument whose value is not known statically (it
// is computed at run time): CheckArguments accepts it for any parameter.
var Unknown starlark.Value = unknownValue{}

type unknownValue struct{}

func (unknownValue) String() string        { return "?" }
func (unknownValue) Type() string          { return "unknown" }
func (unknownValue) Freeze()               {}
func (unknownValue) Truth() starlark.Bool  { return true }
func (unknownValue) Hash() (uint32, error) { return 0, nil }

// CheckArguments reports every problem the runtime would find with a call
// of b with args and kwargs before running it: unknown, duplicate or
// missing arguments, too many positional ones, and values of the wrong
// type or outside a parameter's Enum, Keys or range. An argument that is
// not known statically is Unknown and always accepted.
func (b *Builtin) CheckArguments(args starlark.Tuple, kwargs []starlark.Tuple) []*ArgumentError {
	var all []*ArgumentError
	b.match(&Call{b: b}, args, kwargs, func(e *ArgumentError) bool {
		all = append(all, e)
		return true
	})
	return all
}

// CheckRules returns the error b's implementation fails with for a
// call with args and kwargs (literals, Unknown for what is not known
// statically), when that is known without running the workflow: b is
// Static, its arguments match its parameters (CheckArguments reports
// the problems there), and every argument is known, except children,
// which stand for a node when they are not, and arguments of parameters
// that only take opaque values (providers, descriptors, callables),
// which the Impl only tells apart by their type. Otherwise, or when the
// Impl accepts the call, it returns nil: a rule is never decided on a
// value that is not known.
func (b *Builtin) CheckRules(args starlark.Tuple, kwargs []starlark.Tuple) (err error) {
	check := b.Rules
	if b.Static && b.Impl != nil {
		check = func(c *Call) error {
			_, err := b.Impl(c)
			return err
		}
	}
	if check == nil {
		return nil
	}
	c := &Call{b: b}
	ok := true
	b.match(c, args, kwargs, func(*ArgumentError) bool {
		ok = false
		return false
	})
	if !ok {
		return nil
	}
	for pi, v := range c.vals {
		if v == nil || !hasUnknown(v) {
			continue
		}
		stand := standIn(b.Params[pi].Type)
		if b.Params[pi].Type == "renderable" {
			stand = nodeValue(&eval.Fragment{}) // a node: it renders
		}
		if v != Unknown || stand == nil {
			return nil
		}
		c.vals[pi] = stand
	}
	if len(c.rest) > 0 {
		rest := make(starlark.Tuple, len(c.rest))
		for i, v := range c.rest {
			if hasUnknown(v) {
				v = nodeValue(&eval.Fragment{})
			}
			rest[i] = v
		}
		c.rest = rest
	}
	defer func() {
		if r := recover(); r != nil {
			err = nil // a rule that cannot run on literals decides nothing
		}
	}()
	return check(c)
}

// standIn returns a value that stands for an argument not known
// statically of a parameter that only takes opaque values (a provider
// or a descriptor, which Impls only tell apart by type), or nil when the
// parameter takes data, whose rules cannot be decided without it.
func standIn(typ string) starlark.Value {
	var v starlark.Value
	for _, t := range strings.Split(typ, " | ") {
		switch t {
		case "None":
		case "agent_provider":
			v = &AgentProviderValue{}
		case "sandbox_provider":
			v = &SandboxProviderValue{}
		case "workspace_provider":
			v = &WorkspaceProviderValue{}
		case "mcp_server":
			v = &MCPServerValue{}
		default:
			return nil
		}
	}
	return v
}

// hasUnknown reports whether v is Unknown or holds it.
func hasUnknown(v starlark.Value) bool {
	switch v := v.(type) {
	case unknownValue:
		return true
	case *starlark.List:
		for i := range v.Len() {
			if hasUnknown(v.Index(i)) {
				return true
			}
		}
	case starlark.Tuple:
		for _, x := range v {
			if hasUnknown(x) {
				return true
			}
		}
	case *starlark.Dict:
		for _, kv := range v.Items() {
			if hasUnknown(kv[0]) || hasUnknown(kv[1]) {
				return true
			}
		}
	}
	return false
}

// match fills c.vals and c.rest from args and kwargs and reports each
// problem to report, stopping when it returns false.
func (b *Builtin) match(c *Call, args starlark.Tuple, kwargs []starlark.Tuple, report func(*ArgumentError) bool) {
	c.vals = make([]starlark.Value, len(b.Params))
	from := make([]int, len(b.Params)) // positional index, or -1-kwarg index
	variadic := -1
	i := 0
	for pi, p := range b.Params {
		if p.Variadic {
			variadic = pi
			break
		}
		if !p.Positional {
			break
		}
		if i < len(args) {
			c.vals[pi], from[pi] = args[i], i
			i++
		}
	}
	if i < len(args) {
		if variadic < 0 {
			if !report(&ArgumentError{Msg: fmt.Sprintf("%s: got %d positional arguments, want at most %d (see `aml doc %s`)", b.Name, len(args), i, b.Name), Arg: i}) {
				return
			}
		} else {
			c.rest = args[i:]
		}
	}
	for ki, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		pi := b.param(k)
		if pi < 0 || b.Params[pi].Variadic {
			msg := fmt.Sprintf("%s: unexpected keyword argument %q", b.Name, k)
			s := nearest(k, b.keywordNames())
			if s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			if !report(&ArgumentError{Msg: fmt.Sprintf("%s; %s accepts %s", msg, b.Name, strings.Join(b.keywordNames(), ", ")), Arg: -1, Keyword: k, Suggestion: s}) {
				return
			}
			continue
		}
		if c.vals[pi] != nil {
			if !report(&ArgumentError{Msg: fmt.Sprintf("%s: got multiple values for argument %q", b.Name, k), Arg: -1, Keyword: k, Param: k}) {
				return
			}
			continue
		}
		c.vals[pi], from[pi] = kv[1], -1-ki
	}
	at := func(pi int) (int, string) {
		if f := from[pi]; f < 0 {
			return -1, string(kwargs[-1-f][0].(starlark.String))
		} else {
			return f, ""
		}
	}
	for pi, p := range b.Params {
		v := c.vals[pi]
		if p.Variadic {
			continue
		}
		if v == nil {
			if p.Default == "" {
				if !report(&ArgumentError{Msg: fmt.Sprintf("%s: missing argument %q", b.Name, p.Name), Arg: -1, Param: p.Name}) {
					return
				}
			}
			continue
		}
		if v == starlark.None && p.Default == "None" {
			c.vals[pi] = nil
			continue
		}
		if v == Unknown {
			continue
		}
		arg, kw := at(pi)
		bad := func(msg, suggestion string, err error) bool {
			return report(&ArgumentError{Msg: msg, Arg: arg, Keyword: kw, Value: true, Param: p.Name, Suggestion: suggestion, err: err})
		}
		if !accepts(p.Type, v) {
			if !bad(fmt.Sprintf("%s: %s must be %s, got %s", b.Name, p.Name, describeType(p.Type), describeValue(v)), "", nil) {
				return
			}
			continue
		}
		if msg, s := p.checkValue(v); msg != "" {
			if !bad(b.Name+": "+msg, s, nil) {
				return
			}
			continue
		}
		if s, ok := v.(starlark.String); ok && b.Group == "providers" {
			// Provider factories share one rule for their option strings.
			if err := option.CheckGiven(b.Name, p.Name, string(s), p.Secret); err != nil {
				if s == "" && p.Default != "" {
					err = fmt.Errorf("%w; omit %s to use its default", err, p.Name)
				}
				if !bad(err.Error(), "", err) {
					return
				}
			}
		}
	}
}

// checkValue applies the parameter's Enum, Keys, NonNegative and Positive rules to
// an accepted value and returns the problem (without the builtin's name)
// and the nearest valid string, or "".
func (p Param) checkValue(v starlark.Value) (msg, suggestion string) {
	switch v := v.(type) {
	case starlark.String:
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, string(v)) {
			return enumMessage(p.Name, p.Enum, string(v))
		}
	case starlark.Int:
		if p.NonNegative && v.Sign() < 0 {
			return fmt.Sprintf("%s must be a non-negative integer (0 disables the limit), got %s", p.Name, v), ""
		}
		if p.Positive && v.Sign() <= 0 {
			msg := p.Name + " must be a positive integer"
			if p.Unit != "" {
				msg += " (" + p.Unit + ")"
			}
			msg += ", got " + v.String()
			if p.OmitFor != "" {
				msg += "; omit it for " + p.OmitFor
			}
			return msg, ""
		}
	case *starlark.Dict:
		if len(p.Keys) == 0 {
			return "", ""
		}
		names := make([]string, len(p.Keys))
		for i, k := range p.Keys {
			names[i] = k.Name
		}
		for _, item := range v.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				if item[0] == Unknown {
					continue
				}
				return fmt.Sprintf("%s keys must be strings, got %s", p.Name, item[0].Type()), ""
			}
			i := slices.Index(names, string(k))
			if i < 0 && p.OpenKeys {
				continue
			}
			if i < 0 {
				msg := fmt.Sprintf("unknown %s key %q", p.Name, string(k))
				s := nearest(string(k), names)
				if s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return fmt.Sprintf("%s; valid keys are %s", msg, strings.Join(names, ", ")), s
			}
			key := p.Keys[i]
			if item[1] == Unknown {
				continue
			}
			if key.Type != "" && !accepts(key.Type, item[1]) {
				want := describeType(key.Type)
				switch {
				case key.Type == "bool":
					want = "True or False"
				case key.Type == "str" && len(key.Enum) > 0:
					want = quotedList(key.Enum)
				}
				return fmt.Sprintf("%s[%q] must be %s, got %s", p.Name, key.Name, want, item[1].String()), ""
			}
			if sv, ok := item[1].(starlark.String); ok && len(key.Enum) > 0 && !slices.Contains(key.Enum, string(sv)) {
				return enumMessage(fmt.Sprintf("%s[%q]", p.Name, key.Name), key.Enum, string(sv))
			}
		}
	}
	return "", ""
}

// quotedList joins quoted strings as `"a", "b" or "c"`.
func quotedList(allowed []string) string {
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	if len(quoted) > 2 {
		return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	}
	return strings.Join(quoted, " or ")
}

// enumMessage says that what must be one of allowed, and suggests the
// nearest.
func enumMessage(what string, allowed []string, got string) (string, string) {
	msg := fmt.Sprintf("%s must be %s, got %q", what, quotedList(allowed), got)
	s := nearest(got, allowed)
	if s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg, s
}

func (b *Builtin) mustParam(name string) int {
	i := b.param(name)
	if i < 0 {
		panic(fmt.Sprintf("builtin %s has no parameter %q", b.Name, name))
	}
	return i
}

func (b *Builtin) param(name string) int {
	for i, p := range b.Params {
		if p.Name == name {
			return i
		}
	}
	return -1
}

func (b *Builtin) keywordNames() []string {
	var names []string
	for _, p := range b.Params {
		if !p.Variadic {
			names = append(names, p.Name)
		}
	}
	return names
}

// paramType is one type name of the catalog: how to recognize its values
// and how error messages describe it.
type paramType struct {
	ok   func(starlark.Value) bool
	desc string
}

func isType[T starlark.Value](v starlark.Value) bool {
	_, ok := v.(T)
	return ok
}

// paramTypes are the type names a Param.Type may combine with " | ".
var paramTypes = map[string]paramType{
	"any":                {func(starlark.Value) bool { return true }, "any value"},
	"renderable":         {func(starlark.Value) bool { return true }, "a renderable value"},
	"str":                {isType[starlark.String], "a string"},
	"int":                {isType[starlark.Int], "an int"},
	"float":              {isType[starlark.Float], "a float"},
	"bool":               {isType[starlark.Bool], "a bool"},
	"None":               {func(v starlark.Value) bool { return v == starlark.None }, "None"},
	"dict":               {isType[*starlark.Dict], "a dict"},
	"list":               {func(v starlark.Value) bool { return isType[*starlark.List](v) || isType[starlark.Tuple](v) }, "a list"},
	"callable":           {isType[starlark.Callable], "a function"},
	"agent_provider":     {isType[*AgentProviderValue], "an agent provider (such as deterministic_agent())"},
	"tool":               {isType[*ToolValue], "a tool from define_tool()"},
	"mcp_server":         {isType[*MCPServerValue], "a descriptor from define_mcp_server()"},
	"context":            {isType[*ContextValue], "a context from create_context()"},
	"sandbox_provider":   {isType[*SandboxProviderValue], "a sandbox provider (such as local_sandbox())"},
	"workspace_provider": {isType[*WorkspaceProviderValue], "a workspace provider (such as local_workspace(directory=...))"},
}

// accepts reports whether v matches one of the types in typ.
func accepts(typ string, v starlark.Value) bool {
	for _, t := range strings.Split(typ, " | ") {
		if pt, ok := paramTypes[t]; ok && pt.ok(v) {
			return true
		}
	}
	return false
}

func describeType(typ string) string {
	parts := strings.Split(typ, " | ")
	for i, p := range parts {
		if pt, ok := paramTypes[p]; ok {
			parts[i] = pt.desc
		}
	}
	return strings.Join(parts, " or ")
}

func describeValue(v starlark.Value) string {
	switch v := v.(type) {
	case starlark.String:
		s := string(v)
		if len(s) > 40 {
			s = s[:37] + "..."
		}
		return fmt.Sprintf("string %q", s)
	case starlark.Int, starlark.Bool:
		return fmt.Sprintf("%s %s", v.Type(), v.String())
	}
	return v.Type()
}

// callerPos returns the position of the Starlark code that called the
// current builtin.
func callerPos(thread *starlark.Thread) eval.Position {
	if thread.CallStackDepth() < 2 {
		return eval.Position{}
	}
	return toPos(thread.CallFrame(1).Pos)
}

func toPos(p syntax.Position) eval.Position {
	return eval.Position{File: p.Filename(), Line: p.Line, Col: p.Col}
}

// Argument accessors. Each returns the zero value when the argument was
// omitted (or None with a None default). A name that is not one of the
// builtin's parameters panics: it is a mistake in the builtin.

// Has reports whether the argument name was passed (and is not a None
// that stands for its None default).
func (c *Call) Has(name string) bool { return c.vals[c.b.mustParam(name)] != nil }

// Value returns the argument name, or nil when it was omitted.
func (c *Call) Value(name string) starlark.Value { return c.vals[c.b.mustParam(name)] }

// Str returns a string argument, or "".
func (c *Call) Str(name string) string {
	if v, ok := c.Value(name).(starlark.String); ok {
		return string(v)
	}
	return ""
}

// Abs resolves p, a path argument of a provider factory, as the workflow
// resolves relative paths: from starlib.LoadOptions.Dir, else the
// working directory. An absolute or empty p is returned as it is.
func (c *Call) Abs(p string) (string, error) {
	var e *env
	if c.thread != nil {
		e = envOf(c.thread)
	}
	return e.abs(p)
}

// Bool returns a bool argument, or def when it was omitted.
func (c *Call) Bool(name string, def bool) bool {
	if v, ok := c.Value(name).(starlark.Bool); ok {
		return bool(v)
	}
	return def
}

// Int returns an int argument and whether it was passed; an int that
// does not fit an int64 is an error.
func (c *Call) Int(name string) (int64, bool, error) {
	v, ok := c.Value(name).(starlark.Int)
	if !ok {
		return 0, false, nil
	}
	n, exact := v.Int64()
	if !exact {
		return 0, true, fmt.Errorf("%s: %s is out of range", c.b.Name, name)
	}
	return n, true, nil
}

// StringList returns a list argument of strings, or nil when omitted.
func (c *Call) StringList(name string) ([]string, error) {
	v := c.Value(name)
	if v == nil {
		return nil, nil
	}
	ss, err := stringList(v)
	if err != nil {
		return nil, c.Errorf("%s %v", name, err)
	}
	return ss, nil
}

// StringDict returns a dict argument mapping strings to strings, or nil
// when omitted.
func (c *Call) StringDict(name string) (map[string]string, error) {
	d, ok := c.Value(name).(*starlark.Dict)
	if !ok {
		return nil, nil
	}
	out := make(map[string]string, d.Len())
	for _, kv := range d.Items() {
		k, ok1 := kv[0].(starlark.String)
		val, ok2 := kv[1].(starlark.String)
		if !ok1 || !ok2 {
			return nil, c.Errorf("%s must map strings to strings, got %s: %s", name, kv[0].Type(), kv[1].Type())
		}
		out[string(k)] = string(val)
	}
	return out, nil
}

// JSON returns a dict argument as JSON data (map[string]any), or nil
// when omitted.
func (c *Call) JSON(name string) (map[string]any, error) {
	v := c.Value(name)
	if v == nil || v == starlark.None {
		return nil, nil
	}
	g, err := toGo(v)
	if err != nil {
		return nil, c.Errorf("%s must be JSON data: %v", name, err)
	}
	m, ok := g.(map[string]any)
	if !ok {
		return nil, c.Errorf("%s must be a dict", name)
	}
	return m, nil
}

// Children converts the variadic arguments to renderables.
func (c *Call) Children() ([]any, error) {
	return toRenderables(c.rest, c.b.Name+"() argument")
}

// Pos is the source position of the call, for the node it builds.
func (c *Call) Pos() eval.Position { return c.pos }

// Thread is the Starlark thread running the call.
func (c *Call) Thread() *starlark.Thread { return c.thread }

// outsideComponent is the builtin's error for a call while no component
// is active.
func (c *Call) outsideComponent() error { return errors.New(c.b.OutsideComponent) }

// Errorf returns an error for this call, prefixed with the builtin's
// name; the caller's position is added where the error surfaces.
func (c *Call) Errorf(format string, args ...any) error {
	return fmt.Errorf(c.b.Name+": "+format, args...)
}

// nearest returns the candidate closest to s by edit distance, if close.
func nearest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
