package eval

import (
	"fmt"
	"slices"
	"sync"
)

// checkItem is one pending value of the static check, or (kids non-nil)
// the pending children kids[next:] of one node, visited one by one so that
// a node with a million children does not put a million items on the
// stack.
type checkItem struct {
	v     any
	kids  []any
	next  int
	agent *agentCheck
	// pos is the position of the nearest enclosing node.
	pos   Position
	depth int32
	// lvl is the number of nodes enclosing the value.
	lvl int32
	pl  place
}

// agentCheck is the static state of one agent plan.
type agentCheck struct {
	node      *Agent
	followUps int
	seen      bool
	grants    map[string]bool
}

// check validates the statically visible part of value before anything
// runs: placement, depth, static follow-up rules and renderability. It
// does not descend into components, whose bodies have not run yet; their
// returned values are checked when they return. It walks with an explicit
// stack so arbitrarily deep trees need no Go recursion.
func (d *domain) check(value any, pl place, depth int, pos Position) error {
	return d.checkIn(value, pl, depth, pos, nil)
}

// checkIn is check for a value placed inside an agent plan whose static
// state is ac (nil when unknown or outside an agent).
func (d *domain) checkIn(value any, pl place, depth int, pos Position, ac *agentCheck) error {
	buf := checkBufs.Get().(*checkBuf)
	err := d.checkWith(buf, value, pl, depth, pos, ac)
	buf.put()
	return err
}

// checkBuf holds the stacks of one check, pooled: checks run for every
// evaluate() and evaluate_all() value.
type checkBuf struct {
	stack []checkItem
	path  []Node
}

var checkBufs = sync.Pool{New: func() any { return &checkBuf{stack: make([]checkItem, 0, 16), path: make([]Node, 0, 16)} }}

// put clears the buffers (they must keep no tree alive) and returns them
// to the pool; very large ones are dropped.
func (b *checkBuf) put() {
	if cap(b.stack) > 4096 || cap(b.path) > 4096 {
		return
	}
	clear(b.stack[:cap(b.stack)])
	clear(b.path[:cap(b.path)])
	b.stack, b.path = b.stack[:0], b.path[:0]
	checkBufs.Put(b)
}

func (d *domain) checkWith(buf *checkBuf, value any, pl place, depth int, pos Position, ac *agentCheck) error {
	maxDepth := d.limits.MaxDepth
	maxTurns := d.limits.MaxTurnsPerAgent
	stack := append(buf.stack, checkItem{v: value, pl: pl, depth: int32(depth), pos: pos, agent: ac})
	// lvl is the node level of the children pushed next; path holds the
	// nodes enclosing the current one, to find a node that contains itself.
	lvl := 0
	path := buf.path
	defer func() { buf.stack, buf.path = stack, path }()
	pushKids := func(kids []any, pl place, depth int, ac *agentCheck, pos Position) {
		if len(kids) > 0 {
			stack = append(stack, checkItem{kids: kids, pl: pl, depth: int32(depth), agent: ac, pos: pos, lvl: int32(lvl)})
		}
	}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		if it.kids != nil {
			top := &stack[len(stack)-1]
			it.v, it.kids = top.kids[top.next], nil
			if top.next++; top.next == len(top.kids) {
				stack = stack[:len(stack)-1]
			}
		} else {
			stack = stack[:len(stack)-1]
		}
		lvl = int(it.lvl)
		switch v := it.v.(type) {
		case string:
			if it.agent != nil && it.agent.seen && !it.pl.inFollowUp && !it.pl.inSystem && !isBlank(v) {
				return textAfterFollowUpError(it.pos)
			}
		case []any:
			pushKids(v, it.pl, int(it.depth), it.agent, it.pos)
			lvl = int(it.lvl)
		case []string:
			for i := len(v) - 1; i >= 0; i-- {
				stack = append(stack, checkItem{v: v[i], pl: it.pl, depth: it.depth, agent: it.agent, pos: it.pos, lvl: it.lvl})
			}
		case Node:
			if v == nil {
				continue
			}
			path = append(path[:it.lvl], v)
			if err := checkNodeCycle(path); err != nil {
				return err
			}
			lvl = int(it.lvl) + 1
			depth := int(it.depth)
			if countsDepth(v) {
				depth++
				if maxDepth > 0 && depth > maxDepth {
					return depthError(v.Pos(), maxDepth)
				}
			}
			cpl, err := childPlace(v, it.pl)
			if err != nil {
				return err
			}
			ac := it.agent
			promptPos := ac != nil && !it.pl.inFollowUp && !it.pl.inSystem
			switch n := v.(type) {
			case *Agent:
				if promptPos && ac.seen {
					return textAfterFollowUpError(n.Position)
				}
				nac := &agentCheck{node: n}
				// The marker sits below the children, so it is popped after
				// all of them were visited.
				if maxTurns > 0 {
					stack = append(stack, checkItem{v: turnsMarker{nac}})
				}
				pushKids(n.Children, cpl, depth, nac, n.Position)
			case *System:
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *FollowUp:
				if ac != nil {
					ac.followUps++
					ac.seen = true
				}
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *Block:
				if promptPos && ac.seen && blockHasText(n) {
					return textAfterFollowUpError(n.Position)
				}
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *Fragment:
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *Provide:
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *Workspace:
				if err := n.Validate(); err != nil {
					return newError(n.Position, "workspace(): "+err.Error())
				}
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *Sandbox:
				pushKids(n.Children, cpl, depth, ac, n.Position)
			case *Script:
				if promptPos && ac.seen {
					return textAfterFollowUpError(n.Position)
				}
				// The children are the script's source, not prompt text.
				pushKids(n.Children, cpl.scopes(), depth, nil, n.Position)
			case *File:
				pushKids(n.Children, cpl.scopes(), depth, nil, n.Position)
			case *Parallel:
				if promptPos && ac.seen {
					return textAfterFollowUpError(n.Position)
				}
				pushKids(n.Branches, cpl, depth, nil, n.Position)
			case *BudgetScope:
				if err := n.Budget.Validate(); err != nil {
					return newError(n.Position, "budget(): "+err.Error())
				}
				pushKids(n.Children, cpl, depth, nil, n.Position)
			case *ToolGrant, *MCPGrant:
				if ac != nil {
					if ac.grants == nil {
						ac.grants = map[string]bool{}
					}
					if err := d.checkGrant(n, ac.grants); err != nil {
						return err
					}
				}
			case *Component:
				// Checked when its body returns.
			default:
				_ = n
			}
		case turnsMarker:
			if turns := v.ac.followUps + 1; maxTurns > 0 && turns > maxTurns {
				return turnsError(v.ac.node, turns, maxTurns)
			}
		default:
			text, ok := scalarText(v)
			if !ok {
				return unrenderable(v, it.pos)
			}
			if it.agent != nil && it.agent.seen && !it.pl.inFollowUp && !it.pl.inSystem && !isBlank(text) {
				return textAfterFollowUpError(it.pos)
			}
		}
	}
	return nil
}

// checkNodeCycle reports a node tree built in Go that contains its own
// node (Starlark builds trees bottom-up, so there a cycle can only pass
// through a component, which enterComponent finds). path is the current
// node and the nodes enclosing it. Only at levels that are powers of two
// is the upper half of the path searched for the current node, which
// finds every cycle by twice its depth at O(1) amortized cost per node.
func checkNodeCycle(path []Node) error {
	n := len(path)
	if n < 64 || n&(n-1) != 0 {
		return nil
	}
	cur := path[n-1]
	for i := n / 2; i < n-1; i++ {
		if sameNode(path[i], cur) {
			return newError(cur.Pos(), fmt.Sprintf("cycle: %s() contains itself (%d levels down), so its evaluation would never end; a node tree must not contain its own node", cur.Kind(), n-1-i))
		}
	}
	return nil
}

// sameNode compares node identities; a Node of a non-comparable type
// (which the evaluator rejects later as an unknown kind) is never the same.
func sameNode(a, b Node) bool { return sameValue(a, b) }

// sameValue compares interface values without panicking on
// non-comparable dynamic types, which are never the same.
func sameValue(a, b any) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// turnsMarker is pushed below an agent's children so the agent's static
// follow-up count is checked once they were all visited.
type turnsMarker struct{ ac *agentCheck }

func blockHasText(b *Block) bool {
	if normalizeTag(b.Tag) != "" && !blockIsEmpty(b) {
		return true
	}
	for _, c := range b.Children {
		if s, ok := c.(string); ok && !isBlank(s) {
			return true
		}
	}
	return false
}

const (
	structuredSecondMsg = "evaluate(schema=...) must resolve to exactly one agent(), but this is a second one; collect several results with evaluate_all([...], schema=S)"
	twoSchemaOwnersMsg  = "agent(schema=...) cannot also be collected by evaluate(..., schema=...): one agent has one schema owner; drop one of the two schemas"
)

func structuredTextError(pos Position) error {
	return newError(pos, "evaluate(schema=...) collects exactly one agent() result, so text outside that agent is not allowed; move the text into the agent's prompt or evaluate without schema=")
}

func structuredParallelError(pos Position) error {
	return newError(pos, "evaluate(schema=...) cannot collect a parallel(): it is a text-composition boundary; collect typed branch results with evaluate_all([...], schema=S)")
}

// claimStructured makes n the agent whose result evaluate(schema=...)
// collects, rejecting a second candidate and a second schema owner.
func claimStructured(t *structTarget, n *Agent) error {
	if n.Schema != nil {
		return newError(n.Position, twoSchemaOwnersMsg)
	}
	if t.claimed {
		return newError(n.Position, structuredSecondMsg)
	}
	t.claimed = true
	return nil
}

// CheckStructured applies the rules of evaluate(value, schema=...) that
// hold before anything resolves (pos is the evaluate() call's): at most
// one agent(), without a schema of its own, no text around it, no
// parallel(). The evaluator applies them to every structured evaluation;
// the static analysis applies them to a literal value.
func CheckStructured(value any, pos Position) error { return scanStructured(value, pos) }

// scanStructured applies the structured-evaluation rules to the statically
// visible top level of value: at most one agent(), no text around it, no
// parallel(). Components are skipped; their results are checked when they
// return.
func scanStructured(value any, pos Position) error {
	type item struct {
		v   any
		pos Position
	}
	stack := []item{{value, pos}}
	agents := 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		push := func(kids []any, pos Position) {
			for i := len(kids) - 1; i >= 0; i-- {
				stack = append(stack, item{kids[i], pos})
			}
		}
		switch v := it.v.(type) {
		case []any:
			push(v, it.pos)
		case *Fragment:
			push(v.Children, v.Position)
		case *Provide:
			push(v.Children, v.Position)
		case *Workspace:
			push(v.Children, v.Position)
		case *Sandbox:
			push(v.Children, v.Position)
		case *Script:
			return structuredTextError(v.Position)
		case *Block:
			if normalizeTag(v.Tag) != "" && !blockIsEmpty(v) {
				return structuredTextError(v.Position)
			}
			push(v.Children, v.Position)
		case *Agent:
			if v.Schema != nil {
				return newError(v.Position, twoSchemaOwnersMsg)
			}
			if agents++; agents > 1 {
				return newError(v.Position, structuredSecondMsg)
			}
		case *Parallel:
			return structuredParallelError(v.Position)
		case *BudgetScope:
			return newError(v.Position, "budget() cannot hold the agent whose structured result evaluate(schema=...) collects; put the budget() around the evaluate() call's component, or give the agent budget = {...}")
		case Node:
			// Components resolve later; system()/follow_up() here are
			// placement errors reported by check.
		case []string:
			for _, s := range v {
				if !isBlank(s) {
					return structuredTextError(it.pos)
				}
			}
		default:
			if text, ok := scalarText(v); ok && !isBlank(text) {
				return structuredTextError(it.pos)
			}
		}
	}
	return nil
}

// checkGrant enforces unique names per agent and the allow-lists for a
// tool() or mcp() grant; seen holds the agent's grants so far, keyed by
// kind and name.
func (d *domain) checkGrant(n Node, seen map[string]bool) error {
	var kind, name string
	var allowed []string
	var option string
	switch g := n.(type) {
	case *ToolGrant:
		kind, name, allowed, option = "tool", g.Tool.Name(), d.rt.opts.AllowedTools, "allowed_tools"
	case *MCPGrant:
		kind, name, allowed, option = "mcp", g.GrantName(), d.rt.opts.AllowedMCPServers, "allowed_mcp_servers"
	default:
		return nil
	}
	key := kind + "\x00" + name
	if seen[key] {
		article := "a"
		if kind == "mcp" {
			article = "an"
		}
		return newError(n.Pos(), fmt.Sprintf("agent() already has %s %s() named %q; %s names must be unique within one agent", article, kind, name, kind))
	}
	seen[key] = true
	if allowed != nil && !slices.Contains(allowed, name) {
		return newError(n.Pos(), fmt.Sprintf("%s %q is not allowed: it is missing from %s %v; add it to configure(%s=[...]) or the runtime's options", kind, name, option, allowed, option))
	}
	return nil
}
