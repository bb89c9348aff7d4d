package temporal

import (
	"context"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
)

// The evaluator's context.Context carries the workflow.Context of the
// coroutine it runs on: workflow code must call the SDK with its own
// coroutine's context, so each fan-out branch gets the context of the
// coroutine the executor started for it.
type workflowKey struct{}

func withWorkflow(ctx context.Context, w workflow.Context) context.Context {
	return context.WithValue(ctx, workflowKey{}, w)
}

func workflowOf(ctx context.Context) workflow.Context {
	w, _ := ctx.Value(workflowKey{}).(workflow.Context)
	if w == nil {
		// Only this package builds evaluator contexts for workflow code.
		panic("aml/temporal: an evaluator context without its workflow context")
	}
	return w
}

// timeoutKey carries an agent's timeout_ms and its cause to the activity
// that runs the session, which enforces it (see executor.WithTimeoutCause).
type timeoutKey struct{}

type timeout struct {
	d     time.Duration
	cause error
}

// executor is eval.Executor in workflow code: a coroutine per branch
// (workflow.Go), workflow semaphores, and timeouts that the activity that
// runs the session enforces. Coroutines run one at a time and in an order
// that replays, so what it keeps needs no lock.
type executor struct {
	// workspaceID, for a run that continued as new, is the id its
	// workspace() had (see NewID).
	workspaceID string
}

// FanOut implements eval.Executor. Branches are not bounded here: the
// activities they schedule are (see pending).
func (executor) FanOut(ctx context.Context, n int, branch func(context.Context, int) error) []eval.BranchFailure {
	wctx := workflowOf(ctx)
	wg := workflow.NewWaitGroup(wctx)
	var failures []eval.BranchFailure
	for i := range n {
		if wctx.Err() != nil {
			break
		}
		wg.Add(1)
		workflow.Go(wctx, func(c workflow.Context) {
			defer wg.Done()
			if err := branch(withWorkflow(ctx, c), i); err != nil {
				failures = append(failures, eval.BranchFailure{Index: i, Err: err})
			}
		})
	}
	wg.Wait(wctx)
	return failures
}

// NewSemaphore implements eval.Executor with workflow.NewSemaphore, which
// serves waiters in the order they came.
func (executor) NewSemaphore(ctx context.Context, n int) eval.Semaphore {
	return semaphore{workflow.NewSemaphore(workflowOf(ctx), int64(n))}
}

type semaphore struct{ s workflow.Semaphore }

func (s semaphore) Acquire(ctx context.Context) error { return s.s.Acquire(workflowOf(ctx), 1) }
func (s semaphore) Release()                          { s.s.Release(1) }

// WithTimeoutCause implements eval.Executor. A Go timer would fire on
// another goroutine at a time that does not replay; instead the returned
// context carries the bound, and the activity that runs the agent session
// is given it as its start-to-close timeout (its expiry becomes cause).
func (executor) WithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return context.WithValue(ctx, timeoutKey{}, timeout{d: d, cause: cause}), func() {}
}

var _ eval.Executor = executor{}
