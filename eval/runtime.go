package eval

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Limits are the per-evaluation safety budgets.
//
// In Go a zero field means "the default" (DefaultLimits), so
// Limits{MaxAgentCalls: 8} changes one budget and keeps the other three.
// Unlimited switches a limit off; any other negative value is rejected by
// New. (The Starlark configure() and the CLI flags keep the original's
// convention, where 0 disables a limit: starlib.SurfaceLimit converts.)
type Limits struct {
	// MaxAgentCalls bounds provider-backed agent sessions per evaluation.
	MaxAgentCalls int
	// MaxConcurrentAgents bounds active agent provider calls.
	MaxConcurrentAgents int
	// MaxDepth bounds nested component/primitive depth; lists and
	// fragments add no depth.
	MaxDepth int
	// MaxTurnsPerAgent bounds the initial prompt plus follow-ups of one
	// agent.
	MaxTurnsPerAgent int
	// MaxSteps bounds the Starlark computation steps of one evaluation,
	// counted across all its Starlark threads (component bodies and
	// callbacks); its default is off, as in the original. The evaluator
	// runs no Starlark itself: the bindings enforce it through TakeSteps.
	MaxSteps int
	// MaxPromptBytes bounds what one agent session sends: its system
	// text, its prompt and its follow-ups, in bytes. A prompt beyond it
	// fails before the provider runs, instead of reaching a model that
	// cannot take it (include() stages a large file for the agent to
	// read).
	MaxPromptBytes int
}

// Unlimited, as the value of a Limits field, switches that limit off.
const Unlimited = -1

// DefaultMaxPromptBytes is the default of Limits.MaxPromptBytes: 4 MiB,
// beyond the context window of the models agents use.
const DefaultMaxPromptBytes = 4 << 20

// DefaultLimits returns the original AML defaults: 32 agent calls, 4
// concurrent agents, depth 16, 16 turns per agent, no step limit; and
// prompts of at most DefaultMaxPromptBytes.
func DefaultLimits() Limits {
	return Limits{MaxAgentCalls: 32, MaxConcurrentAgents: 4, MaxDepth: 16, MaxTurnsPerAgent: 16, MaxSteps: Unlimited, MaxPromptBytes: DefaultMaxPromptBytes}
}

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	for _, f := range []struct{ v, def *int }{
		{&l.MaxAgentCalls, &d.MaxAgentCalls},
		{&l.MaxConcurrentAgents, &d.MaxConcurrentAgents},
		{&l.MaxDepth, &d.MaxDepth},
		{&l.MaxTurnsPerAgent, &d.MaxTurnsPerAgent},
		{&l.MaxSteps, &d.MaxSteps},
		{&l.MaxPromptBytes, &d.MaxPromptBytes},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return l
}

// Validate reports the first field that is neither zero (the default), a
// positive bound nor Unlimited.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxAgentCalls", l.MaxAgentCalls},
		{"MaxConcurrentAgents", l.MaxConcurrentAgents},
		{"MaxDepth", l.MaxDepth},
		{"MaxTurnsPerAgent", l.MaxTurnsPerAgent},
		{"MaxSteps", l.MaxSteps},
		{"MaxPromptBytes", l.MaxPromptBytes},
	} {
		if f.v < 0 && f.v != Unlimited {
			//lint:ignore ST1005 the message begins with the field it names
			return fmt.Errorf("Limits.%s must be 0 (the default), a positive bound, or eval.Unlimited (no limit), got %d", f.name, f.v)
		}
	}
	return nil
}

// StartEvent is delivered to Options.OnStart before the tree evaluates.
type StartEvent struct {
	RunID string
}

// FinishEvent is delivered to Options.OnFinish after cleanup.
type FinishEvent struct {
	RunID string
	// Status is "ok" or "error".
	Status   string
	Err      error
	Duration time.Duration
	// Usage is what the run's agent sessions spent, replayed ones
	// included.
	Usage Usage
}

// Options configure a Runtime. They are copied by New; later changes to
// the caller's struct have no effect.
type Options struct {
	// AgentProvider is the default provider of agent() nodes that name none.
	AgentProvider AgentProvider
	// SandboxProvider is the default provider of outer sandbox() scopes.
	SandboxProvider SandboxProvider
	// Host runs script() outside any sandbox(): trusted execution on the
	// host, through the same SandboxRuntime contract as a sandbox. On the
	// first such script an evaluation acquires one read-write lease rooted
	// at Cwd, and releases it when the evaluation ends. The evaluator runs
	// no process itself: nil makes a host script fail with an error that
	// says so. The local sandbox provider (providers/sandbox/local) is the
	// usual host; starlib and the CLI set it. When Host also has the
	// methods MkdirTemp(prefix string) (string, error) and
	// RemoveAll(dir string) error, the evaluator makes the staging
	// directories of agents outside a sandbox through them (else with
	// os.MkdirTemp and os.RemoveAll).
	Host SandboxProvider
	// WorkspaceProvider is the default provider of the workspace() scope.
	WorkspaceProvider WorkspaceProvider
	// ProviderOverride, when non-nil, replaces the provider selected for
	// every agent() node (the node's provider, else AgentProvider) with
	// the provider it returns, before the provider is checked and called.
	// It receives nil when no provider was selected; returning nil makes
	// the agent fail for want of a provider. Test harnesses use it to swap
	// real providers for deterministic ones and to record requests. It may
	// be called concurrently.
	ProviderOverride func(AgentProvider) AgentProvider
	// SandboxOverride and WorkspaceOverride do for sandbox and workspace
	// providers what ProviderOverride does for agent providers; they
	// receive nil when none was selected.
	SandboxOverride   func(SandboxProvider) SandboxProvider
	WorkspaceOverride func(WorkspaceProvider) WorkspaceProvider
	// System is the first system fragment of every agent.
	System string
	// Cwd is the base directory for application-owned reads and host
	// scripts; "" means the process working directory.
	Cwd string
	// AppFiles, when set, serves the application-owned files that
	// file(src=) and include(src=) read, by their slash-separated paths
	// relative to Cwd, instead of the host directory: workflow code that
	// runs away from the submitter's machine (on Temporal) reads them
	// from the bundle the run carries. Absolute paths and paths that
	// leave Cwd are refused, and so are skill() packages.
	AppFiles fs.FS
	// Limits are the budgets; nil, like a zero field, means the default
	// (see Limits).
	Limits *Limits
	// AllowedTools, when non-nil, lists the exact tool names that may be
	// granted to agents (component code may call any tool).
	AllowedTools []string
	// AllowedMCPServers, when non-nil, lists the exact MCP server names
	// that may be granted.
	AllowedMCPServers []string
	// ToolPrefix names the invocation-owned MCP server that carries tools
	// to bridged providers; "" means "aml".
	ToolPrefix string
	// Trace receives trace events.
	Trace []TraceSink
	// OnTraceError receives trace sink failures; they never fail the run.
	OnTraceError func(error, Event)
	// Ask answers ask() in evaluations without a Journal (a journaled
	// evaluation suspends instead). It may block, and may be called
	// concurrently; the answer is validated against the question's
	// schema. nil makes such an ask() fail.
	Ask func(ctx context.Context, q Question) (any, error)
	// OnStart is called before the tree evaluates; an error aborts the run.
	OnStart func(StartEvent) error
	// OnFinish is called after cleanup with the run's outcome.
	OnFinish func(FinishEvent)
	// Executor runs the evaluations' fan-outs, agent slots, serial turns
	// and agent timeouts; nil is the in-process executor (see Executor).
	Executor Executor
	// ExecutorKeepsScopes says the Executor makes sandbox() and
	// workspace() scopes durable itself (a run on Temporal checkpoints a
	// workspace on the worker that holds it and restores it wherever the
	// scope is acquired again). A journaled evaluation then records and
	// serves effects by identity as with any journal, but takes no
	// checkpoints of its own (the journal need not be a Checkpointer) and
	// accepts providers that keep files of their own or edit their
	// directory in place.
	ExecutorKeepsScopes bool
	// AskLive makes a journaled evaluation's ask() that has no recorded
	// answer and no answer given (EvaluateOptions.Answers) ask through
	// Ask and record the answer, instead of suspending the run (a run on
	// Temporal waits for the answer's signal).
	AskLive bool
	// Budget bounds what the run spends (tokens, cost, model and tool
	// calls, elapsed time); nil or zero bounds nothing. budget() nodes
	// and agent(budget=) add budgets of their own, counted toward it.
	Budget *Budget
	// Prices are the models' prices by name (see PriceOf), from which the
	// cost of a session is counted when its provider reports none.
	Prices map[string]Price
	// RateLimitRetry is how often, and how long, an unmetered session
	// that a rate limit ended (*RateLimitError) is run again; nil is
	// DefaultRateLimitRetry.
	RateLimitRetry *RateLimitRetry
}

// Runtime evaluates AML values. It holds only configuration: every call to
// Evaluate owns a fresh evaluation domain, so one Runtime may serve any
// number of concurrent evaluations.
type Runtime struct {
	opts     Options
	limits   Limits
	includes *includeCache
}

// New returns a Runtime for opts, or an error for invalid limits.
func New(opts Options) (*Runtime, error) {
	var limits Limits
	if opts.Limits != nil {
		limits = *opts.Limits
	}
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	limits = limits.WithDefaults()
	if b := opts.Budget; b != nil {
		if err := b.Validate(); err != nil {
			return nil, err
		}
		c := *b
		opts.Budget = &c
	}
	if r := opts.RateLimitRetry; r != nil {
		if err := r.Validate(); err != nil {
			return nil, err
		}
		c := r.WithDefaults()
		opts.RateLimitRetry = &c
	}
	if opts.Prices != nil {
		prices := make(map[string]Price, len(opts.Prices))
		for k, p := range opts.Prices {
			if err := p.Validate(); err != nil {
				return nil, fmt.Errorf("price of %q: %w", k, err)
			}
			prices[k] = p
		}
		opts.Prices = prices
	}
	opts.Trace = append([]TraceSink(nil), opts.Trace...)
	if opts.AllowedTools != nil {
		opts.AllowedTools = append([]string{}, opts.AllowedTools...)
	}
	if opts.AllowedMCPServers != nil {
		opts.AllowedMCPServers = append([]string{}, opts.AllowedMCPServers...)
	}
	return &Runtime{opts: opts, limits: limits, includes: newIncludeCache()}, nil
}

// Check reports the first rule that the statically visible part of value
// breaks, exactly as Evaluate checks it before anything runs: placement,
// depth, follow-up and turn rules, grants and renderability. It runs
// nothing and calls no provider. What component bodies return is not
// visible before they run (Evaluate checks it when they return). It is
// safe for concurrent use.
func (r *Runtime) Check(value any) error {
	d := &domain{rt: r, limits: r.limits}
	return d.check(value, place{}, 0, Position{})
}

// Limits returns the runtime's effective limits: defaults filled in, and
// Unlimited for a limit that is off.
func (r *Runtime) Limits() Limits { return r.limits }

// EvaluateOptions are per-evaluation options.
type EvaluateOptions struct {
	// RunID names the run; "" generates a random one.
	RunID string
	// Journal, when set, makes the run durable: every effect is recorded
	// in it before its result is used, and effects it already holds are
	// served from it (see Journal and Runtime.Resume).
	Journal Journal
	// Cassette makes the Journal a recording replayed offline (aml
	// test's "# cassette:" directive): only agent sessions and answers
	// are served from it; every other effect runs as it would without a
	// journal, nothing is recorded or checkpointed, and an agent or a
	// question with no recording fails instead of running live.
	Cassette bool
	// RerunChanged, with a Journal, runs a divergent effect and every
	// effect after it live instead of failing with a *DivergenceError.
	RerunChanged bool
	// Answers answer ask() questions by id (see ResumeOptions.Answers).
	Answers map[string]any
	// Reads are the application reads made before the tree evaluates
	// (env() values read while the workflow loaded): with a Journal their
	// digests are recorded, and checked against the recorded ones before
	// anything runs.
	Reads []RecordedRead
	// CommitWindow bounds how long the record of a completed effect that
	// reached outside the process (an agent session that is not
	// InProcess, a script, a tool call from component code, an answer, a
	// workspace or sandbox acquisition) waits before a Journal.Sync makes
	// it durable, whether or not another effect starts: records completed
	// within one window share one Sync. 0 is DefaultCommitWindow (10 ms);
	// a negative window syncs as soon as a goroutine can. Records are
	// also synced before every such effect starts and when the
	// evaluation ends.
	CommitWindow time.Duration
	// verify is Resume's dry replay; findings receives its changes.
	verify   bool
	findings *[]*DivergenceError
	// onChange, reported and withdraw carry what Resume's dry replay
	// found into the live evaluation: the callback, the identities of
	// the changes already reported, and the records of removed effects
	// to withdraw.
	onChange func(*DivergenceError)
	reported []string
	withdraw []*Effect
	// uncheckedReads is ResumeOptions.UncheckedReads.
	uncheckedReads bool
	// SourceRoot, with a Journal, is the directory the files of effect
	// identities are named relative to (the workflow's directory), so
	// that the identities do not depend on how the workflow file was
	// named; "" uses positions as they are.
	SourceRoot string
}

// Evaluate resolves value (a renderable: text, lists, nodes) in a new
// evaluation domain and returns its text. Cancelling ctx cancels the run;
// the returned error then wraps context.Cause(ctx). Evaluate returns only
// after every owned resource was released and every trace event was
// delivered. It is safe to call concurrently.
func (r *Runtime) Evaluate(ctx context.Context, value any, opts ...EvaluateOptions) (string, error) {
	var o EvaluateOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	runID := o.RunID
	if runID == "" {
		runID = NewRunID()
	}
	if max := r.limits.MaxSteps; max > 0 {
		ctx = context.WithValue(ctx, stepKey{}, &stepBudget{max: int64(max)})
	}
	if p, ok := r.opts.Executor.(Pacer); ok && !Paced(ctx) {
		ctx = WithPacer(ctx, p)
	}
	if err := ctx.Err(); err != nil {
		return "", canceled(ctx, Position{})
	}
	started := time.Now()
	d := &domain{rt: r, runID: runID, limits: r.limits, exec: r.opts.Executor}
	if d.exec == nil {
		d.workers = newWorkers(r.limits.MaxConcurrentAgents > 0)
		defer d.workers.close()
	}
	if n := r.limits.MaxConcurrentAgents; n > 0 {
		d.sched = d.newSemaphore(ctx, n)
	}
	d.hostGate = d.newSemaphore(ctx, 1)
	var runBudget Budget
	if b := r.opts.Budget; b != nil {
		runBudget = *b
	}
	d.spend = newSpendScope(nil, runBudget, "the run")
	d.spend.prices = r.opts.Prices
	if runBudget.OnExceed == "ask" {
		d.spend.onExceed = d.askForMore(ctx)
	}
	if w := runBudget.Wall; w > 0 {
		var cancel context.CancelFunc
		ctx, cancel = d.withTimeoutCause(ctx, w, &BudgetError{Budget: "wall_s", Spent: w.Seconds(), Limit: w.Seconds(), Scope: "the run"})
		defer cancel()
	}
	d.trace = newTracer(runID, r.opts.Trace, r.opts.OnTraceError)
	var rootPath *effectPath
	if o.Journal != nil {
		jr := &journaling{j: o.Journal, rerunChanged: o.RerunChanged, answers: o.Answers, verify: o.verify, onChange: o.onChange, uncheckedReads: o.uncheckedReads}
		d.journal = jr
		jr.cassette = o.Cassette
		jr.scopesKept, jr.asksLive = r.opts.ExecutorKeepsScopes, r.opts.AskLive
		if sz, ok := o.Journal.(SizedJournal); ok && sz.Len() == 0 {
			jr.fresh = true
		}
		if l, ok := o.Journal.(ListingJournal); ok && !jr.fresh && !jr.cassette {
			jr.ix = buildIndex(l.Effects())
		}
		if len(o.reported) > 0 {
			jr.reported = map[string]bool{}
			for _, id := range o.reported {
				jr.reported[id] = true
			}
		}
		if !jr.cassette && !jr.verify {
			jr.commit = newCommitter(o.Journal, o.CommitWindow)
		}
		if o.SourceRoot != "" {
			if abs, err := filepath.Abs(o.SourceRoot); err == nil {
				jr.root = abs
			}
		}
		rootPath = &effectPath{jr: jr}
		jr.visit(rootPath)
	}

	var (
		text string
		err  error
	)
	if r.opts.OnStart != nil {
		err = r.opts.OnStart(StartEvent{RunID: runID})
	}
	if err == nil && d.journal != nil {
		if err = d.checkDurable(); err == nil {
			err = d.withdrawRemoved(o.withdraw)
		}
		if err == nil {
			err = d.checkReads(rootPath, o.Reads)
		}
	}
	if err == nil {
		root := d.trace.startSpan("", "evaluation", "run", Position{}, nil, nil)
		text, err = d.evaluate(ctx, value, scope{span: root.ID(), path: rootPath})
		if err == nil {
			rootPath.finish()
		}
		if herr := d.releaseHost(ctx); herr != nil {
			err = errors.Join(err, herr)
		}
		root.end(err, spendAttrs(d.trace, "", "", d.spend), nil)
	}
	if d.journal != nil {
		if o.findings != nil {
			*o.findings = d.journal.findings()
		}
		err = d.endJournal(err)
	}
	d.trace.close()
	if r.opts.OnFinish != nil {
		status := StatusOK
		if err != nil {
			status = StatusError
		}
		r.opts.OnFinish(FinishEvent{RunID: runID, Status: status, Err: err, Duration: time.Since(started), Usage: d.spend.total()})
	}
	if err != nil {
		return "", err
	}
	return text, nil
}

// NewRunID returns a new run identity: a version 7 UUID (RFC 9562), whose
// leading 48 bits are the Unix time in milliseconds, so run ids sort by
// start time in logs and directories.
func NewRunID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// newWorkspaceID returns the identity of a workspace() that names none: a
// random (version 4) UUID, as in the original.
func newWorkspaceID() string {
	return uuid.NewString()
}

// domain is the mutable state of one evaluation.
type domain struct {
	rt     *Runtime
	runID  string
	limits Limits
	// sched bounds concurrent agent sessions; nil admits all at once.
	sched Semaphore
	// exec is Options.Executor; with nil, workers runs the fan-outs'
	// helpers (see fanOut), else workers is nil.
	exec    Executor
	workers *workers
	trace   *tracer
	calls   atomic.Int64
	// spend accounts the run's spend against Options.Budget.
	spend *spendScope
	// journal is the journal state of a durable run, else nil.
	journal *journaling
	// workspaceUsed enforces one workspace() per evaluation.
	workspaceUsed atomic.Bool
	// questions maps the ids ask() was given to where: an id names one
	// question per evaluation.
	qMu       sync.Mutex
	questions map[string]Position

	// host is the evaluation's lease of Options.Host, acquired by the
	// first host script. hostGate (a semaphore of the Executor, so that
	// a branch waiting for the acquisition yields in workflow code)
	// serializes acquisitions; hostMu guards the fields.
	hostGate Semaphore
	hostMu   sync.Mutex
	host     SandboxLease
	hostDone bool
}

// hostRuntime returns the runtime of the evaluation's host lease,
// acquiring it on first use.
func (d *domain) hostRuntime(ctx context.Context) (SandboxRuntime, error) {
	if rt, done := d.heldHost(); rt != nil || done {
		if done {
			return nil, errors.New("the evaluation has ended")
		}
		return rt, nil
	}
	if err := d.hostGate.Acquire(ctx); err != nil {
		return nil, canceled(ctx, Position{})
	}
	defer d.hostGate.Release()
	if rt, done := d.heldHost(); rt != nil || done {
		if done {
			return nil, errors.New("the evaluation has ended")
		}
		return rt, nil
	}
	p := d.rt.opts.Host
	if p == nil {
		return nil, errors.New("no host runtime is configured: run the script inside a sandbox(), or give the runtime a host (eval.Options.Host, for example local.New(local.Options{}) from providers/sandbox/local)")
	}
	dir, err := d.cwd()
	if err != nil {
		return nil, err
	}
	lease, err := p.Acquire(ctx, &SandboxAcquireRequest{Access: ReadWrite, Root: ".", Cwd: ".", EvaluationID: d.runID,
		Workspace: &WorkspaceMaterialization{Directory: dir, Cwd: "."}})
	if err != nil {
		return nil, fmt.Errorf("acquiring the host runtime: %w", err)
	}
	if lease == nil {
		return nil, errors.New("the host provider returned no lease")
	}
	d.hostMu.Lock()
	defer d.hostMu.Unlock()
	if d.hostDone {
		// The evaluation ended while the host was acquired.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
		defer cancel()
		return nil, errors.Join(errors.New("the evaluation has ended"), lease.Release(rctx))
	}
	d.host = lease
	return lease.Runtime(), nil
}

// heldHost returns the runtime of the host lease when it is held, and
// whether the evaluation released it for good.
func (d *domain) heldHost() (SandboxRuntime, bool) {
	d.hostMu.Lock()
	defer d.hostMu.Unlock()
	if d.host != nil {
		return d.host.Runtime(), false
	}
	return nil, d.hostDone
}

// releaseHost releases the host lease, if one was acquired; later
// acquisitions fail.
func (d *domain) releaseHost(ctx context.Context) error {
	d.hostMu.Lock()
	lease := d.host
	d.host, d.hostDone = nil, true
	d.hostMu.Unlock()
	if lease == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		return fmt.Errorf("releasing the host runtime: %w", err)
	}
	return nil
}

// scope is the lexical state inherited by a nested evaluation.
type scope struct {
	// depth is the semantic depth of the enclosing node.
	depth int
	// span is the trace parent.
	span string
	// ctx is the chain of provided context values.
	ctx *binding
	// comps is the chain of components being evaluated around this scope.
	comps *compLink
	// res is the active workspace and sandbox.
	res resScope
	// path is the sequential context of a journaled evaluation (see
	// Journal); nil without a journal.
	path *effectPath
	// target collects the one structured agent result of a structured
	// evaluation; nil for text evaluations. It is not inherited by nested
	// evaluations.
	target *structTarget
}

// structTarget is the state of one evaluate(value, schema=S): the schema
// and the single agent() whose validated result it collects.
type structTarget struct {
	schema  *Schema
	claimed bool
	value   any
}

// countAgentCall enforces max_agent_calls before a provider runs.
func (d *domain) countAgentCall(pos Position) error {
	n := d.calls.Add(1)
	if max := d.limits.MaxAgentCalls; max > 0 && n > int64(max) {
		return limitError(pos, "max_agent_calls", max, fmt.Sprintf("AML evaluation exceeded max_agent_calls %d; raise it with configure(max_agent_calls=N) or --max-agent-calls N (0 disables the limit)", max))
	}
	return nil
}

// errDetached is returned by component capabilities used after the
// component returned.
var errDetached = errors.New("evaluate() is only available while an AML component is active")

// stepKey carries an evaluation's step budget in its context.
type stepKey struct{}

// stepBudget is the max_steps budget of one evaluation, shared by all
// its threads.
type stepBudget struct {
	max  int64
	used atomic.Int64
}

// exceeded is the error of a step budget that ran out.
func (b *stepBudget) exceeded() *LimitError {
	return &LimitError{Limit: "max_steps", Max: int(b.max), Msg: fmt.Sprintf("AML evaluation exceeded max_steps %d (Starlark computation steps across the evaluation); make the loop end sooner, or raise the limit with configure(max_steps=N) or --max-steps N (0 disables the limit)", b.max)}
}

// TakeSteps charges n Starlark computation steps to the evaluation of ctx
// (the context the evaluator hands to component bodies, providers and
// tools) and reports the max_steps error once the evaluation's steps
// exceed Limits.MaxSteps. Without a step limit it does nothing. It is
// safe for concurrent use: every thread of an evaluation charges the same
// budget.
//
// Under an Executor that paces computation (Pacer), TakeSteps also pauses
// the computation once every PaceSteps steps of the evaluation, and
// reports the cause of ctx once ctx is done, so that the thread stops at
// a step count that a replay reaches again.
func TakeSteps(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	if b, _ := ctx.Value(stepKey{}).(*stepBudget); b != nil {
		if used := b.used.Add(int64(n)); used > b.max {
			return b.exceeded()
		}
	}
	if p, _ := ctx.Value(paceKey{}).(*pacing); p != nil {
		if p.since += int64(n); p.since >= p.p.PaceSteps() {
			p.since = 0
			if err := p.p.Pace(ctx); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	return nil
}

// StepsExceeded returns the *LimitError of the evaluation of ctx once its
// Starlark steps exceeded Limits.MaxSteps, else nil: a thread that
// TakeSteps stopped reports its cancellation as text, and this recovers
// the typed cause. It is safe for concurrent use.
func StepsExceeded(ctx context.Context) error {
	if b, _ := ctx.Value(stepKey{}).(*stepBudget); b != nil && b.used.Load() > b.max {
		return b.exceeded()
	}
	return nil
}
