// Package starlib binds the AML evaluator to Starlark: the predeclared
// builtins, value conversion, the module loader and entry resolution.
//
// Every builtin is described once in a catalog (Catalog, Lookup): name,
// parameters with types and defaults, documentation and an example. The
// same description drives argument unpacking and type checks, `aml doc`
// and editor help.
//
// LoadFile executes a workflow file with the one AML dialect
// (FileOptions): sets, top-level if/for and recursion are allowed, while
// loops and global reassignment are not. load() resolves "@std/..." names
// from package stdlib and other names as paths relative to the loading
// file; each module runs once per workflow on its own thread, and a cycle
// is an error naming it. Builtins keep their state in thread locals, never
// in package globals.
//
// Workflow.Entry resolves the global to run: a callable becomes the root
// component (so it may call evaluate()), any other value must be
// renderable. Component bodies, and provider callbacks such as a
// deterministic agent's respond function, run on their own Starlark
// threads; a callback's thread has no active component, so evaluate() is
// masked there. Values that cross goroutines (component arguments,
// callbacks) are frozen first, and cancelling the evaluation cancels every
// running Starlark thread.
package starlib
