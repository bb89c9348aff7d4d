// Package starlib binds the AML evaluator to Starlark: the predeclared
// builtins, value conversion, the module loader and entry resolution.
//
// Every builtin is described once in a catalog (Catalog, Lookup): name,
// parameters with types and defaults, documentation and an example. The
// same description drives argument unpacking and type checks, `aml doc`
// and editor help.
//
// # The surface and its extensions
//
// The core surface is the evaluator's nodes and components, capabilities,
// resources, runtime builtins, the schema builders and the
// credential-free and local providers (deterministic_agent(),
// local_sandbox(), local_workspace(), ...). This package depends on
// go.starlark.net, the evaluator and those providers only, so an
// embedder that evaluates workflows links nothing more.
//
// Provider families with dependencies of their own are Extensions in
// packages of their own: starlib/acpstar (the ACP agents) and
// starlib/fsstar (the filesystem workspace). LoadOptions.Extensions adds
// them to a workflow, and Catalog and Lookup take them too; the aml
// command links them all. An embedder adds its own Go builtins and
// provider factories the same way: a Builtin describes its parameters and
// its Impl receives a Call with the arguments unpacked and type-checked.
// LoadOptions.FS loads the entry file and its modules from an fs.FS.
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
