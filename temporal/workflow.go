package temporal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
	"github.com/aml-go/aml/internal/redact"
	"github.com/aml-go/aml/starlib"
)

// Names of the workflow and activity types, as workers register them and
// history shows them.
const (
	// WorkflowName is the workflow type of an AML run.
	WorkflowName = "aml.run"
	// AgentActivity runs one whole agent() session.
	AgentActivity = "aml.agent"
	// AnswerSignal carries an Answer to a question the run asked.
	AnswerSignal = "aml.answer"
	// StateQuery returns the run's RunState.
	StateQuery = "aml.state"
)

// questions are the ask() state of a run in workflow code: questions
// waiting for an answer and answers received. Coroutines run one at a
// time, so it needs no lock.
type questions struct {
	pending []eval.Question
	answers map[string]any
	asked   map[string]int
	// rs ends the wait when the run drains to continue as new.
	rs *runState
}

// listen serves StateQuery and receives AnswerSignal for the whole run.
func (qs *questions) listen(wctx workflow.Context, cont *Continuation) error {
	qs.answers, qs.asked = map[string]any{}, map[string]int{}
	maps.Copy(qs.answers, cont.Answers)
	maps.Copy(qs.asked, cont.Asked)
	if err := workflow.SetQueryHandler(wctx, StateQuery, func() (RunState, error) {
		return RunState{Questions: append([]eval.Question{}, qs.pending...)}, nil
	}); err != nil {
		return err
	}
	workflow.Go(wctx, func(c workflow.Context) {
		ch := workflow.GetSignalChannel(c, AnswerSignal)
		for {
			var a Answer
			if !ch.Receive(c, &a) {
				return
			}
			qs.answers[a.ID] = a.Value
		}
	})
	return nil
}

// ask is eval.Options.Ask in workflow code: the question waits, holding
// no activity and no worker, until AnswerSignal answers it. A question
// the program gave no id is named by its position and occurrence
// (file:line:col#n).
func (qs *questions) ask(ctx context.Context, q eval.Question) (any, error) {
	wctx := workflowOf(ctx)
	if q.ID == "" {
		n := qs.asked[q.Source]
		qs.asked[q.Source] = n + 1
		q.ID = fmt.Sprintf("%s#%d", q.Source, n)
	}
	qs.pending = append(qs.pending, q)
	defer func() {
		for i, p := range qs.pending {
			if p.ID == q.ID {
				qs.pending = append(qs.pending[:i], qs.pending[i+1:]...)
				break
			}
		}
	}()
	if err := workflow.Await(wctx, func() bool { _, ok := qs.answers[q.ID]; return ok || qs.rs.stopping }); err != nil {
		return nil, err
	}
	v, ok := qs.answers[q.ID]
	if !ok {
		// The next execution asks again; an answer sent meanwhile
		// reaches it.
		return nil, errContinuing
	}
	return v, nil
}

// Activity timing: how often a session's activity heartbeats, and how
// long without a heartbeat before Temporal takes its worker for dead and
// runs the session again elsewhere; SessionTimeout bounds a session that
// sets no timeout_ms.
const (
	HeartbeatInterval = 2 * time.Second
	HeartbeatTimeout  = 10 * time.Second
	SessionTimeout    = 2 * time.Hour
)

// WorkflowTaskTimeout is the workflow task timeout runs start with
// (Client.Start): how long Temporal waits for a worker to answer one task
// of workflow code before it gives the task to another. Workflow code
// pauses its computation every PaceSteps Starlark steps, so no task of a
// run needs more than a fraction of it; a worker's deadlock detection
// (worker.Options.DeadlockDetectionTimeout, aml worker
// --deadlock-timeout) must be shorter, so that the worker, not the
// timeout, reports a task that does not pause.
const WorkflowTaskTimeout = 20 * time.Second

// RunInput starts a run: the bundle of the workflow and its modules, and
// the entry component to evaluate ("" picks the file's entry as aml run
// does).
type RunInput struct {
	Bundle *Bundle `json:"bundle"`
	Entry  string  `json:"entry,omitempty"`
	// Limits, when set, replace the workflow's configure() limits (aml
	// run --temporal passes them with its limit flags applied).
	Limits *eval.Limits `json:"limits,omitempty"`
	// ContinueAfter, when positive, makes each execution of the run
	// continue as new once this many effects started in it; 0 continues
	// when Temporal suggests it (see continue.go).
	ContinueAfter int `json:"continueAfter,omitempty"`
	// Continued is what the previous execution of the run carried over;
	// nil for a new run.
	Continued *Continuation `json:"continued,omitempty"`
	// Cwd is the submitter's working directory, from which the run's
	// relative paths resolve as aml run resolves them: the directories
	// its providers name, the host directory of script() outside any
	// sandbox, and the application files it reads. Workers must see it
	// (the same machine, or a shared mount); "" resolves them from each
	// worker's own.
	Cwd string `json:"cwd,omitempty"`
	// Budget and Prices, when set, replace the workflow's configure()
	// budget and prices (aml run --temporal passes them with its spend
	// flags applied).
	Budget *eval.Budget          `json:"budget,omitempty"`
	Prices map[string]eval.Price `json:"prices,omitempty"`
}

// workflows holds what the workflow function needs besides its input: the
// extensions every worker loads bundles with.
type workflows struct {
	extensions []*starlib.Extension
	env        func(string) (string, bool)
	envKey     []byte
	errorCode  func(error) string
	// defaultAgent reports whether workers run sessions that the
	// workflow gave no provider (Options.DefaultAgent).
	defaultAgent bool
}

// run is the workflow function of an AML run (registered as WorkflowName):
// it loads the bundle and evaluates the entry as workflow code, with the
// executor of this package and every effect an activity.
func (wf *workflows) run(wctx workflow.Context, in RunInput) (*RunResult, error) {
	if err := in.Bundle.Verify(); err != nil {
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "aml.bundle", err)
	}
	log := workflow.GetLogger(wctx)
	seal := &sealer{}
	cont := in.Continued
	if cont == nil {
		cont = &Continuation{}
	}
	envLog := map[string]envRecord{}
	prints := &printBuffer{}
	if err := workflow.SetQueryHandler(wctx, PrintQuery, func(from int) (PrintPage, error) {
		p := prints.page(from)
		p.Execution = workflow.GetInfo(wctx).WorkflowExecution.RunID
		return p, nil
	}); err != nil {
		return nil, err
	}
	w, err := starlib.LoadFile(in.Bundle.Entry, starlib.LoadOptions{
		// The top level pauses as the evaluation does (executor.Pace).
		Context:    eval.WithPacer(withWorkflow(context.Background(), wctx), executor{}),
		FS:         in.Bundle.FS(),
		Extensions: wf.extensions,
		// env() values stay on workers (see secrets.go).
		Env:          workflowEnv(wctx, wf.env, wf.envKey, seal, cont.Env, envLog),
		Dir:          in.Cwd,
		EnvDigestKey: envDigestKey(wf.envKey),
		// print() lines are kept for the submitter (prints.go).
		Print: func(msg string) { prints.add(msg) },
	})
	if err != nil {
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "aml.load", err)
	}
	runID := workflow.GetInfo(wctx).WorkflowExecution.ID
	rs := &runState{after: in.ContinueAfter, root: wctx, pending: workflow.NewSemaphore(wctx, MaxPendingActivities)}
	qs := &questions{rs: rs}
	if err := qs.listen(wctx, cont); err != nil {
		return nil, err
	}
	ps := &scopeSessions{bundle: in.Bundle, seal: seal, runID: runID, rs: rs, cwd: in.Cwd,
		sandboxes: w.SandboxProviders(), workspaces: w.WorkspaceProviders(),
		carriedWorkspace: cont.WorkspaceID, carriedCheckpoint: cont.WorkspaceCheckpoint}
	// Whether workers run sessions without a provider is recorded once,
	// so that a worker given other options replays the run as it ran.
	var defaultAgent bool
	if err := workflow.SideEffect(wctx, func(workflow.Context) any { return wf.defaultAgent }).Get(&defaultAgent); err != nil {
		return nil, err
	}
	drainPaces(wctx)
	relay := &toolRelay{}
	traces := &traceBuffer{}
	if err := workflow.SetQueryHandler(wctx, TraceQuery, func(from int) (TracePage, error) {
		p := traces.page(from)
		p.Execution = workflow.GetInfo(wctx).WorkflowExecution.RunID
		return p, nil
	}); err != nil {
		return nil, err
	}
	opts := eval.Options{
		Trace:    []eval.TraceSink{traces},
		Limits:   in.Limits,
		Budget:   in.Budget,
		Prices:   in.Prices,
		Ask:      qs.ask,
		Executor: executor{workspaceID: cont.WorkspaceID, deadlines: new(int)},
		// Scope sessions checkpoint and restore workspaces themselves; a question
		// waits for its signal.
		ExecutorKeepsScopes: true,
		AskLive:             true,
		AppFiles:            in.Bundle.DataFS(in.Cwd),
		Cwd:                 in.Cwd,
		ProviderOverride:    agentOverride(in.Bundle, w, seal, rs, relay, defaultAgent, in.Cwd, prints, pricesOf(in, w)),
		Host:                remoteSandboxProvider{ps: ps, name: "host", index: -1, host: true},
		SandboxOverride: func(p eval.SandboxProvider) eval.SandboxProvider {
			if p == nil {
				return nil
			}
			rp := remoteSandboxProvider{ps: ps, name: p.Name(), index: slices.IndexFunc(ps.sandboxes, func(m eval.SandboxProvider) bool { return same(m, p) })}
			if rp.index < 0 {
				rp.factory = travelling(w, p, seal)
			}
			return rp
		},
		WorkspaceOverride: func(p eval.WorkspaceProvider) eval.WorkspaceProvider {
			if p == nil {
				return nil
			}
			rp := remoteWorkspaceProvider{ps: ps, name: p.Name(), index: slices.IndexFunc(ps.workspaces, func(m eval.WorkspaceProvider) bool { return same(m, p) })}
			if rp.index < 0 {
				rp.factory = travelling(w, p, seal)
			}
			return rp
		},
	}
	ctx, cancel := context.WithCancelCause(withWorkflow(context.Background(), wctx))
	defer cancel(nil)
	rs.cancel = func() { cancel(context.Canceled) }
	// aml cancel (the workflow's cancellation) stops the evaluation: its
	// Starlark threads at their next pause, its effects at once.
	workflow.Go(wctx, func(c workflow.Context) {
		c.Done().Receive(c, nil)
		cancel(errRunCancelled)
	})
	if err := relay.listen(wctx, ctx); err != nil {
		return nil, err
	}
	// The journal's records live in memory and in history, so the commit
	// window only spares the evaluator's timer.
	j := newRunJournal(cont.Journal)
	// What the run spent: its replayed sessions count again, so the
	// figure of the last execution is the run's.
	var spent eval.Usage
	opts.OnFinish = func(ev eval.FinishEvent) { spent = ev.Usage }
	var text string
	if len(cont.Journal) > 0 {
		text, err = w.Resume(ctx, in.Entry, opts, eval.ResumeOptions{RunID: runID, Journal: j, CommitWindow: time.Hour})
	} else {
		text, err = w.Evaluate(ctx, in.Entry, opts, eval.EvaluateOptions{RunID: runID, Journal: j, CommitWindow: time.Hour})
	}
	if rs.stopping && wctx.Err() == nil {
		// The run drained: the next execution resumes its journal.
		next := in
		maps.Copy(envLog, cont.Env)
		next.Continued = &Continuation{Journal: j.Effects(), Env: envLog, Answers: qs.answers, Asked: qs.asked,
			WorkspaceID: ps.workspaceID, WorkspaceCheckpoint: ps.workspaceCheckpoint(), Executions: cont.Executions + 1}
		if next.Continued.WorkspaceID == "" {
			next.Continued.WorkspaceID, next.Continued.WorkspaceCheckpoint = cont.WorkspaceID, cont.WorkspaceCheckpoint
		}
		log.Info("continuing as new", "effects", len(next.Continued.Journal), "execution", next.Continued.Executions)
		return nil, workflow.NewContinueAsNewError(wctx, WorkflowName, next)
	}
	if wctx.Err() != nil {
		// aml cancel: the run ends as cancelled once its sessions have.
		return nil, sdktemporal.NewCanceledError()
	}
	if err != nil {
		// Redacted as aml run redacts it: history is no place for secrets.
		red := redact.New(append(w.Secrets(), seal.values...)...)
		f := RunFailure{Backtrace: red.String(backtraceOf(err)), Prints: prints.tail(wctx, red), Usage: &spent}
		if wf.errorCode != nil {
			f.Code = wf.errorCode(err)
		}
		return nil, sdktemporal.NewNonRetryableApplicationError(red.String(err.Error()), "aml.evaluation", nil, f)
	}
	return &RunResult{Text: text, Prints: prints.tail(wctx, redact.New(append(w.Secrets(), seal.values...)...)), Usage: &spent}, nil
}

// pricesOf is the price table of the run: RunInput's, else configure()'s.
func pricesOf(in RunInput, w *starlib.Workflow) map[string]eval.Price {
	if in.Prices != nil {
		return in.Prices
	}
	return w.Config.Prices
}

// agentOverride keeps a provider that computes in the process (the
// deterministic provider: its respond= function is Starlark of the
// bundle) in workflow code, where it replays; every other session becomes
// an activity, which names the provider by its ordinal among those the
// workflow made while it loaded (see starlib.Workflow.AgentProviders).
func agentOverride(b *Bundle, w *starlib.Workflow, seal *sealer, rs *runState, relay *toolRelay, defaultAgent bool, cwd string, prints *printBuffer, prices map[string]eval.Price) func(eval.AgentProvider) eval.AgentProvider {
	made, tools, servers := w.AgentProviders(), w.Tools(), w.MCPServers()
	return func(p eval.AgentProvider) eval.AgentProvider {
		if ip, ok := p.(eval.InProcess); ok && ip.InProcess() {
			return p
		}
		if p == nil && !defaultAgent {
			// No provider, and none on the workers: the evaluator says
			// so as aml run does.
			return nil
		}
		stub := agentStub{name: providerName(p), index: -1, bundle: b, tools: tools, servers: servers, seal: seal, made: p, rs: rs, relay: relay, cwd: cwd, prints: prints, prices: prices, rateLimits: w.Config.RateLimits}
		for i, m := range made {
			if same(m, p) {
				stub.index = i
				break
			}
		}
		if stub.index < 0 && p != nil {
			stub.factory = travelling(w, p, seal)
		}
		return stub
	}
}

// travelling returns the factory call that made p, a provider that a
// component body made while the run evaluated (loading the bundle on a
// worker does not make it again), with its env() values sealed, for the
// worker to make it from; nil when p cannot travel (a Go provider,
// which workers must be given by name).
func travelling(w *starlib.Workflow, p any, seal *sealer) *starlib.FactoryCall {
	fc, err := w.FactoryCall(p)
	if err != nil {
		return nil
	}
	return sealFactory(fc, seal)
}

// providerName is the name a worker finds an agent provider by: the
// provider's name, or "" for the worker's default when the workflow
// configured none.
func providerName(p eval.AgentProvider) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// AgentCall is the input of AgentActivity: the provider's name and the
// part of eval.AgentRequest that travels.
type AgentCall struct {
	// Provider is the provider's name; ProviderIndex, when not negative,
	// its ordinal among the providers Bundle makes while it loads.
	Provider      string           `json:"provider,omitempty"`
	ProviderIndex int              `json:"providerIndex"`
	Bundle        *Bundle          `json:"bundle,omitempty"`
	Prompt        string           `json:"prompt"`
	FollowUps     []string         `json:"followUps,omitempty"`
	System        string           `json:"system,omitempty"`
	Model         string           `json:"model,omitempty"`
	Name          string           `json:"name,omitempty"`
	Permissions   eval.Permissions `json:"permissions"`
	// OutputSchema is the JSON schema of a structured result, or nil.
	OutputSchema map[string]any `json:"outputSchema,omitempty"`
	// Tools are the granted tools, each by its ordinal among the tools
	// Bundle defines while it loads; ToolServer is the tool bridge's
	// server name.
	Tools      []ToolRef `json:"tools,omitempty"`
	ToolServer string    `json:"toolServer,omitempty"`
	// MCPServers are the granted MCP servers: each by its ordinal among
	// the servers Bundle defines while it loads, or (Index -1) a server
	// of the provider's own, by name.
	MCPServers []ToolRef `json:"mcpServers,omitempty"`
	// ToolSession names the session's remote tools in the run's relay.
	ToolSession string `json:"toolSession,omitempty"`
	RunID       string `json:"runId"`
	// Source is the authored position of the agent() call.
	Source string `json:"source"`
	// Sandbox, for a session inside a sandbox(), is the sandbox its
	// worker holds and the agent's view of it.
	Sandbox *SandboxRef `json:"sandbox,omitempty"`
	// Skills are the staged skills; Staging, for an agent outside a
	// sandbox, what was staged for it (skills, oversized includes), which
	// the worker stages again, naming its own directory where the
	// request named the workflow's.
	Skills  []eval.AgentSkill `json:"skills,omitempty"`
	Staging *Staging          `json:"staging,omitempty"`
	// Cwd is the run's RunInput.Cwd: the providers' relative paths, and
	// the directory of a session outside any sandbox.
	Cwd string `json:"cwd,omitempty"`
	// Factory, for a provider that a component body made, is the call
	// that made it (env() values as tokens): the worker makes the
	// provider from it.
	Factory *starlib.FactoryCall `json:"factory,omitempty"`
	// Meter, for a session metered on its worker, is what the run's
	// budgets had left when it started, and the prices to count with.
	Meter *MeterSpec `json:"meter,omitempty"`
}

// MeterSpec is what a worker meters a session against: the least each
// budget around it had left when it started (eval.BudgetLeft; zero
// fields unbounded) and the run's prices. Sessions that run at once each
// get the whole of what was left, so the run's overshoot is bounded by
// the calls in flight, one per running session, as in process.
type MeterSpec struct {
	Left   eval.Budget           `json:"left"`
	Prices map[string]eval.Price `json:"prices,omitempty"`
	// RateLimits are the run's configure(rate_limits=): the worker's
	// model gateway holds the run's sessions on it to them.
	RateLimits map[string]gateway.Limit `json:"rateLimits,omitempty"`
}

// SandboxRef names a held sandbox lease and the view of it an agent gets
// (the nearest sandbox()'s access and root, and the agent's cwd).
type SandboxRef struct {
	Key    string      `json:"key"`
	Access eval.Access `json:"access"`
	Root   string      `json:"root"`
	Cwd    string      `json:"cwd"`
}

// ToolRef names a granted tool in an AgentCall.
type ToolRef struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	// Remote marks a tool the workflow defined while it ran (in a
	// component body): the worker relays its calls to the workflow
	// (ToolSignal), and shows the model its Description and InputSchema.
	Remote      bool           `json:"remote,omitempty"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"inputSchema,omitempty"`
	// Server is the descriptor of an MCP server the workflow defined
	// while it ran, its env() values replaced by tokens.
	Server *eval.MCPServer `json:"server,omitempty"`
}

// sealServer copies an MCP server's descriptor with the env() values it
// holds replaced by their tokens.
func sealServer(m *eval.MCPServer, seal *sealer) *eval.MCPServer {
	t := m.Transport
	out := &eval.MCPServer{Name: m.Name, Transport: eval.MCPTransport{Type: t.Type, Command: seal.seal(t.Command), Cwd: seal.seal(t.Cwd), URL: seal.seal(t.URL)}}
	for _, a := range t.Args {
		out.Transport.Args = append(out.Transport.Args, seal.seal(a))
	}
	for _, kv := range []struct{ from, to *map[string]string }{{&t.Env, &out.Transport.Env}, {&t.Headers, &out.Transport.Headers}} {
		if *kv.from != nil {
			*kv.to = map[string]string{}
			for k, v := range *kv.from {
				(*kv.to)[k] = seal.seal(v)
			}
		}
	}
	return out
}

// agentStub is the agent provider in workflow code: it runs the session as
// an AgentActivity on a worker.
type agentStub struct {
	name   string
	index  int
	bundle *Bundle
	// tools and servers are those the workflow defined while it loaded.
	tools   []*eval.Tool
	servers []*eval.MCPServer
	// seal keeps env() values out of what the activity carries.
	seal *sealer
	// made is the provider the workflow chose (nil for the worker's
	// default), whose capabilities the stub reports.
	made eval.AgentProvider
	// rs gates the session while the run drains to continue as new.
	rs *runState
	// relay serves the calls of tools the workflow defined while it ran.
	relay *toolRelay
	// cwd is the run's RunInput.Cwd.
	cwd string
	// prints keeps the lines the session's tools print on the worker.
	prints *printBuffer
	// factory, for a provider a component body made, is the call that
	// made it, which the worker makes it again from.
	factory *starlib.FactoryCall
	// prices are the run's, with which a worker prices what it meters;
	// rateLimits its configure(rate_limits=).
	prices     map[string]eval.Price
	rateLimits map[string]gateway.Limit
}

// DefaultModel implements eval.ModelDefaulter as the provider the
// workflow chose does.
func (s agentStub) DefaultModel() string {
	md, ok := s.made.(eval.ModelDefaulter)
	if !ok {
		return ""
	}
	return md.DefaultModel()
}

// ReportsCost implements eval.CostReporter as the provider the workflow
// chose does.
func (s agentStub) ReportsCost() bool {
	cr, ok := s.made.(eval.CostReporter)
	return ok && cr.ReportsCost()
}

// Meters implements eval.MeteredProvider as the provider the workflow
// chose does: such a session is metered on its worker, against what the
// run's budgets have left when it starts (MeterSpec), and what the worker
// counted is settled here when it ends (eval.RemoteSpend). A session of
// the workers' default provider, or in a sandbox, is counted from the
// agent's own usage reports.
func (s agentStub) Meters(req *eval.AgentRequest, sb *eval.SandboxSession) bool {
	if sb != nil {
		return false
	}
	m, ok := s.made.(eval.MeteredProvider)
	return ok && m.Meters(req, nil)
}

// SupportsSandbox implements eval.SandboxCompatible as the provider the
// workflow chose does; the worker's default provider decides on the
// worker.
func (s agentStub) SupportsSandbox(sb *eval.SandboxSession) bool {
	if s.made == nil {
		return true
	}
	sc, ok := s.made.(eval.SandboxCompatible)
	return ok && sc.SupportsSandbox(sb)
}

// RequiresObjectToolInput implements eval.ObjectToolInputs as the chosen
// provider does.
func (s agentStub) RequiresObjectToolInput() bool {
	o, ok := s.made.(eval.ObjectToolInputs)
	return ok && o.RequiresObjectToolInput()
}

// NativeSkillDiscovery implements eval.NativeSkills as the chosen
// provider does.
func (s agentStub) NativeSkillDiscovery() bool {
	n, ok := s.made.(eval.NativeSkills)
	return ok && n.NativeSkillDiscovery()
}

func (s agentStub) Name() string {
	if s.name == "" {
		return "default"
	}
	return s.name
}

func (s agentStub) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	ctx, leave, err := s.rs.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	wctx := workflowOf(ctx)
	var sandboxed *remoteSandbox
	if exec.Sandbox != nil {
		rs, ok := exec.Sandbox.Lease.(*remoteSandbox)
		if !ok {
			return nil, errors.New("the agent's sandbox is not held by a worker of this run")
		}
		sandboxed = rs
	}
	call := AgentCall{
		Provider: s.name, ProviderIndex: s.index, Prompt: s.seal.seal(req.Prompt), System: s.seal.seal(req.System), Model: req.Model,
		Name: req.Name, Permissions: req.Permissions, RunID: exec.RunID, Source: exec.Source.String(), Cwd: s.cwd, Factory: s.factory,
	}
	for _, f := range req.FollowUps {
		call.FollowUps = append(call.FollowUps, s.seal.seal(f))
	}
	call.Skills = req.Skills
	if exec.StagingDir != "" && sandboxed == nil {
		// What was staged for the agent is on this machine: it travels
		// to the session's worker, which stages it again.
		staged, err := readStaging(exec.StagingDir)
		if err != nil {
			return nil, fmt.Errorf("the agent's staged files cannot travel to its worker: %w", err)
		}
		call.Staging = staged
	}
	if req.Output != nil {
		call.OutputSchema = req.Output.JSONSchema
	}
	if exec.Meter != nil {
		call.Meter = &MeterSpec{Prices: s.prices, RateLimits: s.rateLimits}
		if bl, ok := exec.Meter.(eval.BudgetLeft); ok {
			call.Meter.Left = bl.Left()
		}
	}
	var remote []*eval.AgentTool
	needBundle := false
	for _, t := range req.Tools {
		ref := ToolRef{Name: t.Name, Index: slices.Index(s.tools, t.Tool())}
		if ref.Index < 0 {
			// Defined while the workflow ran: its calls come back here.
			ref.Remote, ref.Description, ref.InputSchema = true, t.Description, t.InputSchema
			remote = append(remote, t)
		} else {
			needBundle = true
		}
		call.Tools = append(call.Tools, ref)
	}
	if len(remote) > 0 {
		call.ToolSession = s.relay.open(remote)
		defer s.relay.close(call.ToolSession)
	}
	call.ToolServer = req.ToolServer
	for _, m := range req.MCPServers {
		ref := ToolRef{Name: m.Name, Index: -1}
		if m.Server != nil {
			if ref.Index = slices.Index(s.servers, m.Server); ref.Index < 0 {
				// Defined while the workflow ran: its descriptor travels,
				// with env() values as tokens the worker fills.
				ref.Server = sealServer(m.Server, s.seal)
			} else {
				needBundle = true
			}
		}
		call.MCPServers = append(call.MCPServers, ref)
	}
	if s.index >= 0 || needBundle {
		call.Bundle = s.bundle
	}
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: SessionTimeout,
		HeartbeatTimeout:    HeartbeatTimeout,
		// A cancelled run waits until its sessions have ended on their
		// workers, so that nothing it started outlives it.
		WaitForCancellation: true,
		// A session that failed in its provider is not run again (aml run
		// does not retry it either); one whose worker died is.
		RetryPolicy: &sdktemporal.RetryPolicy{InitialInterval: time.Second, NonRetryableErrorTypes: []string{agentFailure}},
	}
	t, bounded := ctx.Value(timeoutKey{}).(timeout)
	if bounded {
		ao.StartToCloseTimeout = t.d
		ao.RetryPolicy.MaximumAttempts = 1
	}
	var resp AgentReply
	if sandboxed != nil {
		// The session runs on the worker that holds the sandbox; if that
		// worker dies, on the one that holds it again.
		pl, view := sandboxed.l.pl, exec.Sandbox
		err = pl.do(ctx, AgentActivity, ao, func() any {
			c := call
			c.Sandbox = &SandboxRef{Key: sandboxed.l.res.Key, Access: view.Access, Root: view.Root, Cwd: view.Cwd}
			return c
		}, &resp)
		if err == nil && pl.checkpoints() && view.Access == eval.ReadWrite {
			var r FileReply
			if cerr := pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any { return FileCall{Key: pl.workspaceKey(), Op: fileCheckpoint} }, &r); cerr != nil {
				return nil, fmt.Errorf("checkpointing the workspace after the session: %w", cerr)
			}
			pl.noteCheckpoint(r.Checkpoint)
		}
	} else {
		ao.ActivityID = s.rs.activityID(ctx)
		var free func()
		if free, err = s.rs.slot(wctx); err == nil {
			err = workflow.ExecuteActivity(workflow.WithActivityOptions(wctx, ao), AgentActivity, call).Get(wctx, &resp)
			free()
		}
	}
	// The worker sealed what it returns; put the values back.
	lookup := func(name string) (string, bool) {
		for v, n := range s.seal.names {
			if n == name {
				return v, true
			}
		}
		return "", false
	}
	printed := func(lines []string) {
		for _, l := range lines {
			if u, uerr := unseal(l, lookup); uerr == nil {
				l = u
			}
			s.prints.add(l)
		}
	}
	if err != nil {
		var te *sdktemporal.TimeoutError
		if bounded && errors.As(err, &te) {
			return nil, t.cause
		}
		err = activityError(err)
		var re *remoteError
		if errors.As(err, &re) {
			printed(re.prints)
			if re.metered != nil {
				// What the session spent before it failed counts; a
				// budget its worker stopped it at is the session's end.
				if be := settle(exec, *re.metered, req.Model, re.refused); be != nil {
					return nil, be
				}
			}
		}
		return nil, err
	}
	printed(resp.Prints)
	if exec.Meter != nil {
		u, refused := resp.Metered, resp.Refused
		if u == nil {
			// The worker's provider did not meter the session: its
			// usage report is what it spent, a model call a turn at the
			// least.
			r, _ := eval.ParseUsage(resp.Usage)
			r.ModelCalls = max(r.ModelCalls, int64(1+len(req.FollowUps)))
			u = &r
		}
		_ = settle(exec, *u, req.Model, refused) // a budget crossed ends the session after it
	}
	if resp.Text, err = unseal(resp.Text, lookup); err != nil {
		return nil, err
	}
	for i, m := range resp.Messages {
		if resp.Messages[i], err = unseal(m, lookup); err != nil {
			return nil, err
		}
	}
	return &resp.AgentResponse, nil
}

// settle charges what a worker metered of a session to the session's
// budgets (eval.RemoteSpend), and returns the budget error it meets.
func settle(exec *eval.AgentExecution, u eval.Usage, model, refused string) error {
	rs, ok := exec.Meter.(eval.RemoteSpend)
	if !ok {
		return nil
	}
	return rs.Settle(u, model, refused)
}

// agentFailure is the error type of a provider's own failure.
const agentFailure = "aml.agent.failure"

// activityError unwraps an activity's failure to the message its provider
// gave, which is what aml run reports, and the code its worker gave it.
func activityError(err error) error {
	var ae *sdktemporal.ApplicationError
	if errors.As(err, &ae) {
		re := &remoteError{msg: ae.Message()}
		if ae.HasDetails() {
			var f activityFailure
			if ae.Details(&f) == nil {
				re.code, re.prints, re.metered, re.refused = f.Code, f.Prints, f.Metered, f.Refused
				if f.RateLimited {
					// The evaluator runs the session again, as in process.
					return &eval.RateLimitError{RetryAfter: time.Duration(f.RetryAfterMS) * time.Millisecond, Err: re}
				}
			}
		}
		return re
	}
	return err
}

// remoteError is the error a provider returned on a worker, as its
// activity reported it: the message, and the code of Options.ErrorCode.
type remoteError struct {
	msg, code string
	// prints are what the session's tools printed on the worker.
	prints []string
	// metered and refused are what the worker metered of the session
	// and the budget it refused a call for (see AgentReply).
	metered *eval.Usage
	refused string
}

func (e *remoteError) Error() string { return e.msg }

// ErrorCode returns the code the worker gave the error ("" for none).
func (e *remoteError) ErrorCode() string { return e.code }

// RunFailure is the detail of a failed run's error (an ApplicationError
// of type "aml.evaluation"): what aml run reports besides the message.
type RunFailure struct {
	// Backtrace is the Starlark backtrace of the failure, when it arose
	// in Starlark code.
	Backtrace string `json:"backtrace,omitempty"`
	// Code is Options.ErrorCode's code of the error.
	Code string `json:"code,omitempty"`
	// Prints are as RunResult's.
	Prints *PrintPage `json:"prints,omitempty"`
	// Usage is as RunResult's.
	Usage *eval.Usage `json:"usage,omitempty"`
}

// backtraceOf returns the first Starlark backtrace in err's chain,
// searching wrapped and joined errors depth-first, as aml run does.
func backtraceOf(err error) string {
	if err == nil {
		return ""
	}
	if ee, ok := err.(*eval.EvaluationError); ok && ee.Backtrace != "" {
		return ee.Backtrace
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return backtraceOf(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if bt := backtraceOf(e); bt != "" {
				return bt
			}
		}
	}
	return ""
}

// same reports whether a and b are the same provider value, without the
// panic that == gives for values of a type that is not comparable.
func same(a, b any) bool {
	ta := reflect.TypeOf(a)
	if ta == nil || ta != reflect.TypeOf(b) || !ta.Comparable() {
		return false
	}
	return a == b
}
