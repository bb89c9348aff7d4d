package temporal

import (
	"context"
	"errors"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
)

// Continue-as-new. Temporal bounds a workflow execution's history (51,200
// events, 50 MB) and suggests, before the bound, that the execution
// continue as a new one (workflow.GetInfo().GetContinueAsNewSuggested).
// Workflow code runs the evaluation with a journal (runJournal) that
// records every effect by its identity, as aml run --journal does. When
// the suggestion comes (or RunInput.ContinueAfter effects have started in
// the execution), the run drains: no new effect starts, the effects in
// flight finish and are recorded, then the evaluation is cancelled (no
// workspace is saved, every lease is released) and the execution
// continues as new with a Continuation: the journal, the env() values
// read, the answers received and the workspace's newest checkpoint. The
// new execution resumes the journal as eval.Runtime.Resume does: recorded
// effects are served without running again, a changed program is
// reported as the divergence a local resume reports, the workspace is
// acquired again with its files restored from the checkpoint, and the
// run goes on live. Large continuations travel through the blob store.

// Continuation is what a run carries into its next execution.
type Continuation struct {
	// Journal holds the effects recorded so far.
	Journal []*eval.Effect `json:"journal"`
	// Env holds the env() values the run read, sealed as history holds
	// them, so that the next execution reads the same values.
	Env map[string]envRecord `json:"env,omitempty"`
	// Answers are the answers received (by question id), and Asked the
	// questions asked without an id, by position, so that their ids stay
	// the same.
	Answers map[string]any `json:"answers,omitempty"`
	Asked   map[string]int `json:"asked,omitempty"`
	// Workspace is the run's workspace id and its newest checkpoint.
	WorkspaceID         string `json:"workspaceId,omitempty"`
	WorkspaceCheckpoint string `json:"workspaceCheckpoint,omitempty"`
	// Executions counts the executions the run had before this one.
	Executions int `json:"executions"`
}

// runJournal is the journal of a run's evaluation in workflow code: it
// records in memory (history holds what each effect returned; the journal
// matters when the run continues as new) and keeps the scopes to the
// scope sessions (the evaluation runs with eval.Options.ExecutorKeepsScopes).
type runJournal struct{ m *eval.MemoryJournal }

func newRunJournal(effects []*eval.Effect) *runJournal {
	j := &runJournal{m: eval.NewMemoryJournal()}
	for _, e := range effects {
		_ = j.m.Record(e)
	}
	return j
}

func (j *runJournal) Lookup(id string) *eval.Effect { return j.m.Lookup(id) }
func (j *runJournal) Record(e *eval.Effect) error   { return j.m.Record(e) }
func (j *runJournal) Sync() error                   { return nil }
func (j *runJournal) Len() int                      { return j.m.Len() }
func (j *runJournal) Effects() []*eval.Effect       { return j.m.Effects() }

var (
	_ eval.Journal        = (*runJournal)(nil)
	_ eval.ListingJournal = (*runJournal)(nil)
	_ eval.SizedJournal   = (*runJournal)(nil)
)

// errContinuing fails the effects that would start while the run drains
// to continue as new; the next execution runs them.
var errContinuing = errors.New("the run continues as a new execution")

// runState is the drain of one execution. Coroutines run one at a time,
// so it needs no lock.
type runState struct {
	// after, when positive, continues as new once this many effects
	// started in the execution.
	after   int
	started int
	// inflight counts the effects started and not yet returned to the
	// evaluator.
	inflight int
	// draining: no new effect starts; stopping: the effects in flight
	// have finished, and the evaluation is being cancelled.
	draining, stopping bool
	cancel             context.CancelFunc
	// root is the workflow's root context, for the coordinator.
	root workflow.Context
	// ids counts the activities scheduled for each effect identity.
	ids map[string]int
	// pending bounds the run's activities in flight (MaxPendingActivities).
	pending workflow.Semaphore
}

// MaxPendingActivities bounds the activities one run has in flight (an
// open sandbox or workspace scope holds one, its session's): Temporal
// refuses more than 2,000 per workflow, so a wider parallel() waits for
// slots, as branches beyond max_concurrent_agents wait in process.
const MaxPendingActivities = 1000

// slot waits for room for one more activity in flight; the returned
// function frees it.
func (rs *runState) slot(wctx workflow.Context) (func(), error) {
	if rs == nil || rs.pending == nil {
		return func() {}, nil
	}
	if err := rs.pending.Acquire(wctx, 1); err != nil {
		return nil, err
	}
	done := false
	return func() {
		if !done {
			done = true
			rs.pending.Release(1)
		}
	}, nil
}

// activityID is the id of the next activity of the effect ctx was made
// for: the effect's identity (see eval.EffectIdentity), so that history
// names the authored effect each activity is, suffixed ~N for the N-th
// further activity of the same effect (a retry on another worker, the
// checkpoint after a session); "" lets Temporal number it.
func (rs *runState) activityID(ctx context.Context) string {
	id := eval.EffectIdentity(ctx)
	if id == "" || rs == nil {
		return ""
	}
	if rs.ids == nil {
		rs.ids = map[string]int{}
	}
	n := rs.ids[id]
	rs.ids[id] = n + 1
	if n > 0 {
		return id + "~" + strconv.Itoa(n)
	}
	return id
}

// insideEffect marks a context whose effect already passed the gate, so
// that what it does (a checkpoint after an agent session, a recovery)
// is not stopped by the drain.
type insideEffect struct{}

// enter is the gate of an effect: it returns the context to run it with
// and the function to call when it returned to the evaluator, or
// errContinuing once the run drains.
func (rs *runState) enter(ctx context.Context) (context.Context, func(), error) {
	return rs.gate(ctx, true)
}

// enterScope is enter for acquiring a scope, which does not count as an
// effect toward ContinueAfter: an execution continues only after it did
// some work.
func (rs *runState) enterScope(ctx context.Context) (context.Context, func(), error) {
	return rs.gate(ctx, false)
}

func (rs *runState) gate(ctx context.Context, counts bool) (context.Context, func(), error) {
	if rs == nil || ctx.Value(insideEffect{}) != nil {
		return ctx, func() {}, nil
	}
	wctx := workflowOf(ctx)
	if !rs.draining && (workflow.GetInfo(wctx).GetContinueAsNewSuggested() || (rs.after > 0 && rs.started >= rs.after)) {
		rs.drain()
	}
	if rs.draining {
		if err := workflow.Await(wctx, func() bool { return rs.stopping }); err != nil {
			return nil, nil, err
		}
		return nil, nil, errContinuing
	}
	if counts {
		rs.started++
	}
	rs.inflight++
	done := false
	return context.WithValue(ctx, insideEffect{}, true), func() {
		if !done {
			done = true
			rs.inflight--
		}
	}, nil
}

// drain stops new effects; once those in flight have returned, it
// cancels the evaluation.
func (rs *runState) drain() {
	rs.draining = true
	workflow.Go(rs.root, func(c workflow.Context) {
		_ = workflow.Await(c, func() bool { return rs.inflight == 0 })
		rs.stopping = true
		rs.cancel()
	})
}
