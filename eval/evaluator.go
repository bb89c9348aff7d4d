package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
)

type frameKind uint8

const (
	// fList iterates a list transparently.
	fList frameKind = iota
	// fRoot collects the text of one evaluation.
	fRoot
	// fAgent collects an agent's prompt, then runs its session.
	fAgent
	// fSystem collects system text for the nearest agent.
	fSystem
	// fFollowUp collects one follow-up turn for the nearest agent.
	fFollowUp
	// fBlock is transparent and writes its closing separator when done.
	fBlock
	// fComponent is transparent and closes its trace span when done.
	fComponent
	// fWorkspace and fSandbox are transparent lexical scopes that release
	// their resources when done.
	fWorkspace
	fSandbox
	// fScript collects a script's source, then runs it.
	fScript
	// fFile collects a file's content, then writes it.
	fFile
)

// frame is one entry of the explicit evaluation stack. Fields are ordered
// and sized to keep the frame small: deep trees hold one frame per level.
type frame struct {
	items []any
	node  Node
	// pos is the position of the nearest authored node.
	pos Position
	buf []byte
	// plan collects the agent-scoped parts of an agent frame.
	plan *agentPlan
	span *span
	// parentSpan is the innermost open span around this frame.
	parentSpan string
	// ctx is the chain of provided context values around this frame.
	ctx *binding
	// comps is the chain of components whose values enclose this frame.
	comps *compLink
	// path is the sequential context of a journaled evaluation, else nil.
	path *effectPath
	// res is the resource scope around this frame's children; ws and sb
	// are the resources this frame owns and must release.
	res resScope
	ws  *wsState
	sb  *sbView
	// suffix is written to the sink when a block frame completes.
	suffix string
	idx    int32
	depth  int32
	// sink is the index of the collecting frame that receives text
	// written inside this frame.
	sink int32
	// out is the index of the collecting frame that receives this frame's
	// own result (collecting frames only).
	out int32
	// agent is the index of the nearest agent frame, or -1.
	agent int32
	kind  frameKind
	pl    place
}

// agentPlan collects the agent-scoped parts of one agent() while its
// children resolve.
type agentPlan struct {
	system    []string
	followUps []string
	followed  bool
	tools     []*ToolGrant
	mcp       []*MCPGrant
	skills    []AgentSkill
	grants    map[string]bool
	// target is set when this agent's structured result is collected by
	// evaluate(schema=...).
	target *structTarget
	// staging is the agent's private directory for oversized includes
	// and skills; nil until first used.
	staging *staging
	// sb is the sandbox view the agent runs in, or nil; ws is the
	// workspace around it, or nil.
	sb *sbView
	ws *wsState
	// host is Options.Host, which may make host staging directories.
	host SandboxProvider
	// gate serializes the creation of a sandbox staging when the
	// evaluation has an Executor (see staging.root).
	gate Semaphore
}

// evaluator runs one frame loop on the calling goroutine.
type evaluator struct {
	d   *domain
	ctx context.Context
	sc  scope
	st  *evalStack
}

// evaluate resolves value in scope sc on the calling goroutine. The
// statically visible part of value is validated first, so authoring
// mistakes fail before any provider runs.
func (d *domain) evaluate(ctx context.Context, value any, sc scope) (string, error) {
	if err := d.check(value, scopePlace(sc.res), sc.depth, Position{}); err != nil {
		return "", err
	}
	return d.evaluateUnchecked(ctx, value, sc)
}

// evaluateUnchecked is evaluate for a value already checked as part of
// the tree that holds it.
func (d *domain) evaluateUnchecked(ctx context.Context, value any, sc scope) (string, error) {
	e := evaluator{d: d, ctx: ctx, sc: sc}
	return e.run(value)
}

// evaluateStructured resolves value, which must resolve to exactly one
// agent() and no other text, and returns that agent's validated
// structured result.
func (d *domain) evaluateStructured(ctx context.Context, value any, sc scope, schema *Schema, pos Position) (any, error) {
	if err := d.check(value, scopePlace(sc.res), sc.depth, pos); err != nil {
		return nil, err
	}
	if err := scanStructured(value, pos); err != nil {
		return nil, err
	}
	t := &structTarget{schema: schema}
	sc.target = t
	e := evaluator{d: d, ctx: ctx, sc: sc}
	if _, err := e.run(value); err != nil {
		return nil, err
	}
	if !t.claimed {
		return nil, newError(pos, structuredNoneMsg)
	}
	return t.value, nil
}

// EmptyFollowUpMessage is the error of a follow_up() whose children
// resolve to blank text.
const EmptyFollowUpMessage = "follow_up() must resolve to non-empty text"

const structuredNoneMsg = "evaluate(schema=...) must resolve to exactly one agent(), but the value resolved none; pass the agent() whose structured result you want"

func (e *evaluator) run(value any) (text string, err error) {
	stk := getStack()
	e.st = stk
	// Registered first, so it runs after unwind below is done with the stack.
	defer func() { putStack(stk); e.st = nil }()
	stk.root[0] = value
	e.push(frame{kind: fRoot, items: stk.root[:], depth: int32(e.sc.depth), sink: 0, out: -1, agent: -1, parentSpan: e.sc.span, ctx: e.sc.ctx, comps: e.sc.comps, path: e.sc.path, res: e.sc.res, pl: scopePlace(e.sc.res)})
	defer func() {
		if r := recover(); r != nil {
			var pos Position
			if e.st.n > 0 {
				pos = e.top().pos
			}
			err = newError(pos, "internal evaluator failure: "+panicText(r))
		}
		if err != nil {
			err = e.unwind(err)
		}
	}()
	done := e.ctx.Done()
	for {
		f := e.top()
		if int(f.idx) < len(f.items) {
			item := f.items[f.idx]
			f.idx++
			if done != nil {
				select {
				case <-done:
					return "", canceled(e.ctx, f.pos)
				default:
				}
			}
			if err := e.visit(item); err != nil {
				return "", err
			}
			continue
		}
		if e.st.n == 1 {
			return string(f.buf), nil
		}
		if err := e.pop(); err != nil {
			return "", err
		}
	}
}

func (e *evaluator) top() *frame { return e.st.at(e.st.n - 1) }

// write appends text to the sink of the top frame.
func (e *evaluator) write(s string, pos Position) error {
	if s == "" {
		return nil
	}
	w := e.st.at(e.top().sink)
	if w.kind == fAgent && w.plan.followed && !isBlank(s) {
		return textAfterFollowUpError(pos)
	}
	if w.kind == fRoot && e.sc.target != nil && !isBlank(s) {
		return structuredTextError(pos)
	}
	w.buf = append(w.buf, s...)
	return nil
}

// visit handles one child value of the top frame.
func (e *evaluator) visit(item any) error {
	f := e.top()
	switch v := item.(type) {
	case string:
		return e.write(v, f.pos)
	case nil, bool:
		return nil
	case []any:
		if len(v) == 0 {
			return nil
		}
		if f.kind == fList && int(f.idx) == len(f.items) {
			// The list is the last item of a list frame, which has nothing
			// to do when it completes: reuse the frame, so that a deeply
			// nested list needs one frame, not one per level.
			f.items, f.idx = v, 0
			return nil
		}
		e.push(frame{kind: fList, items: v, depth: f.depth, pl: f.pl, sink: f.sink, agent: f.agent, pos: f.pos, parentSpan: e.spanParent(), ctx: f.ctx, comps: f.comps, path: f.path, res: f.res})
		return nil
	case []string:
		for _, s := range v {
			if err := e.write(s, f.pos); err != nil {
				return err
			}
		}
		return nil
	case Node:
		return e.enter(v)
	}
	if s, ok := scalarText(item); ok {
		return e.write(s, f.pos)
	}
	return unrenderable(item, f.pos)
}

// evalStack is a pooled frame stack, with the root frame's item list.
// Frames live in chunks that never move: a deep tree grows the stack by
// whole chunks instead of copying every frame at each doubling, and a
// *frame stays valid while the stack grows.
type evalStack struct {
	first  [firstFrames]frame
	chunks [][]frame // chunks[k] holds frames firstFrames+k*chunkFrames...
	n      int32
	root   [1]any
}

const (
	firstFrames = 16
	chunkFrames = 1024
)

// at returns frame i (i < n, or i == n to fill it).
func (s *evalStack) at(i int32) *frame {
	if i < firstFrames {
		return &s.first[i]
	}
	j := i - firstFrames
	return &s.chunks[j/chunkFrames][j%chunkFrames]
}

// stackPool recycles frame stacks: nested evaluations (evaluate(),
// parallel branches) are frequent and most are shallow.
var stackPool = sync.Pool{New: func() any { return new(evalStack) }}

func getStack() *evalStack { return stackPool.Get().(*evalStack) }

// putStack clears the frames still on s and returns it to the pool, so
// pooled stacks keep no evaluation data alive (pop and unwind zero every
// frame they remove). The chunks of deep trees are dropped rather than
// pinned.
func putStack(s *evalStack) {
	s.root[0] = nil
	for i := int32(0); i < s.n; i++ { // the root frame, or frames left by a panic
		*s.at(i) = frame{}
	}
	s.n = 0
	if len(s.chunks) > 1 {
		clear(s.chunks[1:])
		s.chunks = s.chunks[:1]
	}
	stackPool.Put(s)
}

// push adds a frame.
func (e *evaluator) push(f frame) {
	s := e.st
	if s.n >= firstFrames && (s.n-firstFrames)/chunkFrames == int32(len(s.chunks)) {
		s.chunks = append(s.chunks, make([]frame, chunkFrames))
	}
	*s.at(s.n) = f
	s.n++
}

// pop removes the top frame and returns it; the slot is cleared.
func (s *evalStack) pop() frame {
	s.n--
	p := s.at(s.n)
	f := *p
	*p = frame{}
	return f
}

// enter pushes the frame of node n. Placement and depth were validated by
// check before the value entered the loop.
func (e *evaluator) enter(n Node) error {
	parentIdx := e.st.n - 1
	p := e.st.at(parentIdx)
	depth := int(p.depth)
	if countsDepth(n) {
		depth++
	}
	pl, err := childPlace(n, p.pl)
	if err != nil {
		return err
	}
	base := frame{depth: int32(depth), pl: pl, sink: p.sink, agent: p.agent, pos: n.Pos(), node: n, parentSpan: e.spanParent(), ctx: p.ctx, comps: p.comps, path: p.path, res: p.res}
	switch n := n.(type) {
	case *Agent:
		base.kind = fAgent
		base.items = n.Children
		base.out = p.sink
		base.sink = e.st.n
		base.agent = e.st.n
		base.plan = &agentPlan{sb: p.res.sb, ws: p.res.ws, host: e.d.rt.opts.Host}
		if p.res.sb != nil && e.d.exec != nil {
			base.plan.gate = e.d.exec.NewSemaphore(e.ctx, 1)
		}
		if t := e.sc.target; t != nil && p.sink == 0 {
			// This agent's result is what evaluate(schema=...) collects.
			if err := claimStructured(t, n); err != nil {
				return err
			}
			base.plan.target = t
		}
		e.push(base)
	case *System:
		base.kind = fSystem
		base.items = n.Children
		base.out = p.sink
		base.sink = e.st.n
		base.span = e.d.trace.startSpan(e.spanParent(), "system", "System", n.Position, nil, nil)
		e.push(base)
	case *FollowUp:
		e.st.at(p.agent).plan.followed = true
		base.kind = fFollowUp
		base.items = n.Children
		base.out = p.sink
		base.sink = e.st.n
		e.push(base)
	case *ToolGrant:
		a := e.st.at(p.agent).plan
		if err := e.d.grant(a, n); err != nil {
			return err
		}
		a.tools = append(a.tools, n)
	case *MCPGrant:
		a := e.st.at(p.agent).plan
		if err := e.d.grant(a, n); err != nil {
			return err
		}
		a.mcp = append(a.mcp, n)
	case *Skill:
		a := e.st.at(p.agent).plan
		sk, err := e.d.stageSkill(e.ctx, n, a)
		if err != nil {
			return err
		}
		for _, prev := range a.skills {
			if prev.Name == sk.Name {
				return newError(n.Position, fmt.Sprintf("agent() already has a skill() named %q; skill names must be unique within one agent", sk.Name))
			}
		}
		a.skills = append(a.skills, sk)
	case *Workspace:
		ws, err := e.d.enterWorkspace(e.ctx, n, e.spanParent(), p.path)
		if err != nil {
			return err
		}
		base.kind = fWorkspace
		base.items = n.Children
		base.ws = ws
		base.res = resScope{ws: ws}
		base.span = ws.span
		e.push(base)
	case *Sandbox:
		sb, err := e.d.enterSandbox(e.ctx, n, p.res, e.spanParent(), p.path)
		if err != nil {
			return err
		}
		base.kind = fSandbox
		base.items = n.Children
		base.sb = sb
		base.res = resScope{ws: p.res.ws, sb: sb}
		base.span = sb.span
		e.push(base)
	case *Script:
		base.kind = fScript
		base.items = n.Children
		base.out = p.sink
		base.sink = e.st.n
		base.agent = -1
		e.push(base)
	case *File:
		if n.Src != "" && len(n.Children) > 0 {
			return newError(n.Position, "file() takes either children or src=, not both")
		}
		base.kind = fFile
		base.items = n.Children
		base.sink = e.st.n
		base.agent = -1
		e.push(base)
	case *Include:
		var (
			plan  *agentPlan
			agent *Agent
		)
		if p.agent >= 0 {
			plan, agent = e.st.at(p.agent).plan, e.st.at(p.agent).node.(*Agent)
		}
		text, err := e.d.include(e.ctx, n, plan, agent, p.res, p.path)
		if err != nil {
			return err
		}
		return e.write(text, n.Position)
	case *Block:
		if blockIsEmpty(n) {
			return e.write("\n\n", n.Position)
		}
		open, close := blockDelimiters(n.Tag)
		if err := e.write(open, n.Position); err != nil {
			return err
		}
		base.kind = fBlock
		base.items = n.Children
		base.suffix = close
		e.push(base)
	case *Fragment:
		base.kind = fList
		base.items = n.Children
		e.push(base)
	case *Provide:
		base.kind = fList
		base.items = n.Children
		base.ctx = &binding{key: n.Key, value: n.Value, parent: p.ctx}
		e.push(base)
	case *Parallel:
		if e.sc.target != nil && p.sink == 0 {
			return structuredParallelError(n.Position)
		}
		text, err := e.parallel(n, depth)
		if err != nil {
			return err
		}
		return e.write(text, n.Position)
	case *BudgetScope:
		if e.sc.target != nil && p.sink == 0 {
			return newError(n.Position, "budget() cannot hold the agent whose structured result evaluate(schema=...) collects; give the agent budget = {...} instead")
		}
		text, err := e.budgetScope(n, depth)
		if err != nil {
			return err
		}
		return e.write(text, n.Position)
	case *Component:
		return e.component(n, base)
	default:
		return newError(n.Pos(), fmt.Sprintf("unknown node kind %q", n.Kind()))
	}
	return nil
}

// spanParent returns the innermost open span around the top frame.
func (e *evaluator) spanParent() string {
	f := e.top()
	if id := f.span.ID(); id != "" {
		return id
	}
	return f.parentSpan
}

// component runs a component body and pushes the value it returned.
func (e *evaluator) component(n *Component, base frame) error {
	link, err := enterComponent(base.comps, n)
	if err != nil {
		return err
	}
	base.kind = fComponent
	base.comps = link
	base.path = base.path.child("c")
	base.span = e.d.trace.startSpan(e.spanParent(), "component", n.Name, n.Position, nil, nil)
	sc := scope{depth: int(base.depth), span: base.span.ID(), ctx: base.ctx, comps: link, path: base.path, res: base.res}
	if sc.span == "" {
		sc.span = e.spanParent()
	}
	v, err := e.d.runComponent(e.ctx, n, sc)
	if err == nil {
		// The returned value lands at the component's position: if that is
		// an agent's prompt after its first follow_up(), prompt text and
		// child agents there are rejected before any of them runs.
		var after *agentCheck
		if base.agent >= 0 && !base.pl.inFollowUp && !base.pl.inSystem {
			if a := e.st.at(base.agent); a.plan.followed {
				after = &agentCheck{node: a.node.(*Agent), seen: true}
			}
		}
		if e.sc.target != nil && base.sink == 0 {
			err = scanStructured(v, n.Position)
		}
		if err == nil {
			err = e.d.checkIn(v, base.pl, int(base.depth), n.Position, after)
		}
	}
	if err != nil {
		link.leave()
		base.span.end(err, nil, nil)
		return err
	}
	base.items = []any{v}
	e.push(base)
	return nil
}

// pop completes the top frame and delivers its result.
func (e *evaluator) pop() error {
	f := e.st.pop()
	switch f.kind {
	case fList:
		return nil
	case fBlock:
		return e.write(f.suffix, f.pos)
	case fComponent:
		f.comps.leave()
		f.span.end(nil, nil, nil)
		f.path.finish()
		return nil
	case fWorkspace:
		return e.d.leaveWorkspace(e.ctx, f.ws, false)
	case fSandbox:
		return f.sb.leave(e.ctx, nil)
	case fScript:
		out, err := e.d.runScript(e.ctx, f.node.(*Script), f.buf, f.res, f.parentSpan, f.path)
		if err != nil {
			return err
		}
		return e.write(out, f.pos)
	case fFile:
		return e.d.writeFileNode(e.ctx, f.node.(*File), f.buf, f.res, f.parentSpan)
	case fSystem:
		f.span.end(nil, nil, nil)
		if s := trimSpace(string(f.buf)); s != "" {
			a := e.st.at(f.agent)
			a.plan.system = append(a.plan.system, s)
		}
		return nil
	case fFollowUp:
		s := trimSpace(string(f.buf))
		if s == "" {
			return newError(f.pos, EmptyFollowUpMessage)
		}
		a := e.st.at(f.agent)
		a.plan.followUps = append(a.plan.followUps, s)
		return nil
	case fAgent:
		n := f.node.(*Agent)
		// The result is appended straight into the consumer's buffer (a
		// collected structured result appends nothing).
		w := e.st.at(f.out)
		start := len(w.buf)
		buf, err := e.d.runAgent(e.ctx, n, f.plan, f.buf, e.spanParent(), w.buf, f.path)
		w.buf = buf
		if err != nil {
			return err
		}
		if w.kind == fAgent && w.plan.followed && len(bytes.TrimSpace(w.buf[start:])) > 0 {
			w.buf = w.buf[:start]
			return textAfterFollowUpError(n.Position)
		}
		return nil
	}
	return nil
}

// unwind closes the spans and releases the agent staging areas of every
// frame still on the stack after err; release failures join err.
func (e *evaluator) unwind(err error) error {
	for i := e.st.n - 1; i >= 0; i-- {
		f := e.st.at(i)
		switch {
		case f.kind == fWorkspace:
			if rerr := e.d.leaveWorkspace(e.ctx, f.ws, true); rerr != nil {
				err = errors.Join(err, rerr)
			}
		case f.kind == fSandbox:
			if rerr := f.sb.leave(e.ctx, err); rerr != nil {
				err = errors.Join(err, rerr)
			}
		case f.span.ID() != "":
			f.span.end(err, nil, nil)
		}
		if f.kind == fComponent {
			f.comps.leave()
		}
		if f.plan != nil {
			if rerr := f.plan.staging.release(e.ctx); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}
	for i := e.st.n - 1; i >= 0; i-- {
		*e.st.at(i) = frame{}
	}
	e.st.n = 0
	return err
}

// parallel evaluates the branches of n concurrently and returns their text
// in authored order.
func (e *evaluator) parallel(n *Parallel, depth int) (string, error) {
	sp := e.d.trace.startSpan(e.spanParent(), "component", "Parallel", n.Position, nil, nil)
	branches := flattenBranches(n.Branches)
	sc := scope{depth: depth, span: sp.ID(), ctx: e.top().ctx, comps: e.top().comps, path: e.top().path.child("p"), res: e.top().res}
	if sc.span == "" {
		sc.span = e.spanParent()
	}
	texts, err := e.d.evaluateAll(e.ctx, branches, sc, n.Position, true)
	if err != nil {
		sp.end(err, nil, nil)
		return "", err
	}
	sp.end(nil, nil, nil)
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	buf := make([]byte, 0, size)
	for _, t := range texts {
		buf = append(buf, t...)
	}
	return string(buf), nil
}

// budgetScope evaluates a budget()'s children as one nested evaluation
// under a spend scope of its own (and its wall time bound).
func (e *evaluator) budgetScope(n *BudgetScope, depth int) (string, error) {
	name := "budget() at " + n.Position.String()
	s := newSpendScope(e.d.spendOf(e.ctx), n.Budget, name)
	ctx := withSpend(e.ctx, s)
	if w := n.Budget.Wall; w > 0 {
		var cancel context.CancelFunc
		ctx, cancel = e.d.withTimeoutCause(ctx, w, &BudgetError{Budget: "wall_s", Spent: w.Seconds(), Limit: w.Seconds(), Scope: name})
		defer cancel()
	}
	sp := e.d.trace.startSpan(e.spanParent(), "component", "Budget", n.Position, nil, nil)
	sc := scope{depth: depth, span: sp.ID(), ctx: e.top().ctx, comps: e.top().comps, path: e.top().path.child("b"), res: e.top().res}
	if sc.span == "" {
		sc.span = e.spanParent()
	}
	texts, err := e.d.evaluateAll(ctx, []any{n.Children}, sc, n.Position, true)
	var pe *ParallelError
	if errors.As(err, &pe) && len(pe.Failures) == 1 {
		err = pe.Failures[0].Err
	}
	sp.end(err, spendAttrs(e.d.trace, "", "", s), nil)
	if err != nil {
		return "", err
	}
	return texts[0], nil
}

// flattenBranches turns parallel() arguments into branches: lists are
// flattened, nil and booleans contribute no branch, anything else (a
// fragment too) is one branch.
func flattenBranches(items []any) []any {
	for len(items) == 1 {
		// parallel(list): the list itself is the branches.
		inner, ok := items[0].([]any)
		if !ok {
			break
		}
		items = inner
	}
	flat := true
	for _, v := range items {
		switch v.(type) {
		case nil, bool, []any:
			flat = false
		}
		if !flat {
			break
		}
	}
	if flat {
		return items // the common case needs no copy
	}
	out := make([]any, 0, len(items))
	type it struct {
		items []any
		i     int
	}
	stack := []it{{items: items}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.i >= len(top.items) {
			stack = stack[:len(stack)-1]
			continue
		}
		v := top.items[top.i]
		top.i++
		switch v := v.(type) {
		case nil, bool:
		case []any:
			stack = append(stack, it{items: v})
		default:
			out = append(out, v)
		}
	}
	return out
}

func panicText(r any) string {
	if err, ok := r.(error); ok {
		return err.Error()
	}
	return fmt.Sprint(r)
}
