package temporal

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
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
	// deadlines counts the timeouts pending (WithTimeoutCause): while
	// one is, computation pauses more often, so that it stops soon after
	// its deadline. nil counts none.
	deadlines *int
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
// context carries the bound, which the activity that runs an agent
// session gets as its start-to-close timeout (its expiry becomes cause),
// and a workflow timer cancels the context with cause once d has passed,
// which stops what computes in workflow code (a deterministic agent's
// respond function) at its next pause (see Pace): the timer's firing is
// in history, so a replay stops it at the same step.
func (e executor) WithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(context.WithValue(ctx, timeoutKey{}, timeout{d: d, cause: cause}))
	tctx, stopTimer := workflow.WithCancel(workflowOf(ctx))
	if e.deadlines != nil {
		*e.deadlines++
	}
	pending := true
	done := func() {
		if pending && e.deadlines != nil {
			*e.deadlines--
		}
		pending = false
	}
	workflow.Go(tctx, func(c workflow.Context) {
		if workflow.Sleep(c, d) == nil {
			cancel(cause)
			done()
		}
	})
	return cctx, func() {
		stopTimer()
		cancel(context.Canceled)
		done()
	}
}

// PaceSteps is how many Starlark steps workflow code runs between two
// pauses (see executor.Pace): about half a second of computation on a
// current machine.
const PaceSteps = 100_000_000

// Sleep implements eval.Sleeper with a workflow timer.
func (executor) Sleep(ctx context.Context, d time.Duration) error {
	wctx := workflowOf(ctx)
	if err := workflow.Sleep(wctx, d); err != nil {
		return errRunCancelled
	}
	return nil
}

// PaceSignal is the signal a run sends itself to pause its workflow
// code's computation: its delivery starts a new workflow task.
const PaceSignal = "aml.pace"

// deadlinePaceSteps is how many steps workflow code runs between two
// pauses while a timeout is pending: a twentieth of PaceSteps.
const deadlinePaceSteps = PaceSteps / 20

// PaceSteps implements eval.Pacer.
func (e executor) PaceSteps() int64 {
	if e.deadlines != nil && *e.deadlines > 0 {
		return deadlinePaceSteps
	}
	return PaceSteps
}

// Pace implements eval.Pacer: the coroutine signals its own run
// (PaceSignal) and waits until the service says the signal was
// delivered, which ends the workflow task, so that no task computes for
// longer than Temporal allows (a Starlark loop of minutes runs as many
// short tasks), and what happened meanwhile (a cancellation, a timeout's
// timer) reaches the evaluation before it goes on. The signal takes no
// worker's activity slot (a pause behind agent sessions that wait for a
// tool this computation serves would never come), and the service
// delivers it at once, where a timer may fire a second late.
func (executor) Pace(ctx context.Context) error {
	wctx := workflowOf(ctx)
	if wctx.Err() != nil {
		return errRunCancelled
	}
	we := workflow.GetInfo(wctx).WorkflowExecution
	_ = workflow.SignalExternalWorkflow(wctx, we.ID, we.RunID, PaceSignal, nil).Get(wctx, nil)
	return nil
}

// drainPaces receives the pause signals of a run (see Pace), which carry
// nothing.
func drainPaces(wctx workflow.Context) {
	workflow.Go(wctx, func(c workflow.Context) {
		ch := workflow.GetSignalChannel(c, PaceSignal)
		for ch.Receive(c, nil) {
		}
	})
}

// errRunCancelled is the cause of a run's evaluation that aml cancel (a
// cancellation of the workflow) stopped.
var errRunCancelled = errors.New("the run was cancelled")

// NewID implements eval.IDSource: a workspace() without an id gets one
// that replays.
func (e executor) NewID(ctx context.Context) string {
	if e.workspaceID != "" {
		// A continued run: its one workspace() keeps its id.
		return e.workspaceID
	}
	var id string
	enc := workflow.SideEffect(workflowOf(ctx), func(workflow.Context) any { return uuid.NewString() })
	if err := enc.Get(&id); err != nil {
		panic(err) // a recorded string always decodes
	}
	return id
}

var (
	_ eval.Executor = executor{}
	_ eval.IDSource = executor{}
	_ eval.Pacer    = executor{}
)
