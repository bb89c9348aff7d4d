package stdlib

import (
	"slices"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// A Member describes one function of a standard module, for documentation
// tools such as a doc command. It is plain data: the values returned by
// Members are copies that the caller owns, so they are safe for concurrent
// use as long as the caller does not modify one while others read it.
type Member struct {
	// Name is the expression by which the function is reached once the
	// module's globals are loaded, such as "dedent" or "path.join".
	Name string
	// Signature is the call form, such as "wrap(s, width)" or
	// "path.join(*parts)".
	Signature string
	// Doc is a one-paragraph description of the function.
	Doc string
}

// builtinFunc is the Go signature of a Starlark built-in function.
type builtinFunc = func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)

// memberDef defines one function of a module.
type memberDef struct {
	Member
	fn builtinFunc
}

// moduleDef defines one standard module.
type moduleDef struct {
	name string // load name, e.g. "@std/text"
	doc  string // one-paragraph summary
	// global, if non-empty, is the name of the single global through
	// which all members are reached (a starlarkstruct.Module of that
	// name). If empty, each member is a global of its own.
	global  string
	members []memberDef
}

// registry holds the modules, keyed by load name, with their frozen
// globals; they are built on first use, not at every start of a program
// that links this package.
var registry = sync.OnceValue(func() map[string]*builtModule { return buildRegistry(textModule, pathModule, reModule) })

type builtModule struct {
	def     *moduleDef
	globals starlark.StringDict
}

func buildRegistry(defs ...*moduleDef) map[string]*builtModule {
	reg := make(map[string]*builtModule, len(defs))
	for _, def := range defs {
		fns := make(starlark.StringDict, len(def.members))
		for _, m := range def.members {
			fns[shortName(def, m.Name)] = starlark.NewBuiltin(m.Name, m.fn)
		}
		globals := fns
		if def.global != "" {
			globals = starlark.StringDict{
				def.global: &starlarkstruct.Module{Name: def.global, Members: fns},
			}
		}
		globals.Freeze()
		reg[def.name] = &builtModule{def: def, globals: globals}
	}
	return reg
}

// shortName returns a member's attribute name within its module value.
func shortName(def *moduleDef, name string) string {
	if def.global == "" {
		return name
	}
	return name[len(def.global)+1:]
}

// Module returns the globals of the standard module with the given load
// name, such as "@std/text", and reports whether such a module exists.
// The returned dictionary is a new map on every call, so callers may
// modify it; its values are frozen and shared between calls and threads.
// Module is safe for concurrent use.
func Module(name string) (starlark.StringDict, bool) {
	m, ok := registry()[name]
	if !ok {
		return nil, false
	}
	globals := make(starlark.StringDict, len(m.globals))
	for k, v := range m.globals {
		globals[k] = v
	}
	return globals, true
}

// Names returns the load names of all standard modules in sorted order:
// "@std/path", "@std/re" and "@std/text". The result is a new slice on
// every call. Names is safe for concurrent use.
func Names() []string {
	names := make([]string, 0, len(registry()))
	for name := range registry() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Doc returns a one-paragraph description of the standard module with the
// given load name, or "" if there is no such module. Doc is safe for
// concurrent use.
func Doc(name string) string {
	m, ok := registry()[name]
	if !ok {
		return ""
	}
	return m.def.doc
}

// Members returns the functions of the standard module with the given load
// name, in documentation order, or nil if there is no such module. The
// result is a new slice on every call. Members is safe for concurrent use.
func Members(name string) []Member {
	m, ok := registry()[name]
	if !ok {
		return nil
	}
	out := make([]Member, len(m.def.members))
	for i, d := range m.def.members {
		out[i] = d.Member
	}
	return out
}
