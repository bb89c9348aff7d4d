package temporal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
	"github.com/aml-go/aml/internal/redact"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
)

// Options configure the workflow and activities that Register registers.
// Every worker of a task queue must be given the same Extensions.
type Options struct {
	// Extensions are the provider families workflows may use
	// (acp_agent(), s3_workspace(), …), as starlib.LoadOptions.Extensions:
	// workflow code loads the bundle with them, and so does a worker that
	// runs a session with a provider the workflow made.
	Extensions []*starlib.Extension
	// Env looks up the variables env() reads when a worker loads a bundle
	// to make a provider (so credentials come from the worker's
	// environment, never from the submitter's); nil uses os.LookupEnv.
	Env func(name string) (string, bool)
	// Agents are Go agent providers of an embedder, by the name the
	// workflow's provider has (eval.AgentProvider.Name), for sessions
	// whose provider the workflow did not make with a factory.
	Agents map[string]eval.AgentProvider
	// DefaultAgent runs sessions whose workflow configured no provider;
	// nil refuses them.
	DefaultAgent eval.AgentProvider
	// EnvKey seals the env() values that history records (every worker
	// of a task queue must have the same); nil uses a fixed key, which
	// hides nothing from someone who has this package.
	EnvKey []byte
	// Sandboxes and Workspaces are Go sandbox and workspace providers of
	// an embedder, by name, for scopes whose provider the workflow did
	// not make with a factory.
	Sandboxes  map[string]eval.SandboxProvider
	Workspaces map[string]eval.WorkspaceProvider
	// Host runs script() outside any sandbox, in the submitter's
	// directory (RunInput.Cwd; a private directory per run when the run
	// names none); nil uses starlib.DefaultHost().
	Host eval.SandboxProvider
	// Checkpoints is where workspaces are checkpointed after every effect
	// that can write, so that a workspace whose worker died is restored
	// on another (every worker of a task queue must use the same store,
	// usually the blob store); nil takes no checkpoints, and such a
	// workspace is acquired again as its provider has it.
	Checkpoints persist.Storage
	// Client is the client a worker relays the calls of tools that
	// component bodies define with (to the workflow that defined them);
	// nil makes such calls fail with an error that says so.
	Client client.Client
	// ErrorCode gives an error its machine-readable code (aml run
	// --json's "code"), where the error arises: on the worker for a
	// provider's, in workflow code for the run's; RunError.Code carries
	// it to the submitter. An error that came from an activity
	// implements ErrorCode() string with the code its worker gave it.
	// nil gives no codes.
	ErrorCode func(error) string
}

// Register registers the AML workflow (WorkflowName) and activities
// (AgentActivity) on r (a worker.Worker, or the SDK's test environment),
// so that a Go service that already runs Temporal workers adds AML runs to
// them.
//
// The worker must be a session worker (worker.Options.EnableSessionWorker)
// for runs with sandbox(), workspace() or script(): their leases are held
// in Temporal sessions. The returned Leases are the leases runs hold on
// this worker; release them when the worker stops.
func Register(r worker.Registry, opts Options) *WorkerLeases {
	RegisterWorkflow(r, opts)
	a := &activities{opts: opts, loaded: map[string]*loadedBundle{}, leases: &WorkerLeases{}}
	r.RegisterActivityWithOptions(a.agent, activity.RegisterOptions{Name: AgentActivity})
	r.RegisterActivityWithOptions(a.acquire, activity.RegisterOptions{Name: AcquireActivity})
	r.RegisterActivityWithOptions(a.exec, activity.RegisterOptions{Name: ExecActivity})
	r.RegisterActivityWithOptions(a.file, activity.RegisterOptions{Name: FileActivity})
	r.RegisterActivityWithOptions(a.save, activity.RegisterOptions{Name: SaveActivity})
	r.RegisterActivityWithOptions(a.release, activity.RegisterOptions{Name: ReleaseActivity})
	return a.leases
}

// RegisterWorkflow registers the AML workflow alone: on a
// worker.WorkflowReplayer that replays a recorded history, say.
func RegisterWorkflow(r worker.WorkflowRegistry, opts Options) {
	wf := &workflows{extensions: opts.Extensions, env: opts.Env, envKey: opts.EnvKey, errorCode: opts.ErrorCode, defaultAgent: opts.DefaultAgent != nil}
	r.RegisterWorkflowWithOptions(wf.run, workflow.RegisterOptions{Name: WorkflowName})
}

// activities run the effects of AML runs on a worker. They are safe for
// concurrent use: Temporal runs many activities at once.
type activities struct {
	opts Options

	mu     sync.Mutex
	loaded map[string]*loadedBundle // by bundle digest

	leases *WorkerLeases
}

// loadedBundle is a bundle loaded once on this worker: its providers.
type loadedBundle struct {
	once       sync.Once
	providers  []eval.AgentProvider
	tools      []*eval.Tool
	servers    []*eval.MCPServer
	sandboxes  []eval.SandboxProvider
	workspaces []eval.WorkspaceProvider
	err        error
}

// maxLoaded bounds the bundles a worker keeps loaded.
const maxLoaded = 64

// load returns b loaded on this worker (its providers and tools), loading
// it once.
func (a *activities) load(b *Bundle, dir string) (*loadedBundle, error) {
	// The providers' relative paths resolve from the submitter's
	// directory, so the same bundle from another is loaded apart.
	digest := b.Digest() + "\x00" + dir
	a.mu.Lock()
	lb := a.loaded[digest]
	if lb == nil {
		if len(a.loaded) >= maxLoaded {
			clear(a.loaded)
		}
		lb = &loadedBundle{}
		a.loaded[digest] = lb
	}
	a.mu.Unlock()
	lb.once.Do(func() {
		if lb.err = b.Verify(); lb.err != nil {
			return
		}
		w, err := starlib.LoadFile(b.Entry, starlib.LoadOptions{FS: b.FS(), Extensions: a.opts.Extensions, Env: a.opts.Env, Dir: dir, Print: func(string) {}})
		if err != nil {
			lb.err = fmt.Errorf("this worker cannot load the workflow: %w", err)
			return
		}
		lb.providers, lb.tools, lb.servers = w.AgentProviders(), w.Tools(), w.MCPServers()
		lb.sandboxes, lb.workspaces = w.SandboxProviders(), w.WorkspaceProviders()
	})
	return lb, lb.err
}

// provider finds the provider of call on this worker.
func (a *activities) provider(call AgentCall) (eval.AgentProvider, error) {
	if call.ProviderIndex >= 0 && call.Bundle != nil {
		lb, err := a.load(call.Bundle, call.Cwd)
		if err != nil {
			return nil, err
		}
		ps := lb.providers
		if call.ProviderIndex >= len(ps) || ps[call.ProviderIndex].Name() != call.Provider {
			return nil, fmt.Errorf("loaded on this worker, the workflow does not make provider %q as its provider #%d (does its top level depend on env() values that differ here?)", call.Provider, call.ProviderIndex)
		}
		return ps[call.ProviderIndex], nil
	}
	if call.Factory != nil {
		p, err := a.make(call.Factory, call.Cwd)
		if err != nil {
			return nil, err
		}
		ap, ok := p.(eval.AgentProvider)
		if !ok {
			return nil, fmt.Errorf("%s: %s() makes no agent provider", call.Factory.Pos, call.Factory.Builtin)
		}
		return ap, nil
	}
	if p := a.opts.Agents[call.Provider]; p != nil {
		return p, nil
	}
	if call.Provider == "" && a.opts.DefaultAgent != nil {
		return a.opts.DefaultAgent, nil
	}
	if call.Provider == "" {
		return nil, errors.New("the workflow configured no agent provider and this worker has no default one")
	}
	return nil, fmt.Errorf("this worker has no agent provider %q: it is a Go provider, which cannot travel with a run; give every worker one of that name (temporal.Options.Agents)", call.Provider)
}

// make makes, with this worker's environment, a provider that a
// component body made while the run evaluated, from its factory call;
// its relative paths resolve from dir, the submitter's directory.
func (a *activities) make(fc *starlib.FactoryCall, dir string) (any, error) {
	open, _ := a.opener()
	fc, err := openFactory(fc, open)
	if err != nil {
		return nil, err
	}
	return starlib.MakeProvider(fc, starlib.LoadOptions{Extensions: a.opts.Extensions, Env: a.opts.Env, Dir: dir, Print: func(string) {}})
}

// tools grants the tools of call as this worker defines them when it
// loads the bundle: a model's call runs the tool's execute function here.
func (a *activities) tools(ctx context.Context, call AgentCall) ([]*eval.AgentTool, error) {
	var lb *loadedBundle
	if call.Bundle != nil {
		var err error
		if lb, err = a.load(call.Bundle, call.Cwd); err != nil {
			return nil, err
		}
	}
	out := make([]*eval.AgentTool, len(call.Tools))
	var seq atomic.Int64
	for i, ref := range call.Tools {
		if ref.Remote {
			out[i] = remoteTool(ctx, a.opts.Client, ref, call.ToolSession, &seq)
			continue
		}
		if lb == nil {
			return nil, errors.New("a session with granted tools came without the workflow's bundle")
		}
		if ref.Index < 0 || ref.Index >= len(lb.tools) || lb.tools[ref.Index].Name() != ref.Name {
			return nil, fmt.Errorf("loaded on this worker, the workflow does not define tool %q as its tool #%d (does its top level depend on env() values that differ here?)", ref.Name, ref.Index)
		}
		out[i] = eval.NewAgentTool(lb.tools[ref.Index])
	}
	return out, nil
}

// mcpServers grants the MCP servers of call as this worker defines them
// when it loads the bundle (their transports made with its environment).
func (a *activities) mcpServers(call AgentCall, open func(string) (string, error)) ([]eval.AgentMCPServer, error) {
	out := make([]eval.AgentMCPServer, len(call.MCPServers))
	for i, ref := range call.MCPServers {
		out[i].Name = ref.Name
		if ref.Server != nil {
			// Defined in a component body: the descriptor travelled.
			m, err := openServer(ref.Server, open)
			if err != nil {
				return nil, err
			}
			out[i].Server = m
			continue
		}
		if ref.Index < 0 {
			continue // a server of the provider's own, by name
		}
		if call.Bundle == nil {
			return nil, errors.New("a session with granted MCP servers came without the workflow's bundle")
		}
		lb, err := a.load(call.Bundle, call.Cwd)
		if err != nil {
			return nil, err
		}
		if ref.Index >= len(lb.servers) || lb.servers[ref.Index].Name != ref.Name {
			return nil, fmt.Errorf("loaded on this worker, the workflow does not define MCP server #%d (%q)", ref.Index, ref.Name)
		}
		out[i].Server = lb.servers[ref.Index]
	}
	return out, nil
}

// openServer fills the env() tokens of a travelled MCP server descriptor
// with this worker's values.
func openServer(m *eval.MCPServer, open func(string) (string, error)) (*eval.MCPServer, error) {
	t := m.Transport
	out := &eval.MCPServer{Name: m.Name, Transport: eval.MCPTransport{Type: t.Type}}
	var err error
	fill := func(dst *string, v string) {
		if err == nil {
			*dst, err = open(v)
		}
	}
	fill(&out.Transport.Command, t.Command)
	fill(&out.Transport.Cwd, t.Cwd)
	fill(&out.Transport.URL, t.URL)
	out.Transport.Args = make([]string, len(t.Args))
	for i, a := range t.Args {
		fill(&out.Transport.Args[i], a)
	}
	for _, kv := range []struct{ from, to *map[string]string }{{&t.Env, &out.Transport.Env}, {&t.Headers, &out.Transport.Headers}} {
		if *kv.from != nil {
			*kv.to = map[string]string{}
			for k, v := range *kv.from {
				var s string
				fill(&s, v)
				(*kv.to)[k] = s
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// agent is AgentActivity: one agent() session. It heartbeats every
// HeartbeatInterval while the provider works, so that a worker that dies
// is noticed within HeartbeatTimeout.
func (a *activities) agent(ctx context.Context, call AgentCall) (*AgentReply, error) {
	// What the session's tools print here goes back with its outcome.
	prints := &printCollector{}
	reply, seal, err := a.runAgent(starlib.WithPrint(ctx, prints.print), call)
	lines := prints.take()
	if seal != nil {
		for i, l := range lines {
			lines[i] = seal.seal(l)
		}
	}
	if err != nil {
		var ae *sdktemporal.ApplicationError
		if len(lines) > 0 && errors.As(err, &ae) {
			var f activityFailure
			if ae.HasDetails() {
				_ = ae.Details(&f)
			}
			f.Prints = lines
			return nil, sdktemporal.NewNonRetryableApplicationError(ae.Message(), ae.Type(), nil, f)
		}
		return nil, err
	}
	reply.Prints = lines
	return reply, nil
}

// AgentReply is what AgentActivity returns: the session's response, and
// the lines its tools printed on the worker (print()).
type AgentReply struct {
	eval.AgentResponse
	Prints []string `json:"prints,omitempty"`
	// Metered, for a session the worker metered (AgentCall.Meter), is
	// what it counted; Refused names the budget of the first call it
	// refused, or is "".
	Metered *eval.Usage `json:"metered,omitempty"`
	Refused string      `json:"refused,omitempty"`
}

// runAgent runs the session of call; the sealer it returns holds this
// worker's env() values that the session used.
func (a *activities) runAgent(ctx context.Context, call AgentCall) (*AgentReply, *sealer, error) {
	p, err := a.provider(call)
	if err != nil {
		return nil, nil, a.fail(err, nil, agentFailure)
	}
	// Put this worker's env() values where the workflow left tokens, and
	// take them out again of what goes back into history.
	lookup := a.opts.Env
	if lookup == nil {
		lookup = os.LookupEnv
	}
	seal := &sealer{}
	open := func(s string) (string, error) {
		return unseal(s, func(name string) (string, bool) {
			v, ok := lookup(name)
			if ok {
				seal.add(name, v)
			}
			return v, ok
		})
	}
	req := &eval.AgentRequest{Model: call.Model, Name: call.Name, Permissions: call.Permissions, ToolServer: call.ToolServer}
	var uerr error
	if req.Prompt, uerr = open(call.Prompt); uerr == nil {
		req.System, uerr = open(call.System)
	}
	for _, f := range call.FollowUps {
		if uerr == nil {
			var t string
			t, uerr = open(f)
			req.FollowUps = append(req.FollowUps, t)
		}
	}
	if uerr != nil {
		return nil, nil, a.fail(uerr, nil, agentFailure)
	}
	req.Skills = call.Skills
	if call.Staging != nil {
		// What was staged for the agent, staged again here.
		dir, rename, err := restage(call.Staging)
		if err != nil {
			return nil, nil, a.fail(fmt.Errorf("staging the agent's files on this worker: %w", err), nil, agentFailure)
		}
		defer os.RemoveAll(dir)
		req.Prompt, req.System, req.Skills = rename(req.Prompt), rename(req.System), renameSkills(call.Skills, rename)
		for i := range req.FollowUps {
			req.FollowUps[i] = rename(req.FollowUps[i])
		}
	}
	if len(call.Tools) > 0 {
		tools, err := a.tools(ctx, call)
		if err != nil {
			return nil, nil, a.fail(err, nil, agentFailure)
		}
		req.Tools = tools
	}
	if len(call.MCPServers) > 0 {
		servers, err := a.mcpServers(call, open)
		if err != nil {
			return nil, nil, a.fail(err, nil, agentFailure)
		}
		req.MCPServers = servers
	}
	if call.OutputSchema != nil {
		req.Output = &eval.OutputRequest{JSONSchema: call.OutputSchema}
	}
	exec := &eval.AgentExecution{RunID: call.RunID, WorkingDirectory: call.Cwd}
	if ref := call.Sandbox; ref != nil {
		h, err := a.leases.get(ref.Key)
		if err != nil {
			return nil, nil, a.fail(err, nil, agentFailure)
		}
		rt, err := h.runtime()
		if err != nil {
			return nil, nil, a.fail(err, nil, agentFailure)
		}
		exec.Sandbox = &eval.SandboxSession{Lease: h.sandbox, Runtime: rt, Access: ref.Access, Root: ref.Root, Cwd: ref.Cwd}
		if sc, ok := p.(eval.SandboxCompatible); !ok || !sc.SupportsSandbox(exec.Sandbox) {
			err := fmt.Errorf("%s: agent provider %q cannot run inside sandbox(): it does not accept the sandbox's runtime; use a provider that supports sandboxes or move the agent out of the sandbox", call.Source, p.Name())
			return nil, nil, a.fail(err, nil, agentFailure)
		}
	}
	var meter *eval.LocalMeter
	if m := call.Meter; m != nil {
		if mp, ok := p.(eval.MeteredProvider); ok && mp.Meters(req, exec.Sandbox) {
			// Metered here, against what the run's budgets had left: the
			// model gateway's calls, and the calls of the tools this
			// worker runs (the workflow counts the tools it runs).
			meter = eval.NewLocalMeter(m.Left, m.Prices, "the run")
			exec.Meter = meter
			if len(m.RateLimits) > 0 {
				// The run's rate limits, shared by its sessions on this
				// worker (each worker holds its own).
				g, err := gateway.Shared()
				if err != nil {
					return nil, nil, a.fail(err, nil, agentFailure)
				}
				leave, err := g.JoinGroup(call.RunID, m.RateLimits)
				if err != nil {
					return nil, nil, a.fail(err, nil, agentFailure)
				}
				defer leave()
			}
			for i, ref := range call.Tools {
				if !ref.Remote && i < len(req.Tools) {
					req.Tools[i] = req.Tools[i].Gated(meter.ReserveTool)
				}
			}
		}
	}
	stop := heartbeat(ctx)
	resp, err := p.Run(ctx, req, exec)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, seal, err
		}
		if meter != nil {
			u := meter.Spent()
			return nil, seal, a.failSpent(err, seal, agentFailure, &u, meter.Refused())
		}
		return nil, seal, a.fail(err, seal, agentFailure)
	}
	if resp == nil {
		return nil, seal, a.fail(errors.New("provider returned no response"), nil, agentFailure)
	}
	out := &AgentReply{AgentResponse: *resp}
	if meter != nil {
		u := meter.Spent()
		out.Metered, out.Refused = &u, meter.Refused()
	}
	out.Text = seal.seal(resp.Text)
	out.Messages = make([]string, len(resp.Messages))
	for i, m := range resp.Messages {
		out.Messages[i] = seal.seal(m)
	}
	return out, seal, nil
}

// fail makes a provider's error the failure of an activity, which is not
// retried: its message (redacted of the worker's env() values in seal)
// and, as its detail, the code Options.ErrorCode gives it, so that
// workflow code reports it as aml run reports the provider's own error.
func (a *activities) fail(err error, seal *sealer, kind string) error {
	return a.failSpent(err, seal, kind, nil, "")
}

// failSpent is fail for a session the worker metered: the failure
// carries what it spent and the budget that refused a call (AgentReply).
func (a *activities) failSpent(err error, seal *sealer, kind string, spent *eval.Usage, refused string) error {
	msg := err.Error()
	if seal != nil {
		msg = redact.New(seal.values...).String(msg)
	}
	f := activityFailure{Metered: spent, Refused: refused}
	var rl *eval.RateLimitError
	if errors.As(err, &rl) {
		f.RateLimited, f.RetryAfterMS = true, rl.RetryAfter.Milliseconds()
	}
	if a.opts.ErrorCode != nil {
		f.Code = a.opts.ErrorCode(err)
	}
	return sdktemporal.NewNonRetryableApplicationError(msg, kind, nil, f)
}

// activityFailure is the detail of an activity's failure: the code of
// its error, and the lines the session's tools printed on the worker.
type activityFailure struct {
	Code   string   `json:"code,omitempty"`
	Prints []string `json:"prints,omitempty"`
	// Metered and Refused are AgentReply's, for a metered session.
	Metered *eval.Usage `json:"metered,omitempty"`
	Refused string      `json:"refused,omitempty"`
	// RateLimited says a model's rate limit ended the session
	// (eval.RateLimitError), which workflow code then runs again;
	// RetryAfterMS is when the limit said to come back.
	RateLimited  bool  `json:"rateLimited,omitempty"`
	RetryAfterMS int64 `json:"retryAfterMs,omitempty"`
}

// heartbeat records a heartbeat every HeartbeatInterval until the
// returned function is called. The first is not sent at once: a heartbeat
// costs the service a write, and a session shorter than the interval
// needs none (its start and completion are what Temporal watches).
func heartbeat(ctx context.Context) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
