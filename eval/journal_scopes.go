package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
)

// wsCheckpoints is the checkpoint state of the workspace of a journaled
// evaluation.
type wsCheckpoints struct {
	cp  Checkpointer
	dir string
	mu  sync.Mutex
	// last is the newest checkpoint of the journal when the evaluation
	// started; restored is the one the directory holds now.
	last, restored string
	// live is set once a live effect started in the workspace: from then
	// on the directory is the run's own and is never restored again.
	live bool
}

// replayed restores the checkpoint of a replayed effect, unless the
// directory already holds a newer one or live work began.
func (w *wsCheckpoints) replayed(ctx context.Context, id string) error {
	if w == nil || id == "" {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live || id <= w.restored {
		return nil
	}
	if err := w.cp.Restore(ctx, id, w.dir); err != nil {
		return fmt.Errorf("restoring the workspace checkpoint %s: %w", id, err)
	}
	w.restored = id
	return nil
}

// goLive restores the newest checkpoint before the first live effect in
// the workspace: the files as they were when the recorded run stopped.
func (w *wsCheckpoints) goLive(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live {
		return nil
	}
	w.live = true
	if w.last != "" && w.last > w.restored {
		if err := w.cp.Restore(ctx, w.last, w.dir); err != nil {
			return fmt.Errorf("restoring the workspace checkpoint %s: %w", w.last, err)
		}
		w.restored = w.last
	}
	return nil
}

// take checkpoints the directory after a live effect.
func (w *wsCheckpoints) take(ctx context.Context) (string, error) {
	if w == nil {
		return "", nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	id, err := w.cp.Checkpoint(ctx, w.dir)
	if err != nil {
		return "", fmt.Errorf("checkpointing the workspace: %w", err)
	}
	return id, nil
}

// checkpointsOf returns the checkpoint state of the workspace around an
// effect, or nil.
func checkpointsOf(ws *wsState) *wsCheckpoints {
	if ws == nil {
		return nil
	}
	return ws.cps
}

// beforeLive prepares a live external effect: the workspace around it
// gets the recorded run's files, and the records so far become durable.
// external says the effect reaches outside the process; an in-process
// one (see InProcess) needs no sync.
func (d *domain) beforeLive(ctx context.Context, ws *wsState, pos Position, external bool) error {
	if err := checkpointsOf(ws).goLive(ctx); err != nil {
		return &EvaluationError{Msg: "the workspace cannot be restored from the journal", Pos: pos, Err: err}
	}
	if !external {
		return nil
	}
	return d.syncJournal(pos)
}

// replayedFiles restores the checkpoint a replayed effect recorded.
func (d *domain) replayedFiles(ctx context.Context, ws *wsState, rec *Effect) error {
	if err := checkpointsOf(ws).replayed(ctx, rec.Checkpoint); err != nil {
		return &EvaluationError{Msg: "the workspace cannot be restored from the journal", Pos: rec.Pos, Err: err}
	}
	return nil
}

// recordIn records a live effect that ran inside workspace ws (nil for
// none), with a checkpoint of the workspace's files; external says it
// reached outside the process (see record).
func (d *domain) recordIn(ctx context.Context, ws *wsState, e *Effect, external bool) error {
	if d.journal.cassette || d.journal.verify {
		return nil // nothing is recorded, so nothing is checkpointed
	}
	id, err := checkpointsOf(ws).take(ctx)
	if err != nil {
		return &EvaluationError{Msg: "cannot record " + e.Label + " in the journal", Pos: e.Pos, Err: err}
	}
	e.Checkpoint = id
	return d.record(e, external)
}

// checkDurable refuses, before anything runs, default providers that a
// journaled evaluation could not resume with (see InPlaceWorkspace and
// StatelessSandbox); providers named on nodes are checked when reached.
func (d *domain) checkDurable() error {
	if d.journal.cassette || d.journal.scopesKept {
		return nil
	}
	if p := d.rt.opts.WorkspaceProvider; p != nil {
		if ip, ok := p.(InPlaceWorkspace); ok && ip.EditsInPlace() {
			return fmt.Errorf("the default workspace provider %q edits its directory in place, so a journaled run could not put the files back as they were when it resumes; configure a persistent workspace (filesystem_workspace, s3_workspace) or run without --journal", p.Name())
		}
	}
	if p := d.rt.opts.SandboxProvider; p != nil {
		if sl, ok := p.(StatelessSandbox); !ok || !sl.KeepsNoState() {
			return fmt.Errorf("the default sandbox provider %q keeps files of its own (a container or a copy) that a journaled run could not put back when it resumes; configure local_sandbox() or run without --journal", p.Name())
		}
	}
	return nil
}

// workspaceResult is the recorded result of a workspace acquisition.
type workspaceResult struct {
	Revision string `json:"revision,omitempty"`
}

// workspaceEffect looks up the recorded acquisition of workspace n: it
// returns the effect to record, or the record to replay.
func (d *domain) workspaceEffect(n *Workspace, p WorkspaceProvider, path *effectPath) (entry, rec *Effect, err error) {
	label := "workspace()"
	if n.ID != "" {
		label = "workspace(id=" + strconv.Quote(n.ID) + ")"
	}
	at := path.next("workspace")
	e := &Effect{ID: at.id, Order: at.order, Kind: "workspace", Pos: d.journal.relPos(n.Position), Label: label,
		Request: fp("id", n.ID, "provider", p.Name())}
	if rec, err = d.replay(at, e.Kind, n.Position, label, e.Request); err != nil || rec != nil {
		return nil, rec, err
	}
	return e, nil, nil
}

// recordWorkspace records a live workspace acquisition with a checkpoint
// of the files as they were materialized.
func (d *domain) recordWorkspace(ctx context.Context, ws *wsState, e *Effect) error {
	var r workspaceResult
	if rl, ok := ws.lease.(RevisionLease); ok {
		r.Revision = rl.RevisionID()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return &EvaluationError{Msg: "cannot record " + e.Label + " in the journal", Pos: e.Pos, Err: err}
	}
	e.Result = b
	return d.recordIn(ctx, ws, e, true)
}

// sandboxEffect records an outer sandbox's acquisition (its provider and
// access), or checks it on resume.
func (d *domain) sandboxEffect(n *Sandbox, p SandboxProvider, access Access, path *effectPath) error {
	at := path.next("sandbox")
	e := &Effect{ID: at.id, Order: at.order, Kind: "sandbox", Pos: d.journal.relPos(n.Position), Label: "sandbox()",
		Request: fp("access", string(access), "provider", p.Name())}
	rec, err := d.replay(at, e.Kind, n.Position, e.Label, e.Request)
	if err != nil || rec != nil {
		return err
	}
	return d.record(e, true)
}
