// Package temporal runs AML workflows on Temporal: one run is one Temporal
// workflow execution, and its effects (agent sessions, scripts, sandbox and
// workspace acquisitions) are activities that any worker of the task queue
// may run. A run thereby outlives the machine that started it, and one
// run's agents spread over a fleet.
//
// # Shape: the evaluator is workflow code
//
// A workflow file is deterministic by construction: Starlark has no clock,
// no randomness and no I/O except through AML's builtins, and the builtins
// that reach outside the process are the evaluator's effects. So the whole
// program runs inside the Temporal workflow function: loading the bundle
// (the workflow file and every module it loads), component bodies,
// parallel(), evaluate(), placement checks and the frame stack. The
// evaluator reaches outside the workflow only through two interfaces:
//
//   - Its executor (eval.Executor): fan-out of parallel branches, the agent
//     slots of max_concurrent_agents, the turns of write_concurrency =
//     "serial", timers, deadlines and the clock. In process it is what it
//     has always been (claimed branches on helper goroutines, a FIFO
//     semaphore, the wall clock); here it is workflow.Go,
//     workflow.NewSemaphore, workflow.Now and workflow timers, so that a
//     replay on another worker takes exactly the same path.
//   - The provider contracts (eval.AgentProvider, eval.SandboxProvider,
//     eval.WorkspaceProvider and the host runtime of script()). In the
//     workflow they are stubs that schedule activities; a worker's
//     activities run the real providers, the ones `aml run` links.
//
// Starlark threads run on workflow coroutines, which Temporal runs one at a
// time and replays from history, so a worker that dies while driving a run
// costs a replay on another worker and nothing else.
//
// The other known shape, the evaluator as one long activity that asks its
// workflow to run each effect, keeps the evaluator as it is, but every
// effect would then take a signal to the workflow and a delivery back to
// the driver, a tool call two more hops, and the death of the driving
// worker a heartbeat timeout plus a dry replay of the program before
// anything moves again. It was not chosen.
//
// # Activities
//
// Each effect is one activity whose id is the effect's identity in eval
// (for example c#0/p#0/2/agent#1), the identity the local journal uses, so
// a workflow behaves the same with --journal and with --temporal, and
// history says which authored effect each activity is.
//
//	aml.agent              one whole agent() session: the prompt, every turn,
//	                       tool calls and the structured result. The
//	                       conversation stays in the agent, not in
//	                       history. It heartbeats every HeartbeatInterval
//	                       (2 s), so a dead worker is
//	                       noticed within HeartbeatTimeout (10 s) and the
//	                       session runs again on another worker.
//	aml.acquire            a workspace(), an outer sandbox() or the run's
//	                       host (script() outside any sandbox), acquired
//	                       on one worker inside a Temporal session
//	                       (workflow.CreateSession) that holds it until
//	                       the scope ends; a sandbox() inside a
//	                       workspace() joins the workspace's session, as
//	                       it sees the workspace's directory.
//	aml.exec               one script() command, in the session.
//	aml.file               file() and include(path=) in a workspace or
//	                       sandbox, the file staging of an agent in a
//	                       sandbox, and workspace checkpoints.
//	aml.save               the workspace's save= policy.
//	aml.release            the end of a scope (also of a cancelled run).
//
// An agent() inside a sandbox() is an aml.agent activity of the
// sandbox's session, so it runs where the sandbox is, with its runtime.
//
// A failed session (its worker died: Temporal notices within
// HeartbeatTimeout) makes the scope be acquired again on another worker,
// in a new session, as a local resume does: the workspace from its
// provider with its files restored from the newest checkpoint, its
// sandboxes with the same requests; then the effect that was in flight
// runs again. After every effect that can write in a workspace, its
// worker checkpoints it into the checkpoint store (Options.Checkpoints,
// aml worker --blob-store): each file's content once, as a blob named by
// its digest, and a manifest blob; history records only the manifest's
// digest. A sandbox whose provider keeps files of its own outside any
// workspace cannot be restored elsewhere: its scope fails with an error
// that says so. The host of script() runs in the submitter's working
// directory (RunInput.Cwd), as aml run runs it, which the worker must see
// (its machine, or a shared mount); a worker that does not fails the
// scope and says so. The relative paths of the run's providers resolve
// from that directory too.
//
// A finished activity is in history, so it is never executed again: the
// replay returns its recorded result. An activity in flight on a dead
// worker is retried once its heartbeat times out; one in flight on a live
// worker is not duplicated, since only the workflow schedules activities
// and it schedules each identity once.
//
// # Agents that compute in the process, and tool calls
//
// An agent provider that computes its answers inside the process
// (eval.InProcess: the deterministic provider, whose respond= function is
// Starlark of the bundle) touches nothing outside it, so it runs in
// workflow code like the rest of the program and replays; only other
// providers' sessions are activities.
//
// A Starlark tool body (define_tool(execute = …)) has no effects, so the
// worker that runs the agent session calls it itself: the activity
// carries the bundle, the worker loads it and finds the tool by its
// ordinal among the tools the top level defines. A tool that cannot be
// found that way (one a component body defines, a closure) is called in
// the workflow instead: the worker signals the call (aml.tool: session,
// call id, tool, input) and polls its result with the aml.toolresult
// query; the workflow runs the body on a coroutine of its own, as the
// evaluator runs any tool call. A call costs one signal in history and
// its result never enters it. Tool calls never use Updates, which
// Temporal caps at 10 in flight and 2,000 per history.
//
// # Temporal's limits, and how each is kept
//
//   - 2,000 pending activities per workflow: the executor queues branches
//     beyond MaxPendingActivities (1,000) as data, as the in-process
//     executor queues branches beyond its goroutines.
//   - 2 MB per payload, and a history of at most 51,200 events or 50 MB:
//     payloads above 256 KiB (the bundle, long prompts, results, file
//     checkpoints) are kept in a blob store by a converter.StorageDriver (a
//     directory for one machine, an S3 prefix for a fleet) and history holds
//     their content address. Blobs outlive every history that names them:
//     they are removed only after the namespace's retention.
//   - When the server suggests it (GetContinueAsNewSuggested), the run
//     continues as new, carrying its journal of recorded effects (through
//     the blob store once it is large); the new execution resumes it as eval.Runtime.Resume does,
//     so a run of 20,000 effects completes, and a changed bundle is reported
//     as the same divergence a local resume reports.
//   - A workflow task must end within the run's workflow task timeout
//     (WorkflowTaskTimeout, 20 s, set when a run starts), and the
//     deadlock detector fails one whose code runs too long without
//     yielding (aml worker sets DeadlockDetectionTimeout to 15 s). Workflow
//     code therefore paces its Starlark computation (eval.Pacer): every
//     PaceSteps steps (fewer while an agent's timeout_ms runs) it sends
//     its run the aml.pace signal and waits for its delivery, which ends
//     the task (and takes no activity slot), so that a loop of
//     minutes runs as many short tasks; a cancellation or a timeout's
//     timer reaches it then, and it stops there. The pauses and stops
//     fall at step counts, which a replay reaches again, never on a
//     clock. The run's cancellation (aml cancel) cancels the evaluation.
//   - Trace events and print() lines never go through history while the
//     run goes on: workflow code keeps them (metadata only, for the
//     trace) in memory, and the submitter reads them with the aml.trace
//     and aml.prints queries (see trace.go and prints.go); the last
//     lines come with the run's outcome, redacted. Agent output stays on
//     workers.
//
// # Questions
//
// An ask() without an answer makes the workflow wait on the aml.answer
// signal channel, holding no activity and no worker slot, for days if need
// be. The aml.state query lists the pending questions with their schemas;
// `aml answer RUN ID=VALUE` validates the value against the schema, as
// `aml resume --answer` does, and signals it.
//
// # Secrets
//
// Temporal history is readable by anyone with access to the namespace, so
// nothing that `aml run` redacts reaches it in plain text. env() values stay
// on workers: workflow code reads the variable on its worker and history
// records the value sealed with the workers' shared key (Options.EnvKey),
// so a worker that takes the run over replays it with the same value;
// before an activity is scheduled, each value is replaced
// in what it carries (a prompt, a system text, a follow-up) by a token
// naming the variable, which the activity's worker fills from its own
// environment and puts back in what it returns. Provider credentials come
// from each worker's environment, never from the submitter's. Errors are
// redacted before they are recorded. A run's result is stored as it is,
// as aml run prints it.
//
// # Dependencies
//
// eval imports no package of this module and not the Temporal SDK; only
// this package and the CLI link go.temporal.io/sdk, so an embedder who does
// not use Temporal pays nothing for it.
//
// # Where things are
//
//	wire/          Pack and Bundle (the workflow, its modules and the
//	               application files and skill packages it names) and
//	               the other values clients exchange with the workflow
//	               (wire_names.go gives them their names here)
//	dial.go        Dial, and what aml runs and aml worker ask of a Client
//	workflow.go    the workflow function, agent sessions as activities
//	executor.go    eval.Executor in workflow code
//	scope_sessions.go
//	               scopes held in Temporal sessions, workflow side;
//	               stubs.go, the providers, leases and runtimes that
//	               stand for them there; calls.go, the inputs and results
//	               of their activities; worker_leases.go, the worker
//	               side; checkpoint.go, workspace checkpoints
//	continue.go    the journal, drain and continue-as-new
//	tools.go       calls of tools defined in component bodies
//	prints.go      print() lines for the submitter
//	staging.go     an agent's staged files on its session's worker
//	secrets.go     env() values kept out of history
//	trace.go       the trace query of the live view
//	blobs.go       BlobDriver, payloads in an AML store
//	client.go      Client: start, follow, answer and cancel runs
//	worker.go      Register and Options
//
// The commands aml worker, aml run --temporal, aml runs --temporal, aml
// answer and aml cancel use this package; internal/temporaltest starts a
// test server that scripts/temporal-server.sh builds from the module
// proxy.
package temporal
