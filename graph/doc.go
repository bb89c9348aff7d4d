// Package graph draws the tree a workflow builds, without running it:
// agents (with their provider, model, schema, prompt, system text,
// follow-up turns and grants), parallel() fan-outs, components (a lazy
// component, whose body runs only when the workflow runs, is a dashed box
// with what is known of it statically), scripts and files, and sandbox,
// workspace and provide scopes as frames around what they enclose. Each
// node names its authored file:line:col.
//
// Build makes a Graph from an evaluator tree (eval nodes); WriteMermaid
// and WriteDOT write text, WriteSVG and WritePNG draw it in Go (no
// Graphviz or browser is needed), and WriteHTML writes one self-contained
// page with the picture and a panel showing a selected node's source.
//
// The layout is a nested-box flow, written here rather than taken from a
// general graph-layout library: a workflow is a tree whose only
// structure is sequence, fan-out and enclosing scope, and drawing exactly
// that (a sequence top to bottom, branches side by side, scopes as
// frames) is both simpler and easier to read than a layered layout of a
// general graph. The functions of this package are safe for concurrent
// use on distinct graphs; a Graph is not modified by writing it.
package graph
