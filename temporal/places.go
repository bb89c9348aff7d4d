package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// Places: where a run's sandboxes and workspaces live.
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

// Activity names of places.
const (
	// AcquireActivity acquires a workspace, a sandbox or the host on a
	// session's worker.
	AcquireActivity = "aml.acquire"
	// ExecActivity runs one command of script() in a held lease.
	ExecActivity = "aml.exec"
	// FileActivity reads, describes or writes one file of a held lease,
	// or works a file staging.
	FileActivity = "aml.file"
	// SaveActivity saves a held workspace by its policy.
	SaveActivity = "aml.save"
	// ReleaseActivity releases a held lease.
	ReleaseActivity = "aml.release"
)

// PlaceTimeout bounds how long one sandbox() or workspace() scope of a
// run on Temporal may hold its worker (its session's execution timeout).
const PlaceTimeout = 7 * 24 * time.Hour

// The kinds of a held lease.
const (
	kindWorkspace = "workspace"
	kindSandbox   = "sandbox"
	kindHost      = "host"
)

// AcquireCall is the input of AcquireActivity.
type AcquireCall struct {
	// Kind is "workspace", "sandbox" or "host".
	Kind string `json:"kind"`
	// Provider is the provider's name; ProviderIndex, when not negative,
	// its ordinal among the providers of its kind that Bundle makes while
	// it loads.
	Provider      string  `json:"provider,omitempty"`
	ProviderIndex int     `json:"providerIndex"`
	Bundle        *Bundle `json:"bundle,omitempty"`
	RunID         string  `json:"runId"`
	// Workspace is the request of a workspace.
	Workspace *eval.WorkspaceAcquireRequest `json:"workspace,omitempty"`
	// Sandbox is the request of a sandbox; WorkspaceKey, when set, is
	// the held workspace whose directory it materializes (the
	// request's Workspace.Directory is replaced by that lease's).
	Sandbox      *eval.SandboxAcquireRequest `json:"sandbox,omitempty"`
	WorkspaceKey string                      `json:"workspaceKey,omitempty"`
	// Restore, for a workspace acquired again after its worker died, is
	// the checkpoint its files are restored from.
	Restore string `json:"restore,omitempty"`
	// Source is the authored position of the scope.
	Source string `json:"source,omitempty"`
	// Cwd is the run's RunInput.Cwd: the providers' relative paths and
	// the host's directory.
	Cwd string `json:"cwd,omitempty"`
	// Factory, for a provider that a component body made, is the call
	// that made it (see AgentCall.Factory).
	Factory *starlib.FactoryCall `json:"factory,omitempty"`
}

// AcquireResult is what AcquireActivity returns: the held lease's key on
// its worker, and what the lease reports.
type AcquireResult struct {
	Key       string      `json:"key"`
	LeaseID   string      `json:"leaseId"`
	Directory string      `json:"directory,omitempty"`
	Access    eval.Access `json:"access,omitempty"`
	Root      string      `json:"root,omitempty"`
	Cwd       string      `json:"cwd,omitempty"`
	// Stateless reports that the sandbox keeps no files of its own
	// (eval.StatelessSandbox), so it can be acquired again elsewhere.
	Stateless bool `json:"stateless,omitempty"`
}

// ExecCall is the input of ExecActivity.
type ExecCall struct {
	Key     string            `json:"key"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Stdin   []byte            `json:"stdin,omitempty"`
	Timeout time.Duration     `json:"timeout,omitempty"`
	// Checkpoint asks the worker to checkpoint the lease's workspace
	// after the command.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// ExecReply is what ExecActivity returns.
type ExecReply struct {
	Result     eval.ExecResult `json:"result"`
	Checkpoint string          `json:"checkpoint,omitempty"`
}

// File operations of FileActivity.
const (
	fileRead          = "read"
	fileStat          = "stat"
	fileWrite         = "write"
	fileStagingCreate = "staging.create"
	fileStagingWrite  = "staging.write"
	fileStagingFree   = "staging.release"
	// fileCheckpoint checkpoints the workspace Key names.
	fileCheckpoint = "checkpoint"
)

// FileCall is the input of FileActivity.
type FileCall struct {
	Key  string `json:"key"`
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	Data []byte `json:"data,omitempty"`
	// Staging names a staging of the lease (staging.write and
	// staging.release).
	Staging    string `json:"staging,omitempty"`
	Checkpoint bool   `json:"checkpoint,omitempty"`
	// Offset and Limit make a read return at most Limit bytes of the file
	// from Offset (fewer at its end); Limit 0 reads the whole file, up to
	// the read bound.
	Offset int64 `json:"offset,omitempty"`
	Limit  int64 `json:"limit,omitempty"`
}

// FileReply is what FileActivity returns.
type FileReply struct {
	Data       []byte        `json:"data,omitempty"`
	Info       eval.FileInfo `json:"info"`
	Staging    string        `json:"staging,omitempty"`
	Root       string        `json:"root,omitempty"`
	Checkpoint string        `json:"checkpoint,omitempty"`
}

// SaveCall is the input of SaveActivity.
type SaveCall struct {
	Key     string                    `json:"key"`
	Request eval.WorkspaceSaveRequest `json:"request"`
}

// ReleaseCall is the input of ReleaseActivity.
type ReleaseCall struct {
	Key string `json:"key"`
}

// placeFailure is the error type of a place's own failure (a provider's
// error): it is not retried.
const placeFailure = "aml.place.failure"

// places makes the remote leases of one run in workflow code.
type places struct {
	bundle     *Bundle
	seal       *sealer
	runID      string
	cwd        string
	sandboxes  []eval.SandboxProvider
	workspaces []eval.WorkspaceProvider
	// byLease finds the place of a workspace lease by its id, for the
	// sandboxes acquired inside it.
	byLease map[string]*remoteLease
	// rs gates new effects while the run drains to continue as new.
	rs *runState
	// workspaceID and workspace are the run's workspace and its place;
	// carriedWorkspace and carriedCheckpoint, in a continued run, the
	// workspace of the previous execution and its newest checkpoint,
	// restored when it is acquired.
	workspaceID                         string
	workspace                           *place
	carriedWorkspace, carriedCheckpoint string
}

// workspaceCheckpoint returns the newest checkpoint of the run's
// workspace.
func (ps *places) workspaceCheckpoint() string {
	if ps.workspace == nil {
		return ""
	}
	if ps.workspace.checkpoint == "" && ps.workspaceID == ps.carriedWorkspace {
		return ps.carriedCheckpoint
	}
	return ps.workspace.checkpoint
}

// place is one session: a worker holding a chain of leases (a workspace
// and the sandboxes inside it, or one sandbox, or the host).
type place struct {
	ps   *places
	sctx workflow.Context
	// gen counts the sessions the place had; an operation that failed in
	// generation g recovers the place unless another did already.
	gen        int
	recovering bool
	// err, once set, fails every later operation.
	err error
	// chain are the place's leases in the order they were acquired.
	chain []*remoteLease
	// checkpoint is the workspace's newest checkpoint.
	checkpoint string
	// what names the scope in errors.
	what string
	// free frees the run's activity slot the session holds.
	free func()
	// sessions are the place's sessions, the current one (sctx) last.
	sessions []*session
}

// complete ends the place's session and frees its slot; wctx is the
// calling coroutine's context.
func (pl *place) complete(wctx workflow.Context) {
	for _, s := range pl.sessions {
		s.close(wctx)
	}
	pl.sessions = nil
	if pl.free != nil {
		pl.free()
	}
}

// remoteLease is a lease held on a place's worker.
type remoteLease struct {
	pl       *place
	call     AcquireCall
	res      AcquireResult
	released bool
	// stateful: a sandbox whose provider keeps files of its own outside
	// any workspace; it cannot be acquired again elsewhere.
	stateful bool
}

// openPlace opens a session for a new place.
func (ps *places) openPlace(ctx context.Context, what string) (*place, error) {
	ctx, leave, err := ps.rs.enterScope(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	pl := &place{ps: ps, what: what}
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
	// ctx is the session's context, for the activities of the place.
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
		c = workflow.WithActivityOptions(c, workflow.ActivityOptions{StartToCloseTimeout: PlaceTimeout})
		sctx, cerr := workflow.CreateSession(c, &workflow.SessionOptions{
			CreationTimeout:  PlaceTimeout,
			ExecutionTimeout: PlaceTimeout,
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
func (pl *place) failed() bool {
	info := workflow.GetSessionInfo(pl.sctx)
	return info != nil && info.SessionState == workflow.SessionStateFailed
}

// activityOptions are those of an operation on a place: it heartbeats
// while it works, a provider's failure is not retried, and a timeout
// bounds it when the operation has one.
func placeOptions(timeout time.Duration) workflow.ActivityOptions {
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: SessionTimeout,
		HeartbeatTimeout:    HeartbeatTimeout,
		WaitForCancellation: true,
		RetryPolicy:         &sdktemporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 1, NonRetryableErrorTypes: []string{placeFailure, agentFailure}},
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
// out receives its result. When the worker dies, do acquires the place
// again elsewhere and runs the activity again.
func (pl *place) do(ctx context.Context, name string, ao workflow.ActivityOptions, input func() any, out any) error {
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
func (pl *place) recover(wctx workflow.Context, gen int) error {
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
	workflow.GetLogger(wctx).Warn("the worker holding a place died; acquiring it again", "place", pl.what)
	for _, l := range pl.chain {
		if !l.released && l.stateful {
			pl.err = fmt.Errorf("the worker holding %s died, and its provider keeps files of its own that no other worker has: on Temporal, run it inside a workspace() (its files are checkpointed) or with a provider that keeps no state (local_sandbox())", pl.what)
			return pl.err
		}
	}
	if pl.ps.hasWorkspace(pl) && pl.checkpoint == "" {
		// Nothing was checkpointed yet: acquiring it again loads what
		// the first acquisition loaded.
		workflow.GetLogger(wctx).Info("no checkpoint yet; the workspace is acquired again from its provider", "place", pl.what)
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
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(pl.sctx, placeOptions(0)), AcquireActivity, call).Get(wctx, &res)
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

func (ps *places) hasWorkspace(pl *place) bool {
	for _, l := range pl.chain {
		if l.call.Kind == kindWorkspace && !l.released {
			return true
		}
	}
	return false
}

// acquire acquires call as a new lease of pl.
func (pl *place) acquire(ctx context.Context, call AcquireCall) (*remoteLease, error) {
	ctx, leave, err := pl.ps.rs.enterScope(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	l := &remoteLease{pl: pl, call: call}
	err = pl.do(ctx, AcquireActivity, placeOptions(0), func() any {
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

// workspaceKey is the key of the place's workspace in its current
// session.
func (pl *place) workspaceKey() string {
	for _, l := range pl.chain {
		if l.call.Kind == kindWorkspace {
			return l.res.Key
		}
	}
	return ""
}

// noteCheckpoint keeps the newest checkpoint an operation reported.
func (pl *place) noteCheckpoint(id string) {
	if id != "" {
		pl.checkpoint = id
	}
}

// checkpoints reports whether operations on pl should checkpoint its
// workspace.
func (pl *place) checkpoints() bool { return pl.ps.hasWorkspace(pl) }

// release releases l on its worker, also when the run was cancelled, and
// closes the session when it was the place's last lease.
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
		fut := workflow.ExecuteActivity(workflow.WithActivityOptions(sctx, placeOptions(0)), ReleaseActivity, ReleaseCall{Key: l.res.Key})
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

// Workspace providers in workflow code.

// remoteWorkspaceProvider acquires a workspace in a place of its own.
type remoteWorkspaceProvider struct {
	ps    *places
	name  string
	index int
	// factory makes a provider a component body made (see travelling).
	factory *starlib.FactoryCall
}

func (p remoteWorkspaceProvider) Name() string { return p.name }

func (p remoteWorkspaceProvider) Acquire(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	pl, err := p.ps.openPlace(ctx, fmt.Sprintf("workspace %q", req.ID))
	if err != nil {
		return nil, err
	}
	r := *req
	call := AcquireCall{Kind: kindWorkspace, Provider: p.name, ProviderIndex: p.index, Bundle: p.ps.bundleFor(p.index), RunID: p.ps.runID, Workspace: &r, Cwd: p.ps.cwd, Factory: p.factory}
	if req.ID == p.ps.carriedWorkspace {
		// The run continued as new: its workspace comes back as the
		// previous execution left it.
		call.Restore = p.ps.carriedCheckpoint
		pl.checkpoint = p.ps.carriedCheckpoint
	}
	l, err := pl.acquire(ctx, call)
	if err != nil {
		pl.complete(workflowOf(ctx))
		return nil, err
	}
	if p.ps.byLease == nil {
		p.ps.byLease = map[string]*remoteLease{}
	}
	p.ps.byLease[l.res.LeaseID] = l
	p.ps.workspaceID, p.ps.workspace = req.ID, pl
	return remoteWorkspace{l}, nil
}

// bundleFor returns the bundle when a worker needs it to make the
// provider (index ≥ 0).
func (ps *places) bundleFor(index int) *Bundle {
	if index >= 0 {
		return ps.bundle
	}
	return nil
}

// remoteWorkspace is a workspace lease held on a place's worker. Its files
// are reached through activities (eval.WorkspaceFiles).
type remoteWorkspace struct{ l *remoteLease }

func (w remoteWorkspace) ID() string { return w.l.res.LeaseID }

// Directory is the directory on the worker that holds the workspace.
func (w remoteWorkspace) Directory() string { return w.l.res.Directory }

func (w remoteWorkspace) Save(ctx context.Context, req eval.WorkspaceSaveRequest) error {
	return w.l.pl.do(ctx, SaveActivity, placeOptions(0), func() any { return SaveCall{Key: w.l.res.Key, Request: req} }, nil)
}

func (w remoteWorkspace) Release(ctx context.Context) error {
	delete(w.l.pl.ps.byLease, w.l.res.LeaseID)
	return w.l.release(ctx)
}

func (w remoteWorkspace) WriteFile(ctx context.Context, path string, data []byte) error {
	var r FileReply
	err := w.l.pl.do(ctx, FileActivity, placeOptions(0), func() any {
		return FileCall{Key: w.l.res.Key, Op: fileWrite, Path: path, Data: data, Checkpoint: true}
	}, &r)
	w.l.pl.noteCheckpoint(r.Checkpoint)
	return err
}

func (w remoteWorkspace) Stat(ctx context.Context, path string) (eval.FileInfo, error) {
	var r FileReply
	err := w.l.pl.do(ctx, FileActivity, placeOptions(0), func() any { return FileCall{Key: w.l.res.Key, Op: fileStat, Path: path} }, &r)
	return r.Info, err
}

func (w remoteWorkspace) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var r FileReply
	err := w.l.pl.do(ctx, FileActivity, placeOptions(0), func() any { return FileCall{Key: w.l.res.Key, Op: fileRead, Path: path} }, &r)
	return r.Data, err
}

// OpenFile implements eval.FileOpener: the file is read in chunks, one
// activity each, so that a bounded read (include() with max_bytes) stops
// at its bound on the worker too.
func (w remoteWorkspace) OpenFile(ctx context.Context, path string) (io.ReadCloser, error) {
	return &remoteFile{ctx: ctx, fetch: func(ctx context.Context, off, n int64) ([]byte, error) {
		var r FileReply
		err := w.l.pl.do(ctx, FileActivity, placeOptions(0), func() any {
			return FileCall{Key: w.l.res.Key, Op: fileRead, Path: path, Offset: off, Limit: n}
		}, &r)
		return r.Data, err
	}}, nil
}

var (
	_ eval.WorkspaceFiles = remoteWorkspace{}
	_ eval.FileOpener     = remoteWorkspace{}
	_ eval.FileOpener     = remoteRuntime{}
)

// readChunk is how much of a file one read activity returns to workflow
// code: well under the service's payload limit (2 MB by default).
const readChunk = 1 << 20

// remoteFile reads a file of a place in chunks, one activity each, as
// its reader asks for them.
type remoteFile struct {
	ctx   context.Context
	fetch func(ctx context.Context, off, n int64) ([]byte, error)
	off   int64
	buf   []byte
	eof   bool
}

func (f *remoteFile) Read(b []byte) (int, error) {
	if len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		data, err := f.fetch(f.ctx, f.off, readChunk)
		if err != nil {
			return 0, err
		}
		f.off += int64(len(data))
		f.buf, f.eof = data, len(data) < readChunk
		if len(data) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(b, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *remoteFile) Close() error { return nil }

// Sandbox providers in workflow code.

// remoteSandboxProvider acquires a sandbox on a worker: in the place of
// the workspace it materializes, else in a place of its own. With host
// set it is the run's host (script() outside any sandbox), which runs in
// the submitter's directory (RunInput.Cwd) on its worker.
type remoteSandboxProvider struct {
	ps    *places
	name  string
	index int
	host  bool
	// factory makes a provider a component body made (see travelling).
	factory *starlib.FactoryCall
}

func (p remoteSandboxProvider) Name() string { return p.name }

func (p remoteSandboxProvider) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	r := *req
	call := AcquireCall{Kind: kindSandbox, Provider: p.name, ProviderIndex: p.index, Bundle: p.ps.bundleFor(p.index), RunID: p.ps.runID, Sandbox: &r, Cwd: p.ps.cwd, Factory: p.factory}
	var pl *place
	if p.host {
		// The host's directory is the submitter's (Cwd), which the
		// worker checks it sees.
		call.Kind, r.Workspace = kindHost, nil
	} else if req.Workspace != nil {
		if wl := p.ps.byLease[req.Workspace.LeaseID]; wl != nil && !wl.released {
			pl = wl.pl
			call.WorkspaceKey = wl.res.Key
			m := *req.Workspace
			m.Directory = ""
			r.Workspace = &m
		}
	}
	if pl == nil {
		what := "the sandbox"
		if p.host {
			what = "the host of script()"
		}
		var err error
		if pl, err = p.ps.openPlace(ctx, what); err != nil {
			return nil, err
		}
	}
	l, err := pl.acquire(ctx, call)
	if err != nil {
		if len(pl.chain) == 0 {
			pl.complete(workflowOf(ctx))
		}
		return nil, err
	}
	return &remoteSandbox{l: l}, nil
}

// remoteSandbox is a sandbox lease held on a place's worker.
type remoteSandbox struct{ l *remoteLease }

func (s *remoteSandbox) ID() string                        { return s.l.res.LeaseID }
func (s *remoteSandbox) Runtime() eval.SandboxRuntime      { return remoteRuntime{s.l} }
func (s *remoteSandbox) Release(ctx context.Context) error { return s.l.release(ctx) }

// remoteRuntime is the runtime of a remoteSandbox: every operation is an
// activity on the lease's worker.
type remoteRuntime struct{ l *remoteLease }

func (r remoteRuntime) Access() eval.Access { return r.l.res.Access }
func (r remoteRuntime) Root() string        { return r.l.res.Root }
func (r remoteRuntime) Cwd() string         { return r.l.res.Cwd }

func (r remoteRuntime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	pl := r.l.pl
	call := ExecCall{Command: pl.ps.seal.seal(command), Cwd: opts.Cwd, Timeout: opts.Timeout, Checkpoint: pl.checkpoints()}
	for _, a := range args {
		call.Args = append(call.Args, pl.ps.seal.seal(a))
	}
	if len(opts.Env) > 0 {
		call.Env = map[string]string{}
		for k, v := range opts.Env {
			call.Env[k] = pl.ps.seal.seal(v)
		}
	}
	if opts.Stdin != nil {
		data, err := io.ReadAll(opts.Stdin)
		if err != nil {
			return nil, err
		}
		call.Stdin = data
	}
	var reply ExecReply
	err := pl.do(ctx, ExecActivity, placeOptions(opts.Timeout), func() any {
		c := call
		c.Key = r.l.res.Key
		return c
	}, &reply)
	if err != nil {
		return nil, err
	}
	pl.noteCheckpoint(reply.Checkpoint)
	res := reply.Result
	for _, b := range []*[]byte{&res.Stdout, &res.Stderr} {
		s, err := unseal(string(*b), pl.ps.lookup)
		if err != nil {
			return nil, err
		}
		*b = []byte(s)
	}
	return &res, nil
}

func (r remoteRuntime) Spawn(context.Context, string, []string, eval.ExecOptions) (eval.SandboxProcess, error) {
	return nil, errors.New("a process with streaming input and output cannot be started from workflow code; agent providers start theirs on the worker that holds the sandbox")
}

func (r remoteRuntime) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var reply FileReply
	err := r.l.pl.do(ctx, FileActivity, placeOptions(0), func() any { return FileCall{Key: r.l.res.Key, Op: fileRead, Path: path} }, &reply)
	return reply.Data, err
}

// OpenFile implements eval.FileOpener as remoteWorkspace's does.
func (r remoteRuntime) OpenFile(ctx context.Context, path string) (io.ReadCloser, error) {
	return &remoteFile{ctx: ctx, fetch: func(ctx context.Context, off, n int64) ([]byte, error) {
		var reply FileReply
		err := r.l.pl.do(ctx, FileActivity, placeOptions(0), func() any {
			return FileCall{Key: r.l.res.Key, Op: fileRead, Path: path, Offset: off, Limit: n}
		}, &reply)
		return reply.Data, err
	}}, nil
}

func (r remoteRuntime) Stat(ctx context.Context, path string) (eval.FileInfo, error) {
	var reply FileReply
	err := r.l.pl.do(ctx, FileActivity, placeOptions(0), func() any { return FileCall{Key: r.l.res.Key, Op: fileStat, Path: path} }, &reply)
	return reply.Info, err
}

func (r remoteRuntime) WriteFile(ctx context.Context, path string, data []byte) error {
	pl := r.l.pl
	var reply FileReply
	err := pl.do(ctx, FileActivity, placeOptions(0), func() any {
		return FileCall{Key: r.l.res.Key, Op: fileWrite, Path: path, Data: data, Checkpoint: pl.checkpoints()}
	}, &reply)
	pl.noteCheckpoint(reply.Checkpoint)
	return err
}

func (r remoteRuntime) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	var reply FileReply
	gen := r.l.pl.gen
	err := r.l.pl.do(ctx, FileActivity, placeOptions(0), func() any { return FileCall{Key: r.l.res.Key, Op: fileStagingCreate} }, &reply)
	if err != nil {
		return nil, err
	}
	return &remoteStaging{l: r.l, key: reply.Staging, root: reply.Root, gen: gen}, nil
}

// remoteStaging is a file staging of a remote sandbox. It does not
// survive its worker: after a recovery its operations fail.
type remoteStaging struct {
	l        *remoteLease
	key      string
	root     string
	gen      int
	released bool
}

func (s *remoteStaging) Root() string { return s.root }

func (s *remoteStaging) WriteFile(ctx context.Context, rel string, data []byte) error {
	if s.l.pl.gen != s.gen {
		return fmt.Errorf("the staging directory was on a worker that died")
	}
	return s.l.pl.do(ctx, FileActivity, placeOptions(0), func() any {
		return FileCall{Key: s.l.res.Key, Op: fileStagingWrite, Staging: s.key, Path: rel, Data: data}
	}, nil)
}

func (s *remoteStaging) Release(ctx context.Context) error {
	if s.released || s.l.pl.gen != s.gen || s.l.released {
		s.released = true
		return nil
	}
	s.released = true
	wctx, cancel := workflow.NewDisconnectedContext(workflowOf(ctx))
	defer cancel()
	return s.l.pl.do(withWorkflow(ctx, wctx), FileActivity, placeOptions(0), func() any {
		return FileCall{Key: s.l.res.Key, Op: fileStagingFree, Staging: s.key}
	}, nil)
}

// lookup finds the variable whose value env() returned as name, for
// unseal.
func (ps *places) lookup(name string) (string, bool) {
	for v, n := range ps.seal.names {
		if n == name {
			return v, true
		}
	}
	return "", false
}

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
	_ eval.IDSource          = executor{}
	_ eval.SandboxProvider   = remoteSandboxProvider{}
	_ eval.WorkspaceProvider = remoteWorkspaceProvider{}
)
