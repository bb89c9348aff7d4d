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
