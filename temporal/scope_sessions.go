package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
)

// Scope sessions: where a run's sandboxes and workspaces live.
//
// A workspace() or an outer sandbox() (and the run's host, for script()
// outside any sandbox) is acquired on one worker, which holds it until the
// scope ends: its files and processes are there. Workflow code opens a
// Temporal session for it (workflow.CreateSession), and every effect
// inside the scope (scripts, file reads and writes, agent sessions inside
// the sandbox, the save and the release) is an activity of that session,
// so Temporal runs it on that worker. A sandbox() inside a workspace()
// shares the workspace's session: the sandbox sees the workspace's
// directory.
//
// When the worker dies, Temporal fails the session (within
// HeartbeatTimeout). The run then acquires the scope again on another
// worker, in a new session, as a local resume does: the workspace from its
// provider with its files restored from the last checkpoint (taken after
// every effect that can write, into the blob store), its sandboxes with
// the same requests, and it runs the effect that was in flight again.

// ScopeSessionTimeout bounds how long one sandbox() or workspace() scope of a
// run on Temporal may hold its worker (its session's execution timeout).
const ScopeSessionTimeout = 7 * 24 * time.Hour

// scopeSessions makes the remote leases of one run in workflow code.
type scopeSessions struct {
	bundle     *Bundle
	seal       *sealer
	runID      string
	cwd        string
	sandboxes  []eval.SandboxProvider
	workspaces []eval.WorkspaceProvider
	// byLease finds the scope session of a workspace lease by its id, for the
	// sandboxes acquired inside it.
	byLease map[string]*remoteLease
	// rs gates new effects while the run drains to continue as new.
	rs *runState
	// workspaceID and workspace are the run's workspace and its scope session;
	// carriedWorkspace and carriedCheckpoint, in a continued run, the
	// workspace of the previous execution and its newest checkpoint,
	// restored when it is acquired.
	workspaceID                         string
	workspace                           *scopeSession
	carriedWorkspace, carriedCheckpoint string
}

// workspaceCheckpoint returns the newest checkpoint of the run's
// workspace.
func (ps *scopeSessions) workspaceCheckpoint() string {
	if ps.workspace == nil {
		return ""
	}
	if ps.workspace.checkpoint == "" && ps.workspaceID == ps.carriedWorkspace {
		return ps.carriedCheckpoint
	}
	return ps.workspace.checkpoint
}

// scopeSession is one session: a worker holding a chain of leases (a workspace
// and the sandboxes inside it, or one sandbox, or the host).
type scopeSession struct {
	ps   *scopeSessions
	sctx workflow.Context
	// gen counts the Temporal sessions the scope had; an operation that failed in
	// generation g recovers the scope unless another did already.
	gen        int
	recovering bool
	// err, once set, fails every later operation.
	err error
	// chain are the scope session's leases in the order they were acquired.
	chain []*remoteLease
	// checkpoint is the workspace's newest checkpoint.
	checkpoint string
	// what names the scope in errors.
	what string
	// free frees the run's activity slot the session holds.
	free func()
	// sessions are the scope's Temporal sessions, the current one (sctx) last.
	sessions []*session
}

// complete ends the scope's current Temporal session and frees its slot; wctx is the
// calling coroutine's context.
func (pl *scopeSession) complete(wctx workflow.Context) {
	for _, s := range pl.sessions {
		s.close(wctx)
	}
	pl.sessions = nil
	if pl.free != nil {
		pl.free()
	}
}

// remoteLease is a lease held on a scope session's worker.
type remoteLease struct {
	pl       *scopeSession
	call     AcquireCall
	res      AcquireResult
	released bool
	// stateful: a sandbox whose provider keeps files of its own outside
	// any workspace; it cannot be acquired again elsewhere.
	stateful bool
}

// openScopeSession opens the Temporal session of a new scope.
func (ps *scopeSessions) openScopeSession(ctx context.Context, what string) (*scopeSession, error) {
	ctx, leave, err := ps.rs.enterScope(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	pl := &scopeSession{ps: ps, what: what}
	// The session's own activity runs as long as the session.
	free, err := ps.rs.slot(workflowOf(ctx))
	if err != nil {
		return nil, err
	}
	sess, err := openSession(workflowOf(ctx))
	if err != nil {
		free()
		return nil, fmt.Errorf("no worker took %s: %w", what, err)
	}
	pl.sctx, pl.free, pl.sessions = sess.ctx, free, []*session{sess}
	return pl, nil
}

// session is a Temporal session on a worker of the run's task queue,
// owned by a coroutine of its own. The SDK completes a session through
// the context of the coroutine that created it (CompleteSession waits
// for its completion activity there), so a session that one parallel()
// branch opened and another completed would make that other coroutine
// wait on the first one's state, and block the workflow for good. The
// owner creates the session and completes it when asked.
type session struct {
	// ctx is the session's context, for the activities of the scope session.
	ctx workflow.Context
	// complete asks the owner to complete the session; done is closed
	// once it has.
	complete, done workflow.Channel
	closing        bool
}

// openSession opens a session; wctx is the calling coroutine's context,
// whose cancellation ends the wait for a worker.
func openSession(wctx workflow.Context) (*session, error) {
	s := &session{complete: workflow.NewBufferedChannel(wctx, 1), done: workflow.NewChannel(wctx)}
	var err error
	ready, abandoned := false, false
	workflow.Go(wctx, func(c workflow.Context) {
		defer s.done.Close()
		c = workflow.WithActivityOptions(c, workflow.ActivityOptions{StartToCloseTimeout: ScopeSessionTimeout})
		sctx, cerr := workflow.CreateSession(c, &workflow.SessionOptions{
			CreationTimeout:  ScopeSessionTimeout,
			ExecutionTimeout: ScopeSessionTimeout,
			HeartbeatTimeout: HeartbeatTimeout,
		})
		s.ctx, err, ready = sctx, cerr, true
		if cerr != nil {
			return
		}
		if !abandoned {
			s.complete.Receive(c, nil)
		}
		workflow.CompleteSession(sctx)
	})
	if aerr := workflow.Await(wctx, func() bool { return ready }); aerr != nil {
		// The owner completes the session should it still be made.
		abandoned = true
		return nil, aerr
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// close asks the owner to complete the session and waits until it has;
// wctx is the calling coroutine's context. It may be called more than
// once.
func (s *session) close(wctx workflow.Context) {
	if !s.closing {
		s.closing = true
		s.complete.SendAsync(true)
	}
	s.done.Receive(wctx, nil)
}

// failed reports whether the session of pl has failed (its worker died).
func (pl *scopeSession) failed() bool {
	info := workflow.GetSessionInfo(pl.sctx)
	return info != nil && info.SessionState == workflow.SessionStateFailed
}

// activityOptions are those of an operation on a scope session: it heartbeats
// while it works, a provider's failure is not retried, and a timeout
// bounds it when the operation has one.
func scopeSessionOptions(timeout time.Duration) workflow.ActivityOptions {
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: SessionTimeout,
		HeartbeatTimeout:    HeartbeatTimeout,
		WaitForCancellation: true,
		RetryPolicy:         &sdktemporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 1, NonRetryableErrorTypes: []string{scopeSessionFailure, agentFailure}},
	}
	if timeout > 0 {
		// The provider enforces the bound; the margin lets it report
		// the timeout itself.
		ao.StartToCloseTimeout = timeout + time.Minute
	}
	return ao
}

// do runs an activity on pl's worker: input builds the activity's input
// for the current session (leases have new keys after a recovery), and
// out receives its result. When the worker dies, do acquires the scope session
// again elsewhere and runs the activity again.
func (pl *scopeSession) do(ctx context.Context, name string, ao workflow.ActivityOptions, input func() any, out any) error {
	ctx, leave, err := pl.ps.rs.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	wctx := workflowOf(ctx)
	stalls := 0
	for {
		if pl.err != nil {
			return pl.err
		}
		gen := pl.gen
		ao.ActivityID = pl.ps.rs.activityID(ctx)
		free, err := pl.ps.rs.slot(wctx)
		if err != nil {
			return err
		}
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(pl.sctx, ao), name, input()).Get(wctx, out)
		free()
		if err == nil {
			return nil
		}
		if wctx.Err() != nil {
			return err
		}
		if !pl.failed() && !errors.Is(err, workflow.ErrSessionFailed) && lostWorker(err) {
			// The activity stopped heartbeating, or was cancelled with
			// its session: the worker is likely dead, and Temporal fails
			// the session within its own heartbeat timeout (the
			// coroutine that records that may not have run yet).
			if _, aerr := workflow.AwaitWithTimeout(wctx, 2*HeartbeatTimeout, pl.failed); aerr != nil {
				return err
			}
			if !pl.failed() {
				// The worker lives and holds the lease: run the
				// activity there again, a few times at most.
				if stalls++; stalls > 3 {
					return activityError(err)
				}
				continue
			}
		}
		if !pl.failed() && !errors.Is(err, workflow.ErrSessionFailed) {
			return activityError(err)
		}
		if rerr := pl.recover(wctx, gen); rerr != nil {
			return rerr
		}
	}
}

// lostWorker reports whether an activity's error can mean that its worker
// died: a heartbeat timeout, or a cancellation the run did not ask for
// (its session's).
func lostWorker(err error) bool {
	var te *sdktemporal.TimeoutError
	if errors.As(err, &te) {
		return te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
	}
	var ce *sdktemporal.CanceledError
	return errors.As(err, &ce)
}

// recover acquires pl again in a new session, once per failed generation:
// other operations that saw the same failure wait for it.
func (pl *scopeSession) recover(wctx workflow.Context, gen int) error {
	if pl.gen != gen || pl.err != nil {
		return pl.err
	}
	if pl.recovering {
		if err := workflow.Await(wctx, func() bool { return pl.gen != gen || pl.err != nil }); err != nil {
			return err
		}
		return pl.err
	}
	pl.recovering = true
	defer func() { pl.recovering = false }()
	workflow.GetLogger(wctx).Warn("the worker holding a scope died; acquiring it again", "scope", pl.what)
	for _, l := range pl.chain {
		if !l.released && l.stateful {
			pl.err = fmt.Errorf("the worker holding %s died, and its provider keeps files of its own that no other worker has: on Temporal, run it inside a workspace() (its files are checkpointed) or with a provider that keeps no state (local_sandbox())", pl.what)
			return pl.err
		}
	}
	if pl.ps.hasWorkspace(pl) && pl.checkpoint == "" {
		// Nothing was checkpointed yet: acquiring it again loads what
		// the first acquisition loaded.
		workflow.GetLogger(wctx).Info("no checkpoint yet; the workspace is acquired again from its provider", "scope", pl.what)
	}
	sess, err := openSession(wctx)
	if err != nil {
		pl.err = fmt.Errorf("the worker holding %s died and no other worker took it: %w", pl.what, err)
		return pl.err
	}
	pl.sctx = sess.ctx
	pl.sessions = append(pl.sessions, sess)
	var wsKey string
	for _, l := range pl.chain {
		if l.released {
			continue
		}
		call := l.call
		if call.Kind == kindWorkspace {
			call.Restore = pl.checkpoint
		}
		if call.Kind == kindSandbox && wsKey != "" {
			call.WorkspaceKey = wsKey
		}
		var res AcquireResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(pl.sctx, scopeSessionOptions(0)), AcquireActivity, call).Get(wctx, &res)
		if err != nil {
			pl.err = fmt.Errorf("the worker holding %s died, and acquiring it again failed: %w", pl.what, activityError(err))
			return pl.err
		}
		l.res.Key = res.Key
		if call.Kind == kindWorkspace {
			wsKey = res.Key
		}
	}
	pl.gen++
	return nil
}

func (ps *scopeSessions) hasWorkspace(pl *scopeSession) bool {
	for _, l := range pl.chain {
		if l.call.Kind == kindWorkspace && !l.released {
			return true
		}
	}
	return false
}

// acquire acquires call as a new lease of pl.
func (pl *scopeSession) acquire(ctx context.Context, call AcquireCall) (*remoteLease, error) {
	ctx, leave, err := pl.ps.rs.enterScope(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	l := &remoteLease{pl: pl, call: call}
	err = pl.do(ctx, AcquireActivity, scopeSessionOptions(0), func() any {
		c := l.call
		if c.Kind == kindSandbox && c.WorkspaceKey != "" {
			c.WorkspaceKey = pl.workspaceKey()
		}
		return c
	}, &l.res)
	if err != nil {
		return nil, err
	}
	l.stateful = call.Kind == kindSandbox && call.WorkspaceKey == "" && !l.res.Stateless
	pl.chain = append(pl.chain, l)
	return l, nil
}

// workspaceKey is the key of the scope session's workspace in its current
// session.
func (pl *scopeSession) workspaceKey() string {
	for _, l := range pl.chain {
		if l.call.Kind == kindWorkspace {
			return l.res.Key
		}
	}
	return ""
}

// noteCheckpoint keeps the newest checkpoint an operation reported.
func (pl *scopeSession) noteCheckpoint(id string) {
	if id != "" {
		pl.checkpoint = id
	}
}

// checkpoints reports whether operations on pl should checkpoint its
// workspace.
func (pl *scopeSession) checkpoints() bool { return pl.ps.hasWorkspace(pl) }

// release releases l on its worker, also when the run was cancelled, and
// closes the session when it was the scope session's last lease.
func (l *remoteLease) release(ctx context.Context) error {
	if l.released {
		return nil
	}
	pl := l.pl
	wctx, cancel := workflow.NewDisconnectedContext(workflowOf(ctx))
	defer cancel()
	var err error
	if pl.err == nil && !pl.failed() {
		// The release is waited for until it is done or the session
		// fails: a lease on a dead worker died with it.
		sctx, scancel := workflow.NewDisconnectedContext(pl.sctx)
		fut := workflow.ExecuteActivity(workflow.WithActivityOptions(sctx, scopeSessionOptions(0)), ReleaseActivity, ReleaseCall{Key: l.res.Key})
		sel := workflow.NewSelector(wctx)
		sel.AddFuture(fut, func(f workflow.Future) {
			if err = f.Get(wctx, nil); err != nil {
				err = activityError(err)
			}
		})
		lost, settled := workflow.NewChannel(wctx), false
		workflow.Go(wctx, func(c workflow.Context) {
			_ = workflow.Await(c, func() bool { return settled || pl.failed() })
			if !settled {
				lost.SendAsync(true)
			}
		})
		sel.AddReceive(lost, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		sel.Select(wctx)
		settled = true
		scancel()
	}
	l.released = true
	for _, o := range pl.chain {
		if !o.released {
			return err
		}
	}
	pl.complete(wctx)
	return err
}

// lookup finds the variable whose value env() returned as name, for
// unseal.
func (ps *scopeSessions) lookup(name string) (string, bool) {
	for v, n := range ps.seal.names {
		if n == name {
			return v, true
		}
	}
	return "", false
}
