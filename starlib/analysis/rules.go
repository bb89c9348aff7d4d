package analysis

import (
	"errors"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/eval"
)

// checkTopLevel reports the calls of builtins that need an active
// component (evaluate(), use_context(), ...) which a module's top level
// always makes when it loads, with the builtin's own error. Calls in
// functions, lambdas, comprehensions, conditional branches and the right
// operand of and/or may never run, so they are not reported.
func (a *analyzer) checkTopLevel(f *syntax.File) {
	var visit func(e syntax.Expr)
	visit = func(e syntax.Expr) {
		switch e := e.(type) {
		case *syntax.CallExpr:
			visit(e.Fn)
			for _, arg := range e.Args {
				visit(arg)
			}
			if b := a.builtinOf(e); b != nil && b.OutsideComponent != "" {
				d := Diagnostic{Code: CodeOutsideComponent, Message: b.OutsideComponent, Pos: e.Lparen}
				d.Start, _ = e.Fn.Span()
				_, d.End = e.Span()
				a.report(d)
			}
		case *syntax.ParenExpr:
			visit(e.X)
		case *syntax.ListExpr:
			for _, x := range e.List {
				visit(x)
			}
		case *syntax.TupleExpr:
			for _, x := range e.List {
				visit(x)
			}
		case *syntax.DictExpr:
			for _, x := range e.List {
				if kv, ok := x.(*syntax.DictEntry); ok {
					visit(kv.Key)
					visit(kv.Value)
				}
			}
		case *syntax.BinaryExpr:
			visit(e.X)
			if e.Op != syntax.AND && e.Op != syntax.OR {
				visit(e.Y)
			}
		case *syntax.UnaryExpr:
			visit(e.X)
		case *syntax.DotExpr:
			visit(e.X)
		case *syntax.IndexExpr:
			visit(e.X)
			visit(e.Y)
		case *syntax.CondExpr:
			visit(e.Cond)
		}
	}
	for _, st := range f.Stmts {
		switch st := st.(type) {
		case *syntax.ExprStmt:
			visit(st.X)
		case *syntax.AssignStmt:
			visit(st.RHS)
		}
	}
}

// checkStructured applies the evaluator's rules of evaluate(value,
// schema=...) (eval.CheckStructured) to each such call whose value is
// literal, with the message and position a run reports.
func (a *analyzer) checkStructured(f *syntax.File) {
	b := &builder{a: a, calls: map[eval.Position]*syntax.CallExpr{}}
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		if bi := a.builtinOf(call); bi == nil || bi.Name != "evaluate" || a.bad[call] {
			return true
		}
		var value, schema syntax.Expr
		for i, arg := range call.Args {
			switch arg := arg.(type) {
			case *syntax.BinaryExpr:
				if arg.Op == syntax.EQ {
					switch arg.X.(*syntax.Ident).Name {
					case "value":
						value = arg.Y
					case "schema":
						schema = arg.Y
					}
					continue
				}
			case *syntax.UnaryExpr:
				if arg.Op == syntax.STAR || arg.Op == syntax.STARSTAR {
					return true // the arguments are not known
				}
			}
			switch i {
			case 0:
				value = arg
			case 1:
				schema = arg
			}
		}
		if value == nil || schema == nil || literal(schema) == starlark.None {
			return true
		}
		v, ok := b.node(value)
		if !ok {
			return true
		}
		pos := eval.Position{File: a.file.Path, Line: call.Lparen.Line, Col: call.Lparen.Col}
		b.calls[pos] = call
		var ee *eval.EvaluationError
		if err := eval.CheckStructured(v, pos); errors.As(err, &ee) {
			at := b.calls[ee.Pos]
			if at == nil {
				return true
			}
			d := Diagnostic{Code: CodeStructured, Message: ee.Msg, Pos: at.Lparen}
			d.Start, _ = at.Fn.Span()
			_, d.End = at.Span()
			a.report(d)
		}
		return true
	})
}

// checkWorkspaces reports every workspace() of the entry's literal tree
// after the first, in the order a run reaches them, with the
// evaluator's message: one workspace() runs per evaluation. Workspaces
// below a parallel() start in an order only the run knows, so a tree
// that has one there is not reported.
func (a *analyzer) checkWorkspaces(b *builder, roots []any) {
	var found []*eval.Workspace
	concurrent := false
	var walk func(v any, inParallel bool)
	walk = func(v any, inParallel bool) {
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				walk(x, inParallel)
			}
		case *eval.Workspace:
			// One inside it is the placement check's finding.
			found = append(found, v)
			concurrent = concurrent || inParallel
		case *eval.Parallel:
			walk(v.Branches, true)
		default:
			walk(nodeChildren(v), inParallel)
		}
	}
	for _, r := range roots {
		found, concurrent = nil, false
		walk(r, false)
		if concurrent {
			continue
		}
		for _, w := range found[min(1, len(found)):] {
			call := b.calls[w.Position]
			if call == nil {
				continue
			}
			d := Diagnostic{Code: CodePlacement, Message: eval.OneWorkspaceMessage, Pos: call.Lparen}
			d.Start, _ = call.Fn.Span()
			_, d.End = call.Span()
			a.report(d)
		}
	}
}

// checkFollowUps reports a follow_up() whose children are all literal
// text (strings, None, booleans) that is blank: its turn would be empty,
// which the evaluator refuses with the same message.
func (a *analyzer) checkFollowUps(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		if bi := a.builtinOf(call); bi == nil || bi.Name != "follow_up" || a.bad[call] {
			return true
		}
		text := ""
		for _, arg := range call.Args {
			switch v := literal(arg).(type) {
			case starlark.String:
				text += string(v)
			case starlark.NoneType, starlark.Bool:
			default:
				return true // not known, or not text
			}
		}
		if strings.TrimSpace(text) == "" {
			d := Diagnostic{Code: CodePlacement, Message: eval.EmptyFollowUpMessage, Pos: call.Lparen}
			d.Start, _ = call.Fn.Span()
			_, d.End = call.Span()
			a.report(d)
		}
		return true
	})
}
