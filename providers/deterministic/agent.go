// Package deterministic provides credential-free providers for tests,
// examples and golden files. The agent provider answers every session with
// a caller-supplied function (by default it echoes the initial prompt) and
// records every call so tests can assert on the exact requests the
// evaluator produced.
package deterministic

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aml-go/aml/eval"
)

// DefaultName is the name of an Agent whose options name none.
const DefaultName = "deterministic"

// RespondFunc computes the response of one session. callIndex is the
// zero-based index of the call on this provider. It may be called from
// several goroutines at once.
type RespondFunc func(ctx context.Context, req *eval.AgentRequest, callIndex int) (*eval.AgentResponse, error)

// Options configure an Agent.
type Options struct {
	// Name is the provider name; "" means DefaultName. It must equal its
	// trimmed form.
	Name string
	// Respond computes responses; nil echoes the initial prompt.
	Respond RespondFunc
	// SupportsSandbox makes the provider accept an active sandbox.
	SupportsSandbox bool
	// Usage, when set, computes what each session reports it spent
	// (AgentResponse.Spent), so that budgets can be exercised offline; a
	// response that already reports usage keeps it.
	Usage UsageFunc
	// ReportsCost says that the usage reports carry their cost (cost_usd),
	// so that cost budgets need no price for the model
	// (eval.CostReporter).
	ReportsCost bool
}

// UsageFunc computes the usage one session reports. It may be called from
// several goroutines at once.
type UsageFunc func(ctx context.Context, req *eval.AgentRequest, callIndex int) (eval.Usage, error)

// Call is one recorded session.
type Call struct {
	// Index is the zero-based call index on the provider.
	Index int
	// Request is a copy of the request the evaluator sent.
	Request eval.AgentRequest
	// Exec is the execution context of the call.
	Exec eval.AgentExecution
}

// Agent is a deterministic eval.AgentProvider. It is safe for concurrent
// use.
type Agent struct {
	name            string
	respond         RespondFunc
	supportsSandbox bool
	usage           UsageFunc
	reportsCost     bool

	mu sync.Mutex
	// calls are recorded in fixed-size chunks, so a long run never copies
	// the calls it already recorded.
	calls [][]record
	n     int
	// common is the shared part of the last compact record.
	common *common
}

// record is the stored form of a call. Most calls carry a prompt and
// where they come from, with the run, permissions and tool server of the
// calls before them (kept once, in common); only a call with more keeps a
// whole Call (five times the size otherwise).
type record struct {
	prompt string
	source eval.Position
	common *common
	full   *Call
}

// common is what consecutive calls usually share.
type common struct {
	runID       string
	trace       eval.TraceEmitter
	permissions eval.Permissions
	toolServer  string
}

func newCommon(c common) *common { return &c }

// newRecord stores call idx; a.mu is held.
func (a *Agent) newRecord(idx int, req *eval.AgentRequest, exec *eval.AgentExecution) record {
	if exec != nil && exec.SpanID == "" && exec.ParentSpanID == "" && exec.Sandbox == nil &&
		len(req.FollowUps) == 0 && req.System == "" && req.Model == "" && req.Name == "" && len(req.Tools) == 0 &&
		len(req.MCPServers) == 0 && len(req.Skills) == 0 && req.Output == nil {
		c := common{runID: exec.RunID, trace: exec.Trace, permissions: req.Permissions, toolServer: req.ToolServer}
		if a.common == nil || *a.common != c {
			a.common = newCommon(c)
		}
		return record{prompt: req.Prompt, source: exec.Source, common: a.common}
	}
	c := &Call{Index: idx, Request: *req}
	if len(req.FollowUps) > 0 {
		c.Request.FollowUps = append([]string(nil), req.FollowUps...)
	}
	if exec != nil {
		c.Exec = *exec
	}
	return record{full: c}
}

// call returns the recorded call idx.
func (r *record) call(idx int) Call {
	if r.full != nil {
		return *r.full
	}
	c := r.common
	return Call{
		Index:   idx,
		Request: eval.AgentRequest{Prompt: r.prompt, Permissions: c.permissions, ToolServer: c.toolServer},
		Exec:    eval.AgentExecution{RunID: c.runID, Source: r.source, Trace: c.trace},
	}
}

// callChunk is the number of calls per recording chunk.
const callChunk = 1024

// New returns an Agent for opts, or an error for an invalid name.
func New(opts Options) (*Agent, error) {
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	if err := checkName("agent", name); err != nil {
		return nil, err
	}
	return &Agent{name: name, respond: opts.Respond, supportsSandbox: opts.SupportsSandbox, usage: opts.Usage, reportsCost: opts.ReportsCost}, nil
}

// Echo returns the default responder: the response text is the initial
// prompt.
func Echo() RespondFunc {
	return func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		return &eval.AgentResponse{Text: req.Prompt}, nil
	}
}

// Name implements eval.AgentProvider.
func (a *Agent) Name() string { return a.name }

// InProcess implements eval.InProcess: responses are computed in the
// process, so journaled runs need not sync before calling the provider.
func (a *Agent) InProcess() bool { return true }

// SupportsSandbox implements eval.SandboxCompatible: the provider accepts
// an enclosing sandbox when its options say so. Nothing runs in the
// sandbox; the session is recorded with the call.
func (a *Agent) SupportsSandbox(*eval.SandboxSession) bool { return a.supportsSandbox }

// Run records the call and answers it. A context that is already done is
// rejected with its cause before anything is recorded.
func (a *Agent) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	a.mu.Lock()
	idx := a.n
	a.n++
	if idx%callChunk == 0 {
		a.calls = append(a.calls, make([]record, 0, callChunk))
	}
	chunk := &a.calls[len(a.calls)-1]
	*chunk = append(*chunk, a.newRecord(idx, req, exec))
	a.mu.Unlock()

	respond := a.respond
	if respond == nil {
		if req.Output != nil {
			return nil, fmt.Errorf("deterministic agent %q has no respond function, and echoing the prompt cannot produce the structured result this agent asks for (schema=); give it respond= returning {\"structured\": value}", a.name)
		}
		respond = Echo()
	}
	resp, err := respond(ctx, req, idx)
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("deterministic respond returned no response")
	}
	if req.Output != nil && resp.Structured == nil {
		return nil, fmt.Errorf("deterministic agent %q: respond returned no structured value, but this agent asks for one (schema=); return {\"structured\": value} (with \"text\" if you want text too)", a.name)
	}
	if a.usage != nil && resp.Usage == "" && resp.Spent == nil {
		u, err := a.usage(ctx, req, idx)
		if err != nil {
			return nil, err
		}
		u.CostReported = u.CostReported || a.reportsCost
		resp.Spent = &u
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return resp, nil
}

// ReportsCost implements eval.CostReporter.
func (a *Agent) ReportsCost() bool { return a.reportsCost }

// Calls returns a copy of the recorded calls in the order they started.
func (a *Agent) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Call, 0, a.n)
	for _, chunk := range a.calls {
		for i := range chunk {
			out = append(out, chunk[i].call(len(out)))
		}
	}
	return out
}

// Reset forgets the recorded calls and restarts call indexes at zero.
func (a *Agent) Reset() {
	a.mu.Lock()
	a.calls, a.n, a.common = nil, 0, nil
	a.mu.Unlock()
}
