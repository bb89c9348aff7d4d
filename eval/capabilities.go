package eval

// The optional capabilities that a provider, a sandbox runtime, a lease,
// a trace sink or emitter, or a journal may implement beside its
// contract; the evaluator (for SpanEmitter, a provider) looks for them
// with a type assertion. The package documentation lists them with the
// contracts. Those that serve only an executor are in executor.go.

import (
	"context"
	"io"
	"time"
)

// SandboxCompatible is an optional AgentProvider capability: inside an
// active sandbox the evaluator runs an agent only when its provider
// implements it and SupportsSandbox accepts the effective session.
type SandboxCompatible interface {
	SupportsSandbox(s *SandboxSession) bool
}

// SessionProvider is an optional AgentProvider capability: the provider
// keeps one retained session per agent() node and lets the evaluator drive
// the turns, so that every turn gets its own agent.turn span and cleanup its
// own agent.cleanup span. When a provider implements it, the evaluator
// calls OpenSession instead of Run.
type SessionProvider interface {
	AgentProvider
	// OpenSession opens the session for req. The evaluator then calls
	// RunTurn once per turn, in order, and Close exactly once.
	OpenSession(ctx context.Context, req *AgentRequest, exec *AgentExecution) (AgentSession, error)
}

// NativeSkills is an optional AgentProvider capability: a provider whose
// NativeSkillDiscovery returns true maps the staged skills into its own
// discovery mechanism. Every other provider receives a short system
// fragment naming each skill, its description and its SKILL.md path.
type NativeSkills interface {
	NativeSkillDiscovery() bool
}

// ObjectToolInputs is an optional AgentProvider capability: providers that
// pass tool input as named arguments (every ACP provider) require each
// granted tool's input schema to accept only objects.
type ObjectToolInputs interface {
	RequiresObjectToolInput() bool
}

// InProcess is an optional AgentProvider capability: a provider whose
// InProcess returns true computes its results inside the process and
// touches nothing outside it (the deterministic provider), so a journaled
// evaluation need not make its records durable before calling it: a
// crash before the next sync loses only results that replay computes
// again.
type InProcess interface {
	InProcess() bool
}

// MeteredProvider is an optional AgentProvider capability: a provider
// whose Meters reports true for a session (req is its request, sandbox
// its sandbox or nil on the host) charges every model call of that session through
// AgentExecution.Meter, so that the evaluator neither reserves a model
// call per turn nor counts the turns' usage reports (each call counts
// once). The evaluator still refuses a turn when a budget has nothing
// left, and records what each turn's calls spent in the journal.
type MeteredProvider interface {
	Meters(req *AgentRequest, sandbox *SandboxSession) bool
}

// CostReporter is an optional AgentProvider capability: a provider whose
// usage reports carry their cost needs no price table for cost budgets.
type CostReporter interface {
	ReportsCost() bool
}

// ModelDefaulter is an optional AgentProvider capability: the model a
// session uses when its agent() names none (a profile's model=), by which
// budgets price it.
type ModelDefaulter interface {
	DefaultModel() string
}

// StatelessSandbox is an optional SandboxProvider capability: a provider
// whose KeepsNoState returns true runs commands directly in the
// workspace's (or a host) directory and keeps no state of its own, so a
// resumed run loses nothing when the sandbox is acquired again. Journaled
// evaluations refuse every other sandbox provider: a container's or a
// copy's files outside the workspace could not be put back.
type StatelessSandbox interface {
	KeepsNoState() bool
}

// FileOpener is an optional interface of a SandboxRuntime (and of a
// WorkspaceFiles lease): OpenFile opens a complete regular file below the
// root for a streamed read, so that a bounded read (an include() with
// max_bytes) stops at its bound whatever the file's apparent size. The
// caller closes the reader. A runtime without it is read with ReadFile,
// whole: every runtime whose files its processes can make should have it.
type FileOpener interface {
	OpenFile(ctx context.Context, path string) (io.ReadCloser, error)
}

// GuestRuntime is an optional interface of a SandboxRuntime whose
// processes run apart from the host (a container with no network of its
// own): a host directory they share with it, where the host can serve
// them unix sockets, and the command of the tool bridge's stdio relay in
// the sandbox. Agent providers that bridge tools to an agent in such a
// sandbox use them instead of a loopback address.
type GuestRuntime interface {
	// SharedDirectory returns a host directory and the path at which the
	// sandbox's processes see it. They must be able to reach a socket in
	// it but not to write in it (a read-only mount): the host trusts what
	// it finds there.
	SharedDirectory() (host, guest string)
	// RelayCommand returns the command (and leading arguments) that runs
	// the stdio relay to a tool bridge (aml mcp-relay) in the sandbox; an
	// error says why the sandbox has none.
	RelayCommand() ([]string, error)
}

// InPlaceWorkspace is an optional WorkspaceProvider capability: a
// provider whose EditsInPlace returns true materializes a directory the
// user owns (local_workspace) rather than a copy, so a resumed run
// cannot put its files back as they were; journaled evaluations refuse
// it.
type InPlaceWorkspace interface {
	EditsInPlace() bool
}

// RevisionLease is an optional WorkspaceLease capability: RevisionID
// names the revision the lease materialized ("" for none). A journaled
// evaluation records it with the acquisition, for aml runs show; the
// files themselves are put back from the acquisition's checkpoint.
type RevisionLease interface {
	RevisionID() string
}

// ContentCapturer is an optional TraceSink capability. A sink whose
// CaptureContent returns true also receives sensitive content attributes
// (prompts, results, error messages); every other sink gets metadata only.
type ContentCapturer interface {
	CaptureContent() bool
}

// SpanEmitter is an optional TraceEmitter capability: an operation the
// provider saw from start to end (a model call the model gateway
// metered) becomes a span of its own, under the running turn's span
// (or the session's between turns). Attribute values follow
// TraceEmitter's rules. Implementations are safe for concurrent use.
type SpanEmitter interface {
	// Span records one finished span of kind and name that started at
	// start and lasted d; failed marks it an error.
	Span(kind, name string, start time.Time, d time.Duration, attrs map[string]any, failed bool)
}

// SizedJournal is the optional Journal capability that reports how many effects
// the journal holds. An evaluation whose journal holds none when it
// starts calls no Lookup: effect identities are unique within an
// evaluation, so none of its effects can have a record. A new run pays
// for its records, not for looking them up.
type SizedJournal interface {
	// Len returns the number of effect records (under distinct ids or
	// not) the journal holds. It is safe for concurrent use.
	Len() int
}

// Checkpointer is the Journal capability that makes workspaces durable:
// it keeps copies of a workspace's materialized files. In a journaled
// evaluation with a workspace(), the evaluator checkpoints the
// workspace's directory after every live effect inside it that could
// have written files (an agent session, a script) and names the
// checkpoint in the effect's record. On resume it restores, after each
// replayed effect, that effect's checkpoint, and before the first live
// effect (or the workspace's save) the last checkpoint the journal holds,
// so the files agents wrote before a crash are there. A journal without
// the capability makes workspace() fail in journaled evaluations.
type Checkpointer interface {
	// Checkpoint stores a copy of the regular files and directories under
	// dir and returns its id. Ids must sort (as strings) in the order the
	// checkpoints were taken.
	Checkpoint(ctx context.Context, dir string) (string, error)
	// Restore makes the tree under dir equal to checkpoint id: files it
	// lacks are removed, the others written.
	Restore(ctx context.Context, id, dir string) error
	// LastCheckpoint returns the id of the newest checkpoint named by a
	// record, or "".
	LastCheckpoint() string
}

// ListingJournal is the optional Journal capability that lists the records a
// journal holds, in the order they were appended. A resumed evaluation
// reads them once when it starts: with them it tells an effect the
// program inserted between recorded ones from the first effect the
// recorded run never reached, and finds recorded effects the program no
// longer reaches. Without it only a changed request is a divergence.
type ListingJournal interface {
	// Effects returns every record, superseded ones included, in the
	// order they were appended. It is safe for concurrent use.
	Effects() []*Effect
}
