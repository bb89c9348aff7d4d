package eval

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// buildRequest assembles the provider request of an agent from its
// resolved plan: prompt and follow-ups trimmed, system fragments (runtime,
// system= prop, system() children) trimmed, empty ones omitted, joined
// with "\n".
func (d *domain) buildRequest(n *Agent, plan *agentPlan, prompt []byte) *AgentRequest {
	parts := make([]string, 0, 2+len(plan.system))
	if s := trimSpace(d.rt.opts.System); s != "" {
		parts = append(parts, s)
	}
	if s := trimSpace(n.System); s != "" {
		parts = append(parts, s)
	}
	parts = append(parts, plan.system...)
	perms := DefaultPermissions()
	if n.Permissions != nil {
		perms = *n.Permissions
	}
	return &AgentRequest{
		Prompt:      trimSpace(string(prompt)),
		FollowUps:   plan.followUps,
		System:      strings.Join(parts, "\n"),
		Model:       n.Model,
		Name:        n.Name,
		Permissions: perms,
		ToolServer:  d.toolPrefix(),
	}
}

// grant records a tool() or mcp() grant in an agent plan, enforcing the
// same rules as the static check for grants produced by components.
func (d *domain) grant(plan *agentPlan, n Node) error {
	if plan.grants == nil {
		plan.grants = map[string]bool{}
	}
	return d.checkGrant(n, plan.grants)
}

// checkCapabilities rejects grants the selected provider cannot take and
// an MCP server whose name collides with the tool bridge's server
// (AgentRequest.CheckToolServer's rule, reported at the grant).
func (d *domain) checkCapabilities(n *Agent, p AgentProvider, plan *agentPlan, structured bool) error {
	if len(plan.tools) > 0 {
		if oi, ok := p.(ObjectToolInputs); ok && oi.RequiresObjectToolInput() {
			for _, g := range plan.tools {
				if !g.Tool.InputSchema().RootTypeObject() {
					return newError(g.Position, fmt.Sprintf("tool %q cannot be granted to provider %q: its input schema must have \"type\": \"object\" at the root, because the provider passes tool input as named arguments", g.Tool.Name(), p.Name()))
				}
			}
		}
	}
	if len(plan.tools) > 0 || structured {
		prefix := d.toolPrefix()
		for _, m := range plan.mcp {
			if m.GrantName() == prefix {
				return newError(m.Position, toolServerClash(prefix).Error())
			}
		}
	}
	return nil
}

// sandboxSession builds the effective sandbox of an agent inside a
// sandbox() and performs the provider handshake: the provider must accept
// the session, or the agent fails before it runs.
func sandboxSession(n *Agent, p AgentProvider, plan *agentPlan) (*SandboxSession, error) {
	v := plan.sb
	if v == nil {
		return nil, nil
	}
	cwd := v.cwd
	if n.Cwd != "" {
		c, err := CheckLogicalPath(n.Cwd, true)
		if err != nil {
			return nil, newError(n.Position, "agent(cwd=...): "+err.Error())
		}
		cwd = c
	}
	s := &SandboxSession{Lease: v.lease, Runtime: v.rt, Access: v.access, Root: v.root, Cwd: cwd}
	sc, ok := p.(SandboxCompatible)
	if !ok || !sc.SupportsSandbox(s) {
		return nil, newError(n.Position, fmt.Sprintf("%s: agent provider %q cannot run inside sandbox(): it does not accept the sandbox's runtime; use a provider that supports sandboxes (deterministic_agent(supports_sandbox=True) for tests) or move the agent out of the sandbox", agentLabel(n), p.Name()))
	}
	return s, nil
}

// toolPrefix is the name of the invocation-owned MCP server that carries
// tools to bridged providers.
func (d *domain) toolPrefix() string {
	if d.rt.opts.ToolPrefix != "" {
		return d.rt.opts.ToolPrefix
	}
	return defaultToolServer
}

// agentTools binds an agent's granted tools to this evaluation for the
// provider: every call runs through invoke, traced under the session.
func (d *domain) agentTools(ctx context.Context, plan *agentPlan, sessionSpan string) []*AgentTool {
	if len(plan.tools) == 0 {
		return nil
	}
	out := make([]*AgentTool, len(plan.tools))
	for i, g := range plan.tools {
		t := g.Tool
		out[i] = &AgentTool{Name: t.Name(), Description: t.Description(), InputSchema: t.InputSchema().Document(), tool: t,
			call: func(callCtx context.Context, input any) (any, error) {
				if callCtx == nil {
					callCtx = ctx
				} else {
					// The call counts toward the session's budgets.
					callCtx = withSpend(callCtx, d.spendOf(ctx))
				}
				return d.invoke(callCtx, t, input, sessionSpan, "agent")
			}}
	}
	return out
}

func agentMCP(plan *agentPlan) []AgentMCPServer {
	if len(plan.mcp) == 0 {
		return nil
	}
	out := make([]AgentMCPServer, len(plan.mcp))
	for i, g := range plan.mcp {
		out[i] = AgentMCPServer{Name: g.GrantName(), Server: g.Server}
	}
	return out
}

// runAgent checks the plan against the limits, waits for a scheduler
// slot and runs the provider session, returning the text it contributes.
//
// The result is appended to dst (the consumer's buffer), so structured
// results are encoded in place without an intermediate string.
//
// In a journaled evaluation (path non-nil) a recorded result is served
// instead of running the session, and a live result is recorded.
func (d *domain) runAgent(ctx context.Context, n *Agent, plan *agentPlan, prompt []byte, parentSpan string, dst []byte, path *effectPath) (out []byte, err error) {
	start := len(dst)
	// The staging area (oversized includes, skills) lives exactly as long
	// as the session.
	defer func() {
		if rerr := plan.staging.release(ctx); rerr != nil {
			out, err = dst[:start], errors.Join(err, rerr)
		}
	}()
	req := d.buildRequest(n, plan, prompt)
	schema := n.Schema
	if plan.target != nil {
		schema = plan.target.schema
	}
	if schema != nil {
		req.Output = schema.output
	}
	if max := d.limits.MaxTurnsPerAgent; max > 0 && 1+len(req.FollowUps) > max {
		return dst, turnsError(n, 1+len(req.FollowUps), max)
	}
	if max := d.limits.MaxPromptBytes; max > 0 {
		size := len(req.System) + len(req.Prompt)
		for _, f := range req.FollowUps {
			size += len(f)
		}
		if size > max {
			return dst, promptSizeError(n, size, max)
		}
	}
	p := n.Provider
	if p == nil {
		p = d.rt.opts.AgentProvider
	}
	if override := d.rt.opts.ProviderOverride; override != nil {
		p = override(p)
	}
	if p == nil {
		return dst, newError(n.Position, NoProviderMessage(n))
	}
	if err := d.checkCapabilities(n, p, plan, req.Output != nil); err != nil {
		return dst, err
	}
	session, err := sandboxSession(n, p, plan)
	if err != nil {
		return dst, err
	}
	if err := d.countAgentCall(n.Position); err != nil {
		return dst, err
	}
	// A session accounts its spend in a scope of its own, counted toward
	// those around it, when something needs the session's own figures:
	// its budget=, a provider that meters its calls (each turn's share),
	// its tool calls (a refusal ends this session only) or its span's
	// attributes. Otherwise it charges the scope around it directly.
	outer := d.spendOf(ctx)
	spend := outer
	switch {
	case n.Budget != nil:
		spend = newSpendScope(spend, *n.Budget, agentLabel(n)+" at "+n.Position.String())
	case d.trace != nil || len(plan.tools) > 0 || metered(p, req, session):
		spend = newSpendScope(spend, Budget{}, "")
	}
	if spend.bounded {
		if err := d.checkPrice(spend, n, p, modelOf(p, req)); err != nil {
			return dst, err
		}
	}
	if spend != outer {
		ctx = withSpend(ctx, spend)
	}
	req.MCPServers = agentMCP(plan)
	authoredSystem := req.System
	if len(plan.skills) > 0 {
		req.Skills = plan.skills
		if ns, ok := p.(NativeSkills); !ok || !ns.NativeSkillDiscovery() {
			if req.System != "" {
				req.System += "\n"
			}
			req.System += skillFragment(plan.skills)
		}
	}

	var (
		rec   *Effect
		entry *Effect
	)
	if d.journal != nil {
		// The identity, the order and the fingerprint share one
		// allocation.
		var buf [192]byte
		b, idLen, seq := path.appendNext(buf[:0], "agent")
		ordLen := len(b)
		s := string(appendAgentFingerprint(b, req, authoredSystem, p, schema, plan))
		entry = &Effect{ID: s[:idLen], Order: s[idLen:ordLen], Kind: "agent", Pos: d.journal.relPos(n.Position), Label: agentLabel(n), Request: s[ordLen:]}
		at := slot{id: entry.ID, order: entry.Order, seq: seq, path: path}
		if rec, err = d.replay(at, entry.Kind, n.Position, entry.Label, entry.Request); err != nil {
			return dst, err
		}
	}

	var a, content attrs
	if d.trace != nil {
		a = attrs{"provider", p.Name()}
		if n.Model != "" {
			a = append(a, "model", n.Model)
		}
		if n.Name != "" {
			a = append(a, "agent.name", n.Name)
		}
		if rec != nil {
			a = append(a, "replayed", true)
		}
	}
	if d.trace.captures() {
		content = attrs{"prompt", req.Prompt}
		if req.System != "" {
			content = append(content, "system", req.System)
		}
		if len(req.FollowUps) > 0 {
			content = append(content, "followUps", req.FollowUps)
		}
	}
	agentSpan := d.trace.startSpan(parentSpan, "agent", "Agent", n.Position, a, content)
	if agentSpan != nil {
		for _, g := range plan.tools {
			agentSpan.event("capability.tool", attrs{"name", g.Tool.Name()}, nil)
		}
		for _, g := range plan.mcp {
			kind := "named"
			if g.Server != nil {
				kind = g.Server.Transport.Type
			}
			agentSpan.event("capability.mcp", attrs{"name", g.GrantName(), "kind", kind}, nil)
		}
	}
	var (
		resp  *AgentResponse
		turns []turnRecord
	)
	switch {
	case rec != nil:
		var spent Usage
		if resp, spent, err = replayedAgent(rec); err == nil {
			err = d.replayedFiles(ctx, plan.ws, rec)
		}
		if err == nil {
			// What the recorded session spent counts again, so that a
			// resumed run never starts its budgets from zero.
			spent = spend.price(spent, modelOf(p, req))
			spent.ModelCalls = max(spent.ModelCalls, int64(1+len(req.FollowUps)))
			if be := spend.charge(spent); be != nil {
				err = budgetStop(n.Position, be)
			}
		}
	case entry != nil && d.journal.cassette:
		err = newError(n.Position, agentLabel(n)+" has no recording in the cassette: the recorded run never reached it; record the cassette again with aml run --journal")
	case entry != nil:
		if err = d.beforeLive(ctx, plan.ws, n.Position, !inProcess(p)); err == nil {
			resp, err = d.rateLimited(d.withEffect(ctx, entry), entry, n, p, req, agentSpan, plan, session, &turns)
		}
	default:
		resp, err = d.rateLimited(d.withEffect(ctx, entry), entry, n, p, req, agentSpan, plan, session, nil)
	}
	out = dst
	if err == nil {
		if schema != nil {
			out, err = structuredResult(n, p, schema, resp, plan.target, dst)
		} else {
			out = append(dst, resp.Text...)
		}
	}
	if err == nil && rec == nil && entry != nil {
		err = d.recordAgent(ctx, plan.ws, entry, resp, schema != nil, turns, !inProcess(p))
	}
	if d.trace != nil {
		agentSpan.spent(spend.total())
	}
	if err != nil {
		agentSpan.end(err, spendAttrs(d.trace, "invoke_agent", modelOf(p, req), spend), nil)
		return dst[:start], err
	}
	var endContent attrs
	if d.trace.captures() {
		endContent = attrs{"result", string(out[start:])}
	}
	agentSpan.end(nil, spendAttrs(d.trace, "invoke_agent", modelOf(p, req), spend), endContent)
	return out, nil
}

// spendAttrs are the OpenTelemetry GenAI attributes of a span: the
// operation and model (of an agent span) and what its scope spent; none
// when nothing was reported spent.
func spendAttrs(t *tracer, op, model string, s *spendScope) attrs {
	if t == nil {
		return nil
	}
	u := s.total()
	if u.Tokens() == 0 && u.CostUSD == 0 && u.ToolCalls == 0 {
		// Nothing reported: the span stays as it was without budgets.
		return nil
	}
	var a attrs
	if op != "" {
		a = append(a, "gen_ai.operation.name", op)
	}
	if model != "" {
		a = append(a, "gen_ai.request.model", model)
	}
	return append(a, sumAttrs(u)...)
}

// sumAttrs are the attributes of what was spent: the GenAI usage
// attributes and AML's counts.
func sumAttrs(u Usage) attrs {
	if u.Tokens() == 0 && u.CostUSD == 0 && u.ToolCalls == 0 {
		return nil
	}
	a := attrs{"gen_ai.usage.input_tokens", u.InputTokens, "gen_ai.usage.output_tokens", u.OutputTokens}
	if u.CachedInputTokens > 0 {
		a = append(a, "gen_ai.usage.cache_read.input_tokens", u.CachedInputTokens)
	}
	if u.ReasoningTokens > 0 {
		a = append(a, "gen_ai.usage.reasoning.output_tokens", u.ReasoningTokens)
	}
	if u.ModelCalls > 0 {
		a = append(a, "aml.model_calls", u.ModelCalls)
	}
	if u.ToolCalls > 0 {
		a = append(a, "aml.tool_calls", u.ToolCalls)
	}
	if u.CostUSD > 0 {
		a = append(a, "aml.cost_usd", u.CostUSD)
	}
	return a
}

// structuredResult validates a provider's structured value against the
// schema and appends its canonical JSON text to dst; for
// evaluate(schema=...) it hands the value to the target instead.
func structuredResult(n *Agent, p AgentProvider, schema *Schema, resp *AgentResponse, t *structTarget, dst []byte) ([]byte, error) {
	if resp.Structured == nil {
		return dst, newError(n.Position, fmt.Sprintf("%s was asked for a structured result but provider %q returned none; the provider must return a value for the agent's schema", agentLabel(n), p.Name()))
	}
	out, err := schema.appendValidCanonical(dst, resp.Structured)
	if err != nil {
		if jsonErr := checkJSONValue(resp.Structured, 0); jsonErr != nil {
			return dst, &EvaluationError{Msg: fmt.Sprintf("%s structured result from provider %q is not JSON data", agentLabel(n), p.Name()), Pos: n.Position, Err: jsonErr}
		}
		return dst, &EvaluationError{Msg: agentLabel(n) + " structured result schema validation failed", Pos: n.Position, Err: err}
	}
	if t != nil {
		t.value = resp.Structured
		return dst, nil
	}
	return out, nil
}

// session runs one provider session under the scheduler and the agent's
// timeout.
// With turns non-nil, the turns the provider reported are appended to it.
func (d *domain) session(ctx context.Context, n *Agent, p AgentProvider, req *AgentRequest, agentSpan *span, plan *agentPlan, sandbox *SandboxSession, turns *[]turnRecord) (*AgentResponse, error) {
	if d.sched != nil {
		unqueue := d.workers.queue()
		aerr := d.sched.Acquire(ctx)
		unqueue()
		if aerr != nil {
			return nil, canceled(ctx, n.Position)
		}
		defer d.sched.Release()
	}

	sctx := ctx
	if n.TimeoutMS > 0 {
		var cancel context.CancelFunc
		sctx, cancel = d.withTimeoutCause(ctx, time.Duration(n.TimeoutMS)*time.Millisecond, &AgentTimeoutError{TimeoutMS: n.TimeoutMS, Pos: n.Position})
		defer cancel()
	}
	if n.Budget != nil && n.Budget.Wall > 0 {
		var cancel context.CancelFunc
		w := n.Budget.Wall
		sctx, cancel = d.withTimeoutCause(sctx, w, &BudgetError{Budget: "wall_s", Spent: w.Seconds(), Limit: w.Seconds(), Scope: agentLabel(n) + " at " + n.Position.String()})
		defer cancel()
	}
	spend := d.spendOf(ctx)
	var a attrs
	if d.trace != nil {
		a = attrs{"provider", p.Name()}
		if n.Model != "" {
			a = append(a, "model", n.Model)
		}
	}
	parent := agentSpan.ID()
	sess := d.trace.startSpan(parent, "agent", "agent.session", n.Position, a, nil)
	// Without trace sinks every session shares one emitter that discards.
	st := discardTrace
	if d.trace != nil {
		st = &sessionTrace{t: d.trace, sess: sess}
	}
	exec := &AgentExecution{RunID: d.runID, SpanID: sess.ID(), ParentSpanID: parent, Source: n.Position, Sandbox: sandbox, Trace: st, StagingDir: plan.hostStagingDir()}
	meters := metered(p, req, sandbox)
	var watch *costWatch
	if meters {
		exec.Meter = sessionMeter{s: spend}
	} else {
		watch = &costWatch{s: spend}
		exec.Watch = watch
	}
	if sandbox == nil {
		exec.WorkingDirectory, _ = d.cwd()
	}
	spanForTools := sess.ID()
	if spanForTools == "" {
		spanForTools = parent
	}
	req.Tools = d.agentTools(sctx, plan, spanForTools)

	var (
		resp *AgentResponse
		err  error
	)
	unblock := d.workers.block() // the provider works outside the evaluator
	if sp, ok := p.(SessionProvider); ok {
		resp, err = d.retained(sctx, sp, req, exec, sess, turns, spend, watch)
	} else {
		// A provider that runs all turns in one call reserves them all
		// (unless it meters its calls itself).
		nturns := int64(1 + len(req.FollowUps))
		var before Usage
		var be *BudgetError
		if meters {
			before = spend.total()
			be = spend.usedUp()
		} else {
			be = spend.reserve(nturns, false)
		}
		if be != nil {
			err = be
		} else if resp, err = callProvider(sctx, p, req, exec); err == nil && resp != nil {
			if meters {
				resp = meteredResponse(resp, spend.total(), before)
			} else {
				err = spend.chargeReport(resp, modelOf(p, req), nturns, watch.reported())
			}
			if turns != nil && (resp.SessionID != "" || resp.StopReason != "" || resp.Usage != "" || resp.Spent != nil) {
				// A provider that runs all turns in one call reports the last.
				*turns = append(*turns, turnOf(1+len(req.FollowUps), "session", resp))
			}
			if be := spend.stopped(); err == nil && be != nil {
				err = be
			}
		}
	}
	unblock()
	if err == nil && resp == nil {
		err = errors.New("provider returned no response")
	}
	if err != nil {
		err = d.agentFailure(ctx, sctx, n, p, err)
		sess.end(err, nil, nil)
		return nil, err
	}
	sess.end(nil, nil, nil)
	return resp, nil
}

// agentFailure wraps a provider error with the agent's position, naming
// the timeout or cancellation that caused it.
func (d *domain) agentFailure(ctx, sctx context.Context, n *Agent, p AgentProvider, err error) error {
	var be *BudgetError
	if errors.As(context.Cause(sctx), &be) || errors.As(err, &be) {
		return budgetStop(n.Position, be)
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if !errors.Is(err, cause) {
			err = errors.Join(cause, err)
		}
		return &EvaluationError{Msg: "evaluation cancelled during " + agentLabel(n) + " session", Pos: n.Position, Err: err}
	}
	if sctx.Err() != nil {
		cause := context.Cause(sctx)
		var te *AgentTimeoutError
		if errors.As(cause, &te) {
			if !errors.Is(err, cause) {
				err = errors.Join(cause, err)
			}
			return &EvaluationError{Msg: fmt.Sprintf("%s timed out after timeout_ms=%d", agentLabel(n), n.TimeoutMS), Pos: n.Position, Err: err}
		}
	}
	return &EvaluationError{Msg: fmt.Sprintf("%s provider %q failed", agentLabel(n), p.Name()), Pos: n.Position, Err: err}
}

func callProvider(ctx context.Context, p AgentProvider, req *AgentRequest, exec *AgentExecution) (resp *AgentResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("provider panicked: %s", panicText(r))
		}
	}()
	return p.Run(ctx, req, exec)
}

// retained drives a SessionProvider turn by turn, tracing each turn and
// the cleanup, and closes the session exactly once.
func (d *domain) retained(ctx context.Context, p SessionProvider, req *AgentRequest, exec *AgentExecution, sess *span, turns *[]turnRecord, spend *spendScope, watch *costWatch) (resp *AgentResponse, err error) {
	meters := watch == nil
	// A cancellation (caller, signal or timeout_ms) while the session is
	// being set up or open is recorded on the session span before the
	// provider reacts.
	stopCancelEvent := context.AfterFunc(ctx, func() {
		sess.event("agent.session", attrs{"state", "cancellation_requested"}, nil)
	})
	defer stopCancelEvent()
	var s AgentSession
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("provider panicked opening the session: %s", panicText(r))
			}
		}()
		s, err = p.OpenSession(ctx, req, exec)
	}()
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("provider opened no session")
	}
	defer func() {
		cleanup := sess.childWith(d.trace, "agent", "agent.cleanup", exec.Source, nil, nil)
		st, _ := exec.Trace.(*sessionTrace)
		if st == discardTrace {
			st = nil
		}
		if st != nil {
			st.setTurn(cleanup)
		}
		cerr := closeSession(s)
		if st != nil {
			st.setTurn(nil)
		}
		cleanup.end(cerr, nil, nil)
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the agent session: %w", cerr))
			resp = nil
		}
	}()
	for _, turn := range req.Turns() {
		var content attrs
		if d.trace.captures() {
			content = attrs{"prompt", turn.Text}
		}
		// A turn is a model call (or, metered, makes its own): it starts
		// only while the budgets have room for one.
		var before Usage
		watched := watch.reported()
		if meters {
			before = spend.total()
			if be := spend.usedUp(); be != nil {
				return nil, be
			}
		} else if be := spend.reserve(1, false); be != nil {
			return nil, be
		}
		ts := sess.childWith(d.trace, "agent", "agent.turn", exec.Source, attrs{"index", int64(turn.Index), "kind", turn.Kind}, content)
		st, _ := exec.Trace.(*sessionTrace)
		if st == discardTrace {
			st = nil
		}
		if st != nil {
			st.setTurn(ts)
		}
		r, terr := runTurn(ctx, s, turn)
		if st != nil {
			st.setTurn(nil)
		}
		if terr == nil && r == nil {
			terr = errors.New("provider returned no turn response")
		}
		ts.end(terr, turnAttrs(terr, r), nil)
		if terr != nil {
			return nil, terr
		}
		if meters {
			r = meteredResponse(r, spend.total(), before)
		} else if err := spend.chargeReport(r, modelOf(p, req), 1, watch.reported()-watched); err != nil {
			return nil, err
		}
		if be := spend.stopped(); be != nil {
			// A model or tool call of the turn was refused, or crossed a
			// budget.
			return nil, be
		}
		if turns != nil && (r.SessionID != "" || r.StopReason != "" || r.Usage != "" || r.Spent != nil) {
			// A turn that reports nothing of its own adds nothing to
			// the record: its index and kind follow from the request.
			*turns = append(*turns, turnOf(turn.Index, turn.Kind, r))
		}
		resp = r
	}
	return resp, nil
}

func runTurn(ctx context.Context, s AgentSession, t AgentTurn) (r *AgentResponse, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("provider panicked in turn %d: %s", t.Index, panicText(rec))
		}
	}()
	return s.RunTurn(ctx, t)
}

func closeSession(s AgentSession) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("provider panicked closing the session: %s", panicText(r))
		}
	}()
	// Cleanup runs even after cancellation, bounded so a stuck provider
	// cannot hold the evaluation forever.
	ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
	defer cancel()
	return s.Close(ctx)
}

// CleanupTimeout bounds the cleanup of one resource (an agent session, a
// sandbox lease, a staging area, the host runtime) after its work ended
// or was cancelled: cleanup runs even after cancellation, but a stuck
// provider cannot hold an evaluation forever. Providers bound their own
// cleanup with it too.
const CleanupTimeout = 30 * time.Second

// childWith opens a nested span below s.
func (s *span) childWith(t *tracer, kind, name string, pos Position, a attrs, content attrs) *span {
	if t == nil {
		return nil
	}
	return t.startSpan(s.ID(), kind, name, pos, a, content)
}

// sessionTrace is the TraceEmitter of one agent session: events go to the
// running turn's or cleanup's span, or to the session span otherwise.
// discardTrace is the TraceEmitter of sessions of a run without trace
// sinks; it is never given a turn.
var discardTrace = &sessionTrace{}

type sessionTrace struct {
	t    *tracer
	sess *span

	mu   sync.Mutex
	turn *span
}

func (e *sessionTrace) setTurn(s *span) {
	e.mu.Lock()
	e.turn = s
	e.mu.Unlock()
}

// Event implements TraceEmitter.
func (e *sessionTrace) Event(name string, a, content map[string]any) {
	if e.t == nil {
		return
	}
	e.mu.Lock()
	target := e.turn
	e.mu.Unlock()
	if target == nil {
		target = e.sess
	}
	if target == nil {
		return
	}
	list := make(attrs, 0, 2*len(a))
	for k, v := range a {
		list = append(list, k, v)
	}
	var c attrs
	if e.t.anyCap && len(content) > 0 {
		c = make(attrs, 0, 2*len(content))
		for k, v := range content {
			c = append(c, k, v)
		}
	}
	target.event(name, list, c)
}

// CapturesContent implements TraceEmitter.
func (e *sessionTrace) CapturesContent() bool { return e.t.captures() }

// Span implements SpanEmitter.
func (e *sessionTrace) Span(kind, name string, start time.Time, d time.Duration, a map[string]any, failed bool) {
	if e.t == nil {
		return
	}
	e.mu.Lock()
	parent := e.turn
	e.mu.Unlock()
	if parent == nil {
		parent = e.sess
	}
	if parent == nil {
		return
	}
	t := e.t
	t.mu.Lock()
	t.spanSeq++
	id := strconv.FormatUint(t.spanSeq, 10)
	t.mu.Unlock()
	m := make(map[string]any, len(a))
	for k, v := range a {
		m[k] = v
	}
	t.emit(Event{Type: SpanStart, SpanID: id, ParentSpanID: parent.id, Kind: kind, Name: name, Attributes: m}, start, nil)
	end := map[string]any{}
	status := StatusOK
	if failed {
		status = StatusError
		end["error.type"] = "model_call_failed"
	}
	t.emit(Event{Type: SpanEnd, SpanID: id, ParentSpanID: parent.id, Kind: kind, Name: name, Status: status,
		DurationMS: float64(d.Microseconds()) / 1000, Attributes: end}, start.Add(d), nil)
}

// turnAttrs are the agent.turn end attributes a provider reported.
func turnAttrs(err error, r *AgentResponse) attrs {
	if err != nil || r == nil {
		return nil
	}
	var a attrs
	if r.SessionID != "" {
		a = append(a, "sessionId", r.SessionID)
	}
	if r.StopReason != "" {
		a = append(a, "stopReason", r.StopReason)
	}
	if r.Usage != "" {
		a = append(a, "usage", r.Usage)
	}
	return a
}

// agentLabel names an agent in diagnostics: agent(name="reviewer") when
// the author named it, else agent().
// OneWorkspaceMessage is the error of a workspace() that starts while
// another one of the same evaluation has started: one runs per
// evaluation.
const OneWorkspaceMessage = "only one workspace() may run per evaluation; reuse the outer workspace instead"

// NoProviderMessage is the error of an agent(), sandbox() or
// workspace() node that no provider reaches (none given, no default and
// no override), which the evaluator reports and the static analysis
// reports too; "" for other nodes.
func NoProviderMessage(n Node) string {
	switch n := n.(type) {
	case *Agent:
		return agentLabel(n) + " has no provider: pass provider= to agent(), or set a default with configure(agent_provider=...) or the runtime's AgentProvider option"
	case *Workspace:
		return "workspace() has no provider: pass provider= (such as local_workspace(directory=...)) or set one with configure(workspace_provider=...)"
	case *Sandbox:
		return "sandbox() has no provider: pass provider= (such as local_sandbox()) or set one with configure(sandbox_provider=...)"
	}
	return ""
}

func agentLabel(n *Agent) string {
	if n.Name == "" {
		return "agent()"
	}
	return "agent(name=" + strconv.Quote(n.Name) + ")"
}
