package eval

// The executor contract: the hooks by which an evaluation runs
// elsewhere than in this process's goroutines, its effects and scopes
// made durable by the executor. Package temporal, which runs the
// evaluator as Temporal workflow code, is the only user; an evaluation
// with no Options.Executor uses none of them. The package documentation
// lists them.
//
// An Executor (Options.Executor) fans branches out and makes semaphores
// and timeouts; it may also be an IDSource, a Pacer (see Paced and
// WithPacer) and a Sleeper. Options.ExecutorKeepsScopes says it makes
// sandbox() and workspace() scopes durable itself, Options.AskLive that an
// unanswered ask() waits for its answer. A workspace lease
// held in another process is a WorkspaceFiles (DirFiles, in file.go,
// serves those calls from a directory). A provider that meters a session
// there asks the session's SpendMeter what is left (BudgetLeft), meters
// against it with a LocalMeter (budget.go) and settles what the session
// spent (RemoteSpend). EffectIdentity names the effect a provider's
// context was made for, so that the executor's providers name their work
// by it.

import (
	"context"
	"time"
)

// Executor runs what an evaluation does concurrently or over time: the
// branches of parallel() and evaluate_all(), waits for an agent slot
// (max_concurrent_agents) or for a turn on a serial workspace, and the
// deadline of an agent's timeout_ms. Options.Executor nil is the
// in-process executor (goroutines claiming branches, see the package
// documentation's Fan-out). Another executor runs evaluations where
// goroutines and wall-clock timers must not be used directly: package
// temporal's runs the evaluator as Temporal workflow code, with
// coroutines, semaphores and timers that replay deterministically.
//
// An executor passes each branch the context it must run under: the
// evaluator uses that context for everything the branch does, so an
// executor may carry its own state in it (context.WithValue). Its methods
// are called concurrently, from the goroutines (or coroutines) it runs.
type Executor interface {
	// FanOut runs branch(ctx', i) for every i in [0, n) concurrently, each
	// with a context derived from ctx, waits for all of them, and returns
	// their failures (any order). Once ctx is done, no further branch
	// starts.
	FanOut(ctx context.Context, n int, branch func(ctx context.Context, i int) error) []BranchFailure
	// NewSemaphore returns a semaphore of n slots that serves its waiters
	// first in, first out.
	NewSemaphore(ctx context.Context, n int) Semaphore
	// WithTimeoutCause returns a context that is done with cause once d
	// has passed, or once ctx is done, and its cancel function (see
	// context.WithTimeoutCause).
	WithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc)
}

// IDSource is an optional Executor capability: an executor whose
// evaluations must replay (workflow code) makes the random identities the
// evaluator would otherwise draw itself (the id of a workspace() that
// names none) in a way that replays.
type IDSource interface {
	// NewID returns a new random UUID string.
	NewID(ctx context.Context) string
}

// Semaphore bounds how many holders proceed at once.
type Semaphore interface {
	// Acquire waits for a slot, or fails with ctx's error once ctx is
	// done. Every successful Acquire is paired with one Release.
	Acquire(ctx context.Context) error
	// Release frees a slot taken by Acquire.
	Release()
}

// Pacer is an optional Executor capability: an executor whose work must
// pause regularly (workflow code, whose every task Temporal bounds in
// time) paces the evaluation's Starlark computation. The computation
// stops only at step counts (see TakeSteps), never on a timer, so that a
// replay of it pauses and stops where it did.
type Pacer interface {
	// PaceSteps is how many Starlark steps of the evaluation run between
	// two pauses; it is asked every few thousand steps, and may change
	// (it must not depend on anything a replay would not see again).
	PaceSteps() int64
	// Pace pauses the computation of ctx: it returns when the
	// computation may go on, or the error that stops it. It is called
	// on the goroutine of the computation, one at a time.
	Pace(ctx context.Context) error
}

// Sleeper is an optional Executor capability: an executor whose code must
// not wait on the Go runtime's timers (workflow code, which a replay must
// take through the same waits) waits through timers of its own.
type Sleeper interface {
	// Sleep returns once d has passed, or ctx's cause once ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

// WorkspaceFiles is an optional WorkspaceLease capability for a lease
// whose directory is not on the machine that evaluates (a run on Temporal
// keeps a workspace on the worker that acquired it): file() and
// include(path=) outside a sandbox read and write the workspace through
// these methods instead of through Directory. Paths are logical: relative,
// slash-separated, confined to the workspace. Implementations are safe for
// concurrent use.
type WorkspaceFiles interface {
	// WriteFile replaces one complete regular file, creating parent
	// directories, never writing through a symbolic link.
	WriteFile(ctx context.Context, path string, data []byte) error
	// Stat describes an entry.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ReadFile returns a complete regular file.
	ReadFile(ctx context.Context, path string) ([]byte, error)
}

// BudgetLeft is an optional SpendMeter capability: what the session may
// still spend, for a provider that meters its calls where the budgets are
// not (a Temporal worker), against that snapshot.
type BudgetLeft interface {
	// Left returns the least that every budget around the session has
	// left of each bound (a zero field is unbounded, a bound used up is
	// the least amount above zero), and no wall time or on_exceed.
	Left() Budget
}

// RemoteSpend is an optional SpendMeter capability, for a provider that
// meters a session where its budgets are not (a Temporal worker, against
// what BudgetLeft gave it): Settle charges what the session spent there,
// its model and tool calls included, and returns the *BudgetError of the
// first budget that is now crossed, or, when the remote meter refused a
// call (refused names the budget that refused it: "tokens",
// "model_calls", …; "" for none), of the first budget of that kind that
// is used up; nil otherwise. The session then fails when its turn ends,
// as when Reserve or Charge refuse.
type RemoteSpend interface {
	Settle(u Usage, model, refused string) error
}

// effectKey carries EffectIdentity.
type effectKey struct{}

// EffectIdentity returns the identity of the effect that ctx was made
// for, or "": in a journaled evaluation with an Executor, the evaluator
// gives the context of each agent session, script and scope acquisition
// its effect's identity (the journal's key, for example c#0/p#1/agent#0),
// so that the executor's providers can name their work by it (a run on
// Temporal uses it as the activity's id).
func EffectIdentity(ctx context.Context) string {
	id, _ := ctx.Value(effectKey{}).(string)
	return id
}

// withEffect gives ctx the identity of e for an executor's providers.
func (d *domain) withEffect(ctx context.Context, e *Effect) context.Context {
	if d.exec == nil || e == nil {
		return ctx
	}
	return context.WithValue(ctx, effectKey{}, e.ID)
}

// sleep waits d through the executor's timers (Sleeper), else the Go
// runtime's; it returns ctx's cause once ctx is done.
func (d *domain) sleep(ctx context.Context, dur time.Duration) error {
	if s, ok := d.exec.(Sleeper); ok {
		if err := s.Sleep(ctx, dur); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return nil
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// paceKey carries an evaluation's pacing in its context.
type paceKey struct{}

// pacing counts the steps since the evaluation last paused. Only an
// executor whose branches run one at a time paces, so it needs no lock.
type pacing struct {
	p     Pacer
	since int64
}

// Paced reports whether the evaluation of ctx is paced (see Pacer): its
// Starlark threads are then stopped by TakeSteps, at a step count, when
// ctx is done, rather than at once.
func Paced(ctx context.Context) bool {
	p, _ := ctx.Value(paceKey{}).(*pacing)
	return p != nil
}

// WithPacer returns ctx with the pacing of p, for Starlark computation
// that runs outside an evaluation under p's executor (the top level of a
// workflow file, loaded in workflow code).
func WithPacer(ctx context.Context, p Pacer) context.Context {
	return context.WithValue(ctx, paceKey{}, &pacing{p: p})
}
