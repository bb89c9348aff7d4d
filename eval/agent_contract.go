package eval

import (
	"context"
	"fmt"
)

// AgentProvider runs one authored agent() session. It is the minimal
// contract: a name and Run. Optional capabilities are separate interfaces
// a provider may also implement (SessionProvider for retained sessions with
// per-turn tracing, SandboxCompatible for the sandbox handshake).
//
// Run is called once per agent() node, from any goroutine, possibly
// concurrently for different nodes: implementations must be safe for
// concurrent use.
type AgentProvider interface {
	// Name is the provider's normalized name (used in traces and errors).
	Name() string
	// Run executes the initial prompt and then every follow-up in one
	// session and returns the final turn's response. It must return
	// promptly with an error wrapping context.Cause(ctx) once ctx is done,
	// and release every resource it acquired before returning.
	Run(ctx context.Context, req *AgentRequest, exec *AgentExecution) (*AgentResponse, error)
}

// AgentSession is one retained provider session.
//
// The evaluator calls RunTurn sequentially (never concurrently) and then
// Close exactly once, also after a failed turn or cancellation.
type AgentSession interface {
	// RunTurn sends one turn (the initial prompt or a follow-up).
	RunTurn(ctx context.Context, turn AgentTurn) (*AgentResponse, error)
	// Close ends the session and releases its resources.
	Close(ctx context.Context) error
}

// AgentTurn is one turn of a retained session.
type AgentTurn struct {
	// Index is 1-based.
	Index int
	// Kind is "initial" or "follow-up".
	Kind string
	// Text is the turn's prompt.
	Text string
	// Final reports whether this is the last authored turn.
	Final bool
}

// AgentRequest is the fully resolved plan of one agent() node.
// Providers must treat it as read-only.
type AgentRequest struct {
	// Prompt is the trimmed initial prompt.
	Prompt string
	// FollowUps are the trimmed later turns in authored order.
	FollowUps []string
	// System is the system text: runtime system, the agent's system=,
	// then system() children, non-empty fragments joined with "\n".
	System string
	// Model is the requested model, or "" for the provider default.
	Model string
	// Name is the agent's diagnostic name, or "".
	Name string
	// Permissions are the requested native controls.
	Permissions Permissions
	// Tools are the granted tools, in authored order.
	Tools []*AgentTool
	// MCPServers are the granted MCP servers, in authored order.
	MCPServers []AgentMCPServer
	// Skills are the staged skills, in authored order.
	Skills []AgentSkill
	// Output requests structured output, or is nil.
	Output *OutputRequest
	// ToolServer is the name of the invocation-owned MCP server through
	// which a bridging provider exposes Tools (and the structured-output
	// submission) to the agent: the runtime's ToolPrefix, "aml" by
	// default (see ToolServerName).
	ToolServer string
}

// Turns returns the turns of the session the request asks for, in order:
// the initial prompt (kind "initial", index 1) and each follow-up (kind
// "follow-up"); the last is Final. The evaluator drives a SessionProvider
// through exactly these turns.
func (r *AgentRequest) Turns() []AgentTurn {
	turns := make([]AgentTurn, 0, 1+len(r.FollowUps))
	turns = append(turns, AgentTurn{Index: 1, Kind: "initial", Text: r.Prompt})
	for i, f := range r.FollowUps {
		turns = append(turns, AgentTurn{Index: i + 2, Kind: "follow-up", Text: f})
	}
	turns[len(turns)-1].Final = true
	return turns
}

// defaultToolServer names the tool bridge's MCP server when the runtime
// sets no ToolPrefix.
const defaultToolServer = "aml"

// ToolServerName returns the name of the tool bridge's MCP server for
// this request: ToolServer, else "aml".
func (r *AgentRequest) ToolServerName() string {
	if r.ToolServer != "" {
		return r.ToolServer
	}
	return defaultToolServer
}

// CheckToolServer reports an MCP server named like the tool bridge's
// server when the request needs the bridge (it has tools or asks for a
// structured result): the agent could not tell the two apart. The
// evaluator applies this rule to each agent() before it runs; a provider
// that bridges tools applies it to the requests it receives.
func (r *AgentRequest) CheckToolServer() error {
	if len(r.Tools) == 0 && r.Output == nil {
		return nil
	}
	for _, m := range r.MCPServers {
		if m.Name == r.ToolServerName() {
			return toolServerClash(m.Name)
		}
	}
	return nil
}

func toolServerClash(name string) error {
	return fmt.Errorf("mcp() server %q collides with the tool bridge's server name %q used for this agent's tool() grants; rename the server or set a different tool prefix", name, name)
}

// OutputRequest asks a provider for a structured result that satisfies
// JSONSchema (a JSON Schema document decoded into Go values).
type OutputRequest struct {
	JSONSchema map[string]any
	// schema is the compiled JSONSchema of a request the evaluator made.
	schema *Schema
}

// Validate checks a candidate result against the schema with the
// evaluator's own validator, so that a provider accepts exactly what the
// evaluator will. A request the evaluator made carries its compiled
// schema; one built by hand (in tests) is compiled on each call.
func (o *OutputRequest) Validate(v any) error {
	s := o.schema
	if s == nil {
		var err error
		if s, err = NewSchema(o.JSONSchema); err != nil {
			return err
		}
	}
	return s.Validate(v)
}

// AgentResponse is what a provider returns for a session.
type AgentResponse struct {
	// Text is the final turn's complete text.
	Text string
	// Structured is the structured result when one was requested.
	Structured any
	// Messages are the final turn's assistant messages when the provider
	// knows their boundaries.
	Messages []string
	// SessionID, StopReason and Usage describe the turn for tracing when
	// the provider knows them (ACP providers do); they become the
	// agent.turn span's sessionId, stopReason and usage attributes.
	// Usage is a serialized JSON object or "".
	SessionID  string
	StopReason string
	Usage      string
	// Spent, when set, is what the turn spent (from a provider that runs
	// all turns in one call, the session) as a value, which budgets read
	// instead of parsing Usage; a journal records it in Usage's place
	// when Usage is "". In-process providers set it to spare the JSON.
	Spent *Usage `json:",omitempty"`
}

// spentOf returns what a response reports spent: Spent, else Usage
// parsed (see ParseUsage).
func spentOf(r *AgentResponse) (Usage, error) {
	if r.Spent != nil {
		return *r.Spent, nil
	}
	return ParseUsage(r.Usage)
}

// AgentExecution is the immutable execution context of one session: trace
// identity for correlation. Providers must not modify it.
type AgentExecution struct {
	// RunID identifies the evaluation.
	RunID string
	// SpanID is the agent.session span.
	SpanID string
	// ParentSpanID is the enclosing span.
	ParentSpanID string
	// Source is the authored position of the agent() node.
	Source Position
	// Sandbox is the effective sandbox the session must run in, or nil
	// when no sandbox() encloses the agent.
	Sandbox *SandboxSession
	// StagingDir, for an agent outside a sandbox, is the host directory
	// of its staging area (the oversized includes and the skills staged
	// for it, which the prompt, the system text and Skills name by their
	// paths in it), or "" when nothing was staged. A provider that runs
	// the session on another machine copies it there.
	StagingDir string
	// WorkingDirectory is the evaluation's working directory
	// (Options.Cwd, else the process's): a session outside any sandbox
	// whose provider names no directory of its own runs there. A
	// provider that runs the session on another machine gets the
	// directory of the run's submitter.
	WorkingDirectory string
	// Trace records provider events (acp.session.*, sandbox.process, …)
	// inside the current agent.turn span, or the agent.session span
	// between turns. It is never nil; it discards events when the run has
	// no trace sinks.
	Trace TraceEmitter
	// Meter accounts the session's model calls against its budgets, for
	// a provider that meters them itself (MeteredProvider); nil when the
	// session is not run by the evaluator (a cassette, a test calling the
	// provider directly).
	Meter SpendMeter `json:"-"`
	// Watch checks the cost an unmetered session's agent reports while a
	// turn runs (ACP usage_update) against its budgets; nil when the
	// session is metered (Meter) or not run by the evaluator.
	Watch SpendWatch `json:"-"`
}

// SpendWatch takes the spend an agent reports of itself while a turn
// runs, for a session AML does not meter: what it adds counts toward the
// session's budgets at once, so that a budget stops a turn that crosses
// it instead of waiting for the turn's end. It is safe for concurrent
// use.
type SpendWatch interface {
	// ReportCost takes the session's cumulative cost so far, in US
	// dollars (ACP's usage_update cost is cumulative per session); what
	// it adds to the last report is charged. It returns the *BudgetError
	// of the first budget crossed (the provider then stops the turn), or
	// nil. A report below an earlier one charges nothing.
	ReportCost(usd float64) error
}

// SpendMeter accounts the model calls a provider meters itself (through
// AML's model gateway) against the session's budgets. It is safe for
// concurrent use.
type SpendMeter interface {
	// Reserve takes one model call from the session's budgets before
	// the call is made, or returns the *BudgetError that refuses it
	// (the session then fails when its turn ends).
	Reserve() error
	// Charge adds what one model call of model spent (its ModelCalls is
	// ignored: Reserve counted the call) and returns the *BudgetError of
	// the first budget it crossed (the session then fails when its turn
	// ends), or nil.
	Charge(u Usage, model string) error
}

// metered reports whether p meters the model calls of a session.
func metered(p AgentProvider, req *AgentRequest, sandbox *SandboxSession) bool {
	m, ok := p.(MeteredProvider)
	return ok && m.Meters(req, sandbox)
}

// TraceEmitter records provider trace events. Attribute values must be
// scalars (string, bool, int64, float64). Content attributes reach only
// sinks that capture content, so providers put prompt text, tool input and
// output and raw protocol payloads there and never in attrs. Credentials
// belong in neither.
//
// Implementations are safe for concurrent use.
type TraceEmitter interface {
	// Event records one point event.
	Event(name string, attrs, content map[string]any)
	// CapturesContent reports whether any sink wants content, so a
	// provider can skip serializing it.
	CapturesContent() bool
}
