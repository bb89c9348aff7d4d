package analysis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// checkPlacement gives the node trees written out literally to the
// evaluator's own static check (eval.Runtime.Check):
//
//   - what the entry function returns (or the entry global is assigned),
//     checked as the root of the evaluation, so every rule applies;
//   - every agent() call anywhere, checked for the rules that do not
//     depend on where the agent is placed (follow-up and system()
//     structure, turns, grants), since a helper may return it into any
//     context.
//
// Parts that are not literal (names, calls of functions, computed text)
// are left out, so they never cause a finding.
func (a *analyzer) checkPlacement(f *syntax.File) {
	rt, err := eval.New(a.configured(f))
	if err != nil {
		return
	}
	b := &builder{a: a, calls: map[eval.Position]*syntax.CallExpr{}}
	seen := map[string]bool{}
	report := func(err error, keep func(msg string) bool) {
		var ee *eval.EvaluationError
		if !errors.As(err, &ee) || (keep != nil && !keep(ee.Msg)) {
			return
		}
		call := b.calls[ee.Pos]
		if call == nil {
			return
		}
		key := fmt.Sprintf("%v %s", ee.Pos, ee.Msg)
		if seen[key] {
			return
		}
		seen[key] = true
		d := Diagnostic{Code: CodePlacement, Message: ee.Msg, Pos: call.Lparen}
		var limit *eval.LimitError
		if errors.As(err, &limit) {
			d.Limit = limit.Limit
		}
		d.Start, _ = call.Fn.Span()
		_, d.End = call.Span()
		a.report(d)
	}
	entry := a.opts.Entry
	if entry == "" {
		entry = "main"
	}
	isEntry := false
	var roots []any
	for _, st := range f.Stmts {
		switch st := st.(type) {
		case *syntax.DefStmt:
			if st.Name.Name == entry {
				isEntry = true
				returns(st.Body, func(e syntax.Expr) {
					if v, ok := b.node(e); ok {
						roots = append(roots, v)
						report(rt.Check(v), nil)
					}
				})
			}
		case *syntax.AssignStmt:
			if id, ok := st.LHS.(*syntax.Ident); ok && id.Name == entry && st.Op == syntax.EQ {
				isEntry = true
				if v, ok := b.node(st.RHS); ok {
					roots = append(roots, v)
					report(rt.Check(v), nil)
				}
			}
		}
	}
	if isEntry {
		a.checkProviders(f, b, roots)
	}
	a.checkWorkspaces(b, roots)
	syntax.Walk(f, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok {
			if bi := a.builtinOf(call); bi != nil && bi.Name == "agent" {
				if v, ok := b.node(call); ok {
					report(rt.Check(v), contextFree)
				}
			}
		}
		return true
	})
}

// checkProviders reports, in an entry file, the nodes that no provider
// can reach when they run (the evaluator's own message, at the call):
// an agent() or a workspace() without provider= when the file does not
// configure(agent_provider=) or (workspace_provider=), and an outermost
// sandbox() of the entry's literal tree without provider= when it does
// not configure(sandbox_provider=). A sandbox() elsewhere may run nested
// in another one, which lends it its lease, so it is not reported.
func (a *analyzer) checkProviders(f *syntax.File, b *builder, roots []any) {
	agents, sandboxes, workspaces := a.configuredProviders(f)
	noProvider := func(call *syntax.CallExpr) bool {
		for _, arg := range call.Args {
			if u, ok := arg.(*syntax.UnaryExpr); ok && u.Op == syntax.STARSTAR {
				return false
			}
			if be, ok := arg.(*syntax.BinaryExpr); ok && be.Op == syntax.EQ && be.X.(*syntax.Ident).Name == "provider" {
				return literal(be.Y) == starlark.None
			}
		}
		return true
	}
	at := func(call *syntax.CallExpr, n eval.Node) {
		// A warning: `aml run` fails there, but `aml test` lends agents
		// a default, and an embedder may set the runtime's defaults.
		d := Diagnostic{Severity: Warning, Code: CodeNoProvider, Message: eval.NoProviderMessage(n), Pos: call.Lparen}
		d.Start, _ = call.Fn.Span()
		_, d.End = call.Span()
		a.report(d)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		bi := a.builtinOf(call)
		if bi == nil || a.bad[call] || !noProvider(call) {
			return true
		}
		switch {
		case bi.Name == "agent" && !agents:
			node := &eval.Agent{}
			for _, arg := range call.Args {
				if be, ok := arg.(*syntax.BinaryExpr); ok && be.Op == syntax.EQ && be.X.(*syntax.Ident).Name == "name" {
					if s, ok := literal(be.Y).(starlark.String); ok {
						node.Name = string(s)
					}
				}
			}
			at(call, node)
		case bi.Name == "workspace" && !workspaces:
			at(call, &eval.Workspace{})
		}
		return true
	})
	if sandboxes {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				walk(x)
			}
		case *eval.Sandbox:
			if call := b.calls[v.Position]; call != nil && !a.bad[call] && noProvider(call) {
				at(call, v)
			}
		default:
			walk(nodeChildren(v))
		}
	}
	for _, r := range roots {
		walk(r)
	}
}

// nodeChildren returns the children of a node of a literal tree (what
// the builder makes), or nil.
func nodeChildren(v any) []any {
	switch v := v.(type) {
	case *eval.Agent:
		return v.Children
	case *eval.System:
		return v.Children
	case *eval.FollowUp:
		return v.Children
	case *eval.Block:
		return v.Children
	case *eval.Fragment:
		return v.Children
	case *eval.Parallel:
		return v.Branches
	case *eval.BudgetScope:
		return v.Children
	case *eval.Workspace:
		return v.Children
	case *eval.Sandbox:
		return v.Children
	case *eval.File:
		return v.Children
	}
	return nil
}

// topConfigure returns the file's first top-level configure() call, or
// nil.
func (a *analyzer) topConfigure(f *syntax.File) *syntax.CallExpr {
	for _, st := range f.Stmts {
		es, ok := st.(*syntax.ExprStmt)
		if !ok {
			continue
		}
		call, ok := es.X.(*syntax.CallExpr)
		if !ok {
			continue
		}
		if b := a.builtinOf(call); b != nil && b.Name == "configure" {
			return call
		}
	}
	return nil
}

// configuredProviders reports which default providers the file's
// top-level configure() sets (any value but a literal None; all of them
// when it spreads **kwargs).
func (a *analyzer) configuredProviders(f *syntax.File) (agents, sandboxes, workspaces bool) {
	if call := a.topConfigure(f); call != nil {
		for _, arg := range call.Args {
			if u, ok := arg.(*syntax.UnaryExpr); ok && u.Op == syntax.STARSTAR {
				return true, true, true
			}
			be, ok := arg.(*syntax.BinaryExpr)
			if !ok || be.Op != syntax.EQ || literal(be.Y) == starlark.None {
				continue
			}
			switch be.X.(*syntax.Ident).Name {
			case "agent_provider":
				agents = true
			case "sandbox_provider":
				sandboxes = true
			case "workspace_provider":
				workspaces = true
			}
		}
	}
	return agents, sandboxes, workspaces
}

// contextFree reports whether a placement error of a node inside an
// agent() holds wherever that agent is placed.
func contextFree(msg string) bool {
	for _, p := range []string{
		"agent() prompt text after the first follow_up()",
		"agent() already has",
		"system() cannot contain",
		"system() is not valid inside follow_up()",
		"follow_up() cannot contain",
		"follow_up() is not valid inside system()",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "which exceeds max_turns_per_agent")
}

// returns calls fn with the value of every return statement of a function
// body (not of functions nested in it).
func returns(body []syntax.Stmt, fn func(syntax.Expr)) {
	for _, st := range body {
		switch st := st.(type) {
		case *syntax.ReturnStmt:
			if st.Result != nil {
				fn(st.Result)
			}
		case *syntax.IfStmt:
			returns(st.True, fn)
			returns(st.False, fn)
		case *syntax.ForStmt:
			returns(st.Body, fn)
		case *syntax.WhileStmt:
			returns(st.Body, fn)
		}
	}
}

// builder turns literal node expressions into evaluator nodes.
type builder struct {
	a *analyzer
	// calls maps the position of each node built to its call.
	calls map[eval.Position]*syntax.CallExpr
	n     int
}

// nodeBuiltins are the builtins whose calls become nodes.
var nodeBuiltins = map[string]bool{
	"agent": true, "system": true, "follow_up": true, "block": true, "fragment": true, "parallel": true,
	"sandbox": true, "workspace": true, "file": true, "script": true, "include": true, "tool": true, "mcp": true,
	"skill": true, "budget": true,
}

// node returns the renderable value of e when it is known statically: a
// string or number, a list, or a node built by a call of a node builtin
// (whose unknown parts are left out). ok is false when nothing is known.
func (b *builder) node(e syntax.Expr) (any, bool) {
	switch e := e.(type) {
	case *syntax.ParenExpr:
		return b.node(e.X)
	case *syntax.ListExpr:
		out := make([]any, 0, len(e.List))
		for _, x := range e.List {
			if v, ok := b.node(x); ok {
				out = append(out, v)
			}
		}
		return out, true
	case *syntax.Literal, *syntax.Ident:
		switch v := literal(e).(type) {
		case starlark.String:
			return string(v), true
		case starlark.Int:
			if i, ok := v.Int64(); ok {
				return i, true
			}
		case starlark.Bool, starlark.NoneType:
			return nil, true
		}
	case *syntax.CallExpr:
		return b.call(e)
	}
	return nil, false
}

func (b *builder) call(call *syntax.CallExpr) (any, bool) {
	bi := b.a.builtinOf(call)
	if bi == nil || !nodeBuiltins[bi.Name] {
		return nil, false
	}
	lp := call.Lparen
	pos := eval.Position{File: b.a.file.Path, Line: lp.Line, Col: lp.Col}
	b.calls[pos] = call
	var kids []any
	kw := map[string]syntax.Expr{}
	for _, arg := range call.Args {
		if be, ok := arg.(*syntax.BinaryExpr); ok && be.Op == syntax.EQ {
			kw[be.X.(*syntax.Ident).Name] = be.Y
			continue
		}
		if u, ok := arg.(*syntax.UnaryExpr); ok && (u.Op == syntax.STAR || u.Op == syntax.STARSTAR) {
			continue
		}
		if v, ok := b.node(arg); ok {
			kids = append(kids, v)
		}
	}
	str := func(name string) (string, bool) {
		if e, ok := kw[name]; ok {
			if s, ok := literal(e).(starlark.String); ok {
				return string(s), true
			}
			return "", false
		}
		return "", true
	}
	b.n++
	placeholder := fmt.Sprintf("\x00static-%d", b.n) // unique: never a duplicate grant
	switch bi.Name {
	case "agent":
		n := &eval.Agent{Children: kids, Position: pos}
		n.Name, _ = str("name") // errors name the agent as the runtime does
		if _, given := kw["cwd"]; given {
			n.Cwd = "."
		}
		if e, given := kw["schema"]; given && literal(e) != starlark.None {
			n.Schema = &eval.Schema{} // only its presence matters to the checks
		}
		return n, true
	case "system":
		return &eval.System{Children: kids, Position: pos}, true
	case "follow_up":
		return &eval.FollowUp{Children: kids, Position: pos}, true
	case "block":
		tag, _ := str("tag")
		return &eval.Block{Children: kids, Tag: tag, Position: pos}, true
	case "fragment":
		return &eval.Fragment{Children: kids, Position: pos}, true
	case "parallel":
		return &eval.Parallel{Branches: kids, Position: pos}, true
	case "budget":
		// Its bounds matter only to a run; one keeps the node valid.
		return &eval.BudgetScope{Children: kids, Budget: eval.Budget{Tokens: 1}, Position: pos}, true
	case "sandbox":
		n := &eval.Sandbox{Children: kids, Position: pos}
		if s, known := str("access"); known {
			n.Access = eval.Access(s)
		} else {
			n.Access = eval.ReadWrite // not known: assume the permissive one
		}
		if !n.Access.Valid() && n.Access != "" {
			n.Access = eval.ReadWrite // reported by the argument check
		}
		return n, true
	case "workspace":
		n := &eval.Workspace{Children: kids, Position: pos}
		if s, known := str("write_concurrency"); known && (s == "" || s == "serial" || s == "parallel") {
			n.WriteConcurrency = s
		}
		return n, true
	case "file":
		return &eval.File{Children: kids, Path: "file", Position: pos}, true
	case "script":
		// The children are source text; a placeholder command keeps the
		// node valid.
		return &eval.Script{Command: "true", Position: pos}, true
	case "include":
		_, path := kw["path"]
		_, src := kw["src"]
		if path == src {
			return nil, false // the builtin itself refuses it
		}
		n := &eval.Include{Position: pos}
		if path {
			n.Path = "file"
		} else {
			n.Src = "file"
		}
		return n, true
	case "tool":
		t, err := eval.NewTool(eval.ToolOptions{Name: placeholder, Description: "static", Execute: func(context.Context, any) (any, error) { return nil, nil }})
		if err != nil {
			return nil, false
		}
		return &eval.ToolGrant{Tool: t, Position: pos}, true
	case "skill":
		return &eval.Skill{Src: "skill", Position: pos}, true
	case "mcp":
		name, known := str("name")
		if !known || name == "" {
			return nil, false // a descriptor (use=) or a computed name
		}
		return &eval.MCPGrant{Name: name, Position: pos}, true
	}
	return nil, false
}

// configured returns the evaluator options that the file's top-level
// configure() sets literally and that the static check depends on: the
// depth and turn limits and the allowed MCP servers.
func (a *analyzer) configured(f *syntax.File) eval.Options {
	var opts eval.Options
	if call := a.topConfigure(f); call != nil {
		var l eval.Limits
		for _, arg := range call.Args {
			be, ok := arg.(*syntax.BinaryExpr)
			if !ok || be.Op != syntax.EQ {
				continue
			}
			v := literal(be.Y)
			set := func(dst *int) {
				if i, ok := v.(starlark.Int); ok {
					if n, ok := i.Int64(); ok && n >= 0 {
						*dst = starlib.SurfaceLimit(int(n))
					}
				}
			}
			switch be.X.(*syntax.Ident).Name {
			case "max_depth":
				set(&l.MaxDepth)
			case "max_turns_per_agent":
				set(&l.MaxTurnsPerAgent)
			case "allowed_mcp_servers":
				if list, ok := v.(*starlark.List); ok {
					names := []string{}
					for i := range list.Len() {
						s, ok := list.Index(i).(starlark.String)
						if !ok {
							names = nil
							break
						}
						names = append(names, string(s))
					}
					opts.AllowedMCPServers = names
				}
			}
		}
		opts.Limits = &l
	}
	return opts
}
