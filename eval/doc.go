// Package eval is the AML evaluator: immutable nodes, evaluation domains,
// limits, the agent scheduler, errors, traces and the provider contracts.
// It imports no other package of this module; starlib binds it to
// Starlark and providers implement its interfaces.
//
// # Nodes and renderables
//
// A value to evaluate is a renderable: a string, an integer or float (its
// decimal text), nil or a bool (nothing), a []any or []string (flattened in
// order), or a Node. Nodes are immutable and carry the Position of the call
// that built them: Agent, System, FollowUp, Block, Fragment, Parallel and
// Component.
//
//	Node               Kind, Pos: what every node implements
//
// # Evaluation
//
// Runtime.Evaluate opens one evaluation domain per call: run id, limits, a
// FIFO scheduler bounding concurrent agent calls, and a trace stream.
// Before anything runs, the statically visible part of the tree is checked
// (placement, depth, follow-up rules, renderability), so authoring mistakes
// fail before any provider is called. The tree is then resolved post-order
// on an explicit frame stack, never by Go recursion over the tree: an
// Agent's children resolve first (child agents run, system() and
// follow_up() text is collected), then its provider session runs and its
// text takes the agent's place. Component bodies run when the evaluator
// reaches them and may evaluate nested values through their
// ComponentContext.
//
// # Fan-out
//
// Parallel branches and ComponentContext.EvaluateAll values run
// concurrently and render in authored order, but a branch is not a
// goroutine: it is an index that the calling goroutine and helpers claim
// in order. Helpers start while fewer than GOMAXPROCS goroutines of the
// evaluation are runnable; a goroutine blocked outside the evaluator (in
// an agent provider, a script, a sandbox or workspace provider, a wait for
// a sibling sandbox) does not count, so a blocked branch is replaced
// within a tick (50 µs) and without an agent limit every blocked branch
// runs at once. A goroutine that makes no progress for a millisecond
// although it counts as runnable (it blocks where the evaluator cannot
// see, in a Go component body) gets a helper beside it too. The goroutines
// of an evaluation are thus bounded by the branches blocked outside the
// evaluator (at most MaxConcurrentAgents of them in agent providers) plus
// up to twice GOMAXPROCS runnable ones, those waiting for an agent slot
// included, plus one monitor, not by the number of branches. Once the
// context is done no further branch starts.
//
// # Providers
//
// The evaluator runs no process and opens no connection itself: agents,
// sandboxes and workspaces are providers, and script() outside a sandbox
// runs through Options.Host, a SandboxProvider for trusted host execution
// (the local sandbox provider in providers/sandbox/local).
//
// The contracts (agent_contract.go, sandbox_contract.go,
// workspace_contract.go, trace.go, journal.go):
//
//	AgentProvider      Name, Run: one authored agent() session
//	AgentSession       the turns of a retained session (from SessionProvider)
//	SpendMeter         the evaluator's: charges a metered session's model calls (AgentExecution.Meter)
//	SpendWatch         the evaluator's: takes the cost an unmetered agent reports mid-turn (AgentExecution.Watch)
//	SandboxProvider    Acquire a SandboxLease for the outermost sandbox()
//	SandboxLease       ID, Runtime, Release
//	SandboxRuntime     Exec, Spawn (a SandboxProcess), files, CreateFileStaging (a FileStaging)
//	SandboxProcess     a running process started by Spawn
//	FileStaging        an agent's private writable directory in the sandbox
//	WorkspaceProvider  Acquire a WorkspaceLease for workspace()
//	WorkspaceLease     ID, Directory, Save, Release
//	TraceSink          HandleTrace for every trace event
//	TraceEmitter       a provider's events inside its session (AgentExecution.Trace)
//	Journal            Lookup, Record, Sync: a durable run's records (EvaluateOptions.Journal)
//
// The optional capabilities (capabilities.go), found by type assertion:
//
//	SessionProvider    AgentProvider: the evaluator drives each turn and traces agent.turn and agent.cleanup
//	SandboxCompatible  AgentProvider: may run inside a sandbox() (SupportsSandbox)
//	NativeSkills       AgentProvider: discovers staged skills itself
//	ObjectToolInputs   AgentProvider: needs object input schemas for granted tools
//	InProcess          AgentProvider: touches nothing outside the process (no journal sync before or after it)
//	MeteredProvider    AgentProvider: charges its sessions' model calls itself (AgentExecution.Meter)
//	CostReporter       AgentProvider: its usage reports carry their cost (no price table for cost budgets)
//	ModelDefaulter     AgentProvider: the model a session uses when agent() names none
//	StatelessSandbox   SandboxProvider: keeps no files of its own (allowed in journaled runs)
//	FileOpener         SandboxRuntime, WorkspaceFiles: opens a file for a streamed, bounded read
//	GuestRuntime       SandboxRuntime: processes run apart from the host (a shared directory, the tool relay)
//	InPlaceWorkspace   WorkspaceProvider: edits the user's directory (refused in journaled runs)
//	RevisionLease      WorkspaceLease: names the revision it materialized (recorded with the acquisition)
//	ContentCapturer    TraceSink: receives content attributes (prompts, results, errors)
//	SpanEmitter        TraceEmitter (the evaluator's): records an operation a provider saw as a span
//	Checkpointer       Journal: keeps copies of a workspace's files (needed for workspace() in journaled runs)
//	SizedJournal       Journal: how many records it holds (a new run then looks nothing up)
//	ListingJournal     Journal: lists its records (a resume then names inserted and removed effects)
//
// The executor contract (executor.go), for evaluations that run
// elsewhere than in this process's goroutines (package temporal's):
//
//	Executor           FanOut, NewSemaphore, WithTimeoutCause (Options.Executor)
//	Semaphore          a FIFO semaphore an Executor makes
//	IDSource           Executor: draws the random identities the evaluator would draw
//	Pacer              Executor: pauses the evaluation's Starlark computation at step counts
//	Sleeper            Executor: waits through timers of its own
//	WorkspaceFiles     WorkspaceLease: its files are read and written where the workspace is held
//	BudgetLeft         SpendMeter (the evaluator's): what a session may still spend, for a remote meter
//	RemoteSpend        SpendMeter (the evaluator's): settles what a remotely metered session spent
//
// # Durable runs
//
// With EvaluateOptions.Journal every effect (agent sessions, scripts,
// tool calls from component code, answers to ComponentContext.Ask,
// workspace and sandbox acquisitions, and the digests of include()
// content and application reads) is recorded under a stable identity
// before its result is used, and a completed effect that reached outside
// the process is durable within EvaluateOptions.CommitWindow (10 ms by
// default) whether or not another effect starts. Runtime.Resume
// evaluates the same tree against the journal, serves what is recorded
// and continues live at the first effect without a record.
//
// An identity is the path of enclosing component calls and fan-out
// branches, each by its occurrence in its sequential context (c#0, p#1,
// then the branch's index), the effect's kind and its occurrence among
// the effects of that kind in its context: "c#0/p#0/2/agent#1" is the
// second agent() of branch 2 of the first fan-out of the first component
// call. Source positions are not part of it, so comments, blank lines,
// docstrings, moved or renamed helpers, load()s and top-level code that
// runs no effect, and renamed variables and functions keep every
// identity. Each record also keeps its order in its context
// (Effect.Order) and where its node was (Effect.Pos). include() and
// env() reads are checks keyed by what they read.
//
// Before anything runs live, Resume replays the program dry and names
// every change as a *DivergenceError (ChangeKind): a recorded effect
// whose request changed, an effect inserted between recorded ones, a
// recorded effect the program no longer reaches, a changed include()
// or env() value. Without ResumeOptions.RerunChanged the resume fails
// with them; with it, a change and what follows it in its sequential
// context run live, the records they replace are withdrawn (VoidKind),
// and the rest is served. An ask() id names one question per
// evaluation; a question without an answer ends the evaluation with a
// *SuspendedError. journal.go documents what a Journal backend must
// guarantee and what a workflow must not do for replays to be exact.
//
// # Pictures
//
// Expand runs a component's body to get the tree it builds without
// running anything else (every effect fails with a *StaticError): aml
// graph draws a workflow's entry that way. Component.Args describes the
// arguments of the call that made a component.
//
// # Errors
//
// EvaluationError (with the authored Position and, for Starlark failures,
// a backtrace), ParallelError (every failed branch with its index),
// ToolInputError, ToolOutputError, WorkspaceConflictError and
// AgentTimeoutError. Errors wrap their causes for errors.Is and errors.As,
// and they nest: a failed parallel() branch is a ParallelError whose
// failures are EvaluationErrors, whose causes may be provider or tool
// errors. Check them from the most specific condition outwards:
//
//  1. cancellation: ctx.Err() != nil && errors.Is(err, context.Cause(ctx)).
//     A cancelled run still fails with an EvaluationError (naming where
//     evaluation stopped) that wraps the cause, possibly inside a
//     ParallelError, so test for it before the types below;
//  2. SuspendedError (a journaled run waits for answers), DivergenceError
//     (a resumed run no longer matches its journal), AgentTimeoutError
//     (an agent's timeout_ms), WorkspaceConflictError, ToolInputError,
//     ToolOutputError: the cause you can act on;
//  3. ParallelError: one entry per failed branch;
//  4. EvaluationError: any other rule, limit or provider failure; Pos
//     names the authored node.
//
// # Limits
//
// Limits bound agent calls, concurrent agents, depth and turns. In Go a
// zero field means the default and Unlimited switches a limit off;
// starlib.SurfaceLimit converts the Starlark and CLI convention, where 0
// is off.
//
// # Traces
//
// Events follow the original AML union (span.start, span.end, event) with
// run id, span id, parent span id, sequence, Unix-millisecond timestamp and
// scalar attributes; every span carries aml.source. Content (prompts,
// results, error messages) reaches only sinks whose CaptureContent returns
// true. Sinks run on a dispatch goroutine per evaluation and never block
// it; their failures go to Options.OnTraceError.
package eval
