package eval

import (
	"context"
	"errors"
	"fmt"
	"path"
)

// resScope is the active resource scope of a frame: the workspace and the
// sandbox view that enclose it. It is immutable once built.
type resScope struct {
	ws *wsState
	sb *sbView
}

// wsState is one acquired workspace.
type wsState struct {
	node  *Workspace
	lease WorkspaceLease
	id    string
	cwd   string
	name  string
	// serial admits one writable sandbox at a time when the workspace's
	// write_concurrency is "serial".
	serial Semaphore
	span   *span
	// cps is the checkpoint state in a journaled evaluation, else nil.
	cps *wsCheckpoints
}

// sbView is the effective view of a sandbox lease.
type sbView struct {
	lease SandboxLease
	rt    SandboxRuntime
	// access is the effective access; root is relative to the lease's
	// root; cwd is relative to root.
	access Access
	root   string
	cwd    string
	// outer is set for the view that owns the lease.
	outer bool
	// holdsSerial is set when the view holds the workspace's writer turn.
	holdsSerial bool
	ws          *wsState
	span        *span
}

// logical returns the lease-relative form of a path relative to the view.
func (v *sbView) logical(p string) string { return path.Join(v.root, p) }

// enterWorkspace acquires and materializes the workspace of n.
//
// In a journaled evaluation the acquisition is an effect: its record
// names a checkpoint of the files as they were materialized (and the
// revision, where the lease reports it), and a resumed run puts those
// files back, even if another revision was published since.
func (d *domain) enterWorkspace(ctx context.Context, n *Workspace, parentSpan string, path *effectPath) (*wsState, error) {
	p := n.Provider
	if p == nil {
		p = d.rt.opts.WorkspaceProvider
	}
	if o := d.rt.opts.WorkspaceOverride; o != nil {
		p = o(p)
	}
	if p == nil {
		return nil, newError(n.Position, NoProviderMessage(n))
	}
	var cpj Checkpointer
	if d.journal != nil && !d.journal.cassette && !d.journal.scopesKept {
		if ip, ok := p.(InPlaceWorkspace); ok && ip.EditsInPlace() {
			return nil, newError(n.Position, fmt.Sprintf("workspace provider %q edits its directory in place, so a journaled run could not put the files back as they were when it resumes; use a persistent workspace (filesystem_workspace, s3_workspace) or run without --journal", p.Name()))
		}
		c, ok := d.journal.j.(Checkpointer)
		if !ok {
			return nil, newError(n.Position, "workspace() in a journaled evaluation needs a journal that checkpoints files (eval.Checkpointer), and this journal does not")
		}
		cpj = c
	}
	if !d.workspaceUsed.CompareAndSwap(false, true) {
		return nil, newError(n.Position, OneWorkspaceMessage)
	}
	cwd := n.Cwd
	if cwd == "" {
		cwd = "."
	}
	cwd, err := CheckLogicalPath(cwd, true)
	if err != nil {
		return nil, newError(n.Position, "workspace(cwd=...): "+err.Error())
	}
	id := n.ID
	if id == "" {
		if src, ok := d.exec.(IDSource); ok {
			id = src.NewID(ctx)
		} else {
			id = newWorkspaceID()
		}
	}
	var entry, rec *Effect
	journaled := d.journal != nil && !d.journal.cassette
	if journaled {
		var err error
		if entry, rec, err = d.workspaceEffect(n, p, path); err != nil {
			return nil, err
		}
	}
	sp := d.trace.startSpan(parentSpan, "workspace", "Workspace", n.Position, attrs{"provider", p.Name(), "workspace.id", id}, nil)
	unblock := d.workers.block()
	eff := entry
	if eff == nil {
		eff = rec
	}
	lease, err := p.Acquire(d.withEffect(ctx, eff), &WorkspaceAcquireRequest{ID: id, EvaluationID: d.runID, Load: n.Load, Lock: !n.NoLock})
	unblock()
	if err == nil && lease == nil {
		err = errors.New("provider returned no lease")
	}
	if err != nil {
		err = wrapScopeError(ctx, n.Position, fmt.Sprintf("workspace %q could not be acquired from provider %q", id, p.Name()), err)
		sp.end(err, nil, nil)
		return nil, err
	}
	ws := &wsState{node: n, lease: lease, id: id, cwd: cwd, name: p.Name(), span: sp}
	if journaled {
		if cpj != nil {
			ws.cps = &wsCheckpoints{cp: cpj, dir: lease.Directory(), last: cpj.LastCheckpoint()}
		}
		var err error
		if rec != nil {
			err = d.replayedFiles(ctx, ws, rec)
		} else {
			err = d.recordWorkspace(ctx, ws, entry)
		}
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
			if rerr := lease.Release(rctx); rerr != nil {
				err = errors.Join(err, &EvaluationError{Msg: fmt.Sprintf("workspace %q could not be released", id), Pos: n.Position, Err: rerr})
			}
			cancel()
			sp.end(err, nil, nil)
			return nil, err
		}
	}
	if n.WriteConcurrency != "parallel" {
		ws.serial = d.newSemaphore(ctx, 1)
	}
	return ws, nil
}

// leaveWorkspace saves the workspace by its policy and releases it, once.
// failed reports that its subtree failed; cancelled skips saving.
func (d *domain) leaveWorkspace(ctx context.Context, ws *wsState, failed bool) error {
	var errs []error
	if !failed && ws.cps != nil {
		// A workspace whose effects were all replayed gets the recorded
		// run's files before it is saved.
		if err := ws.cps.goLive(ctx); err != nil {
			errs = append(errs, &EvaluationError{Msg: fmt.Sprintf("workspace %q", ws.id), Pos: ws.node.Position, Err: err})
			failed = true
		}
	}
	if pol := ws.node.Save; pol != nil && ctx.Err() == nil && (!failed || pol.On == "always") {
		outcome := "success"
		if failed {
			outcome = "failure"
		}
		sctx, cancel := context.WithTimeout(ctx, CleanupTimeout*10)
		unblock := d.workers.block()
		err := ws.lease.Save(sctx, WorkspaceSaveRequest{Outcome: outcome, SavePolicy: *pol})
		unblock()
		cancel()
		if err != nil {
			errs = append(errs, wrapScopeError(ctx, ws.node.Position, fmt.Sprintf("workspace %q could not be saved", ws.id), err))
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	unblock := d.workers.block()
	defer unblock()
	if err := ws.lease.Release(rctx); err != nil {
		errs = append(errs, &EvaluationError{Msg: fmt.Sprintf("workspace %q could not be released", ws.id), Pos: ws.node.Position, Err: err})
	}
	cancel()
	err := errors.Join(errs...)
	ws.span.end(err, nil, nil)
	return err
}

// enterSandbox acquires the lease of an outer sandbox or builds the view
// of a nested one.
func (d *domain) enterSandbox(ctx context.Context, n *Sandbox, res resScope, parentSpan string, ep *effectPath) (*sbView, error) {
	root := n.Root
	if root == "" {
		root = "."
	}
	root, err := CheckLogicalPath(root, true)
	if err != nil {
		return nil, newError(n.Position, "sandbox(root=...): "+err.Error())
	}
	cwd := n.Cwd
	if cwd != "" {
		if cwd, err = CheckLogicalPath(cwd, true); err != nil {
			return nil, newError(n.Position, "sandbox(cwd=...): "+err.Error())
		}
	}
	if parent := res.sb; parent != nil {
		// A nested sandbox is a view of the outer lease: it may narrow but
		// never widen.
		access := n.Access
		if access == "" {
			access = parent.access
		}
		if parent.access == ReadOnly && access == ReadWrite {
			return nil, newError(n.Position, "a nested sandbox() cannot widen read-only access to read-write")
		}
		if cwd == "" {
			cwd = "."
		}
		return &sbView{lease: parent.lease, rt: parent.rt, access: access, root: path.Join(parent.root, root), cwd: cwd, ws: parent.ws}, nil
	}
	p := n.Provider
	if p == nil {
		p = d.rt.opts.SandboxProvider
	}
	if o := d.rt.opts.SandboxOverride; o != nil {
		p = o(p)
	}
	if p == nil {
		return nil, newError(n.Position, NoProviderMessage(n))
	}
	access := n.Access
	if access == "" {
		access = ReadOnly
	}
	if cwd == "" {
		cwd = "."
		if res.ws != nil && root == "." {
			cwd = res.ws.cwd
		}
	}
	view := &sbView{access: access, root: ".", cwd: cwd, outer: true, ws: res.ws}
	if res.ws != nil && access == ReadWrite && res.ws.serial != nil {
		// write_concurrency="serial": writable sibling sandboxes take turns
		// on the workspace.
		unblock := d.workers.block()
		err := res.ws.serial.Acquire(ctx)
		unblock()
		if err != nil {
			return nil, canceled(ctx, n.Position)
		}
		view.holdsSerial = true
	}
	if d.journal != nil && !d.journal.cassette {
		if sl, ok := p.(StatelessSandbox); (!ok || !sl.KeepsNoState()) && !d.journal.scopesKept {
			view.releaseSerial()
			return nil, newError(n.Position, fmt.Sprintf("sandbox provider %q keeps files of its own (a container or a copy) that a journaled run could not put back when it resumes; use local_sandbox() inside a workspace(), or run without --journal", p.Name()))
		}
		if err := d.sandboxEffect(n, p, access, ep); err != nil {
			view.releaseSerial()
			return nil, err
		}
	}
	req := &SandboxAcquireRequest{Access: access, Root: root, Cwd: cwd, EvaluationID: d.runID}
	if ws := res.ws; ws != nil {
		req.Workspace = &WorkspaceMaterialization{WorkspaceID: ws.id, LeaseID: ws.lease.ID(), Directory: ws.lease.Directory(), Cwd: ws.cwd,
			Provider: ws.name, WriteConcurrency: map[bool]string{true: "serial", false: "parallel"}[ws.serial != nil]}
	}
	view.span = d.trace.startSpan(parentSpan, "sandbox", "Sandbox", n.Position, attrs{"provider", p.Name(), "access", access}, nil)
	unblock := d.workers.block()
	lease, err := p.Acquire(ctx, req)
	unblock()
	if err == nil && lease == nil {
		err = errors.New("provider returned no lease")
	}
	if err != nil {
		view.releaseSerial()
		err = wrapScopeError(ctx, n.Position, fmt.Sprintf("sandbox could not be acquired from provider %q", p.Name()), err)
		view.span.end(err, nil, nil)
		return nil, err
	}
	view.lease, view.rt = lease, lease.Runtime()
	if view.rt == nil {
		err := errors.Join(newError(n.Position, fmt.Sprintf("sandbox provider %q returned a lease without a runtime", p.Name())), view.releaseLease(ctx))
		view.span.end(err, nil, nil)
		return nil, err
	}
	return view, nil
}

// leave releases an outer view's lease exactly once; nested views own
// nothing.
func (v *sbView) leave(ctx context.Context, cause error) error {
	if !v.outer {
		return nil
	}
	err := v.releaseLease(ctx)
	var spanErr error = err
	if spanErr == nil {
		spanErr = cause
	}
	v.span.end(spanErr, nil, nil)
	return err
}

func (v *sbView) releaseLease(ctx context.Context) error {
	defer v.releaseSerial()
	if v.lease == nil {
		return nil
	}
	lease := v.lease
	v.lease = nil
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		return fmt.Errorf("releasing the sandbox lease %s: %w", lease.ID(), err)
	}
	return nil
}

func (v *sbView) releaseSerial() {
	if v.holdsSerial {
		v.holdsSerial = false
		v.ws.serial.Release()
	}
}

// wrapScopeError names the scope that failed, keeping a cancellation
// cause visible.
func wrapScopeError(ctx context.Context, pos Position, msg string, err error) error {
	var conflict *WorkspaceConflictError
	if errors.As(err, &conflict) {
		return &EvaluationError{Msg: msg, Pos: pos, Err: err}
	}
	if ctx.Err() != nil && !errors.Is(err, context.Cause(ctx)) {
		err = errors.Join(context.Cause(ctx), err)
	}
	return &EvaluationError{Msg: msg, Pos: pos, Err: err}
}
