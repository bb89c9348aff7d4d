package eval

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
