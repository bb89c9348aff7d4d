package eval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// Durable runs. An evaluation given a Journal (EvaluateOptions.Journal)
// records every effect before its result is used, and an evaluation of
// the same program against the same journal (Runtime.Resume) serves every
// recorded effect from it without calling its provider, then continues
// live at the first effect with no record.
//
// An effect is keyed by a stable identity, never by its source position
// or by scheduling order: the path of enclosing component calls and
// fan-out branches, the effect's kind and its occurrence in its
// sequential context (see identity.go's description, repeated in the
// package documentation). Edits that change no effect keep every
// identity, and parallel() branches replay correctly whichever finished
// first.
//
// What is recorded (Effect.Kind):
//
//	agent    an agent() session's result (text or structured value) and its turns
//	script   a script()'s standard output
//	tool     a tool call made from component code, with its output
//	ask      a question's answer (ComponentContext.Ask)
//	include  the digest of an include()'s content (checked, never served)
//	read     the digest of an application read (an env() value; EvaluateOptions.Reads)
//
// Each record keeps a fingerprint of its request: short digests of the
// fields that determine the result (an agent's prompt, system, model,
// tools, schema, provider; a script's command). On resume the program
// is first replayed dry (nothing runs live) and compared with the
// journal: a record whose fingerprint no longer matches, an effect
// inserted between recorded ones and recorded effects the program no
// longer reaches are changes, each a *DivergenceError naming the node,
// and the resume fails with them before anything runs live, unless
// ResumeOptions.RerunChanged is set: then a changed or inserted effect
// and every effect after it in its sequential context run live, and the
// rest is served.
//
// A record is durable (Journal.Sync) within a short window after an
// effect that reaches outside the process completed (see
// EvaluateOptions.CommitWindow), whether or not another effect starts,
// and before any such effect starts: a crash re-runs only effects in
// flight and those that completed within the last window.
//
// What a workflow must not do for replay to be exact: decide anything
// from values that are not effects (the clock, random numbers, files read
// by Go code of an extension), or make nested evaluations of one
// component from several goroutines at once (use EvaluateAll).

// Journal is the durable record of one run's effects. The evaluator
// looks records up before it runs an effect (through Lookup, or once
// through Lister), calls Record after the effect succeeded and before
// its result is used, and Sync before it starts an effect outside the
// process (a provider session, a script, a tool call), within the
// commit window after recording one (EvaluateOptions.CommitWindow, from
// another goroutine), and when the evaluation ends: a crash never loses
// a record that a later external effect depended on, nor one that
// completed more than a window before it.
//
// A backend must guarantee, for the run it holds:
//   - Lookup returns the last record appended under an id, including
//     records appended by this process, and is safe for concurrent use;
//   - Record is safe for concurrent use and keeps records whole: after a
//     crash each record is either entirely present or absent (a torn last
//     record is dropped when the journal is opened again);
//   - after Sync returns nil, every record appended before the call
//     survives a crash of the process and of the machine;
//   - one run is resumed by at most one evaluation at a time.
//
// The file backend (package journal) keeps one append-only, checksummed
// file per run; NewMemoryJournal keeps records in memory, for tests.
type Journal interface {
	// Lookup returns the effect recorded under id, or nil.
	Lookup(id string) *Effect
	// Record appends e; it need not be durable until Sync.
	Record(e *Effect) error
	// Sync makes every record appended so far durable.
	Sync() error
}

// Sized is the optional Journal capability that reports how many effects
// the journal holds. An evaluation whose journal holds none when it
// starts calls no Lookup: effect identities are unique within an
// evaluation, so none of its effects can have a record. A new run pays
// for its records, not for looking them up.
type Sized interface {
	// Len returns the number of effect records (under distinct ids or
	// not) the journal holds. It is safe for concurrent use.
	Len() int
}

// Checkpointer is the Journal capability that makes workspaces durable:
// it keeps copies of a workspace's materialized files. In a journaled
// evaluation with a workspace(), the evaluator checkpoints the
// workspace's directory after every live effect inside it that could
// have written files (an agent session, a script) and names the
// checkpoint in the effect's record. On resume it restores, after each
// replayed effect, that effect's checkpoint, and before the first live
// effect (or the workspace's save) the last checkpoint the journal holds,
// so the files agents wrote before a crash are there. A journal without
// the capability makes workspace() fail in journaled evaluations.
type Checkpointer interface {
	// Checkpoint stores a copy of the regular files and directories under
	// dir and returns its id. Ids must sort (as strings) in the order the
	// checkpoints were taken.
	Checkpoint(ctx context.Context, dir string) (string, error)
	// Restore makes the tree under dir equal to checkpoint id: files it
	// lacks are removed, the others written.
	Restore(ctx context.Context, id, dir string) error
	// LastCheckpoint returns the id of the newest checkpoint named by a
	// record, or "".
	LastCheckpoint() string
}

// InPlaceWorkspace is an optional WorkspaceProvider capability: a
// provider whose EditsInPlace returns true materializes a directory the
// user owns (local_workspace) rather than a copy, so a resumed run
// cannot put its files back as they were; journaled evaluations refuse
// it.
type InPlaceWorkspace interface {
	EditsInPlace() bool
}

// StatelessSandbox is an optional SandboxProvider capability: a provider
// whose KeepsNoState returns true runs commands directly in the
// workspace's (or a host) directory and keeps no state of its own, so a
// resumed run loses nothing when the sandbox is acquired again. Journaled
// evaluations refuse every other sandbox provider: a container's or a
// copy's files outside the workspace could not be put back.
type StatelessSandbox interface {
	KeepsNoState() bool
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

// ScopeKeeper is an optional Journal capability: a journal whose
// KeepsScopes returns true belongs to a run whose executor makes
// sandbox() and workspace() scopes durable itself (a run on Temporal
// checkpoints a workspace on the worker that holds it and restores it
// wherever the scope is acquired again). The evaluator records and serves
// effects by identity as with any journal, but takes no checkpoints of
// its own (the journal need not be a Checkpointer) and accepts providers
// that keep files of their own or edit their directory in place.
type ScopeKeeper interface {
	KeepsScopes() bool
}

// LiveAsker is an optional Journal capability: with a journal whose
// AsksLive returns true, an ask() that has no recorded answer and no
// answer given (EvaluateOptions.Answers) asks through Options.Ask and
// records the answer, instead of suspending the run (a run on Temporal
// waits for the answer's signal).
type LiveAsker interface {
	AsksLive() bool
}

// Cassette is an optional Journal capability: a journal whose Cassette
// returns true is a recording replayed offline (aml test's "# cassette:"
// directive). Only agent sessions and answers are served from it; every
// other effect runs as it would without a journal, nothing is recorded or
// checkpointed, and an agent or a question with no recording fails
// instead of running live.
type Cassette interface {
	Cassette() bool
}

// Lister is the optional Journal capability that lists the records a
// journal holds, in the order they were appended. A resumed evaluation
// reads them once when it starts: with them it tells an effect the
// program inserted between recorded ones from the first effect the
// recorded run never reached, and finds recorded effects the program no
// longer reaches. Without it only a changed request is a divergence.
type Lister interface {
	// Effects returns every record, superseded ones included, in the
	// order they were appended. It is safe for concurrent use.
	Effects() []*Effect
}

// journaling is the journal state of one evaluation.
type journaling struct {
	j            Journal
	rerunChanged bool
	answers      map[string]any
	// cassette is set for a Cassette journal.
	cassette bool
	// scopesKept is set for a ScopeKeeper journal, asksLive for a
	// LiveAsker one.
	scopesKept, asksLive bool
	// fresh is set when the journal held no record at the start (see
	// Sized): nothing is looked up.
	fresh bool
	// verify is set in Resume's dry replay: nothing runs live.
	verify bool
	// ix indexes the journal's records when it lists them (Lister); nil
	// otherwise, and then nothing is known of insertions and removals.
	ix *index
	// commit makes records durable shortly after external effects.
	commit *committer
	// onChange is ResumeOptions.OnChange.
	onChange func(*DivergenceError)

	// uncheckedReads is ResumeOptions.UncheckedReads.
	uncheckedReads bool

	mu sync.Mutex
	// pending are the unanswered questions, in the order they were asked
	// (a suspended run lists them in source order).
	pending []Question
	asked   map[string]bool
	// visited, consumed and changes are a dry replay's findings: the
	// contexts it reached, the records it looked up, the changes.
	visited  map[string]*effectPath
	consumed map[string]bool
	changes  []*DivergenceError
	// reported are the identities of changes reported to onChange.
	reported map[string]bool
	// root is EvaluateOptions.SourceRoot, absolute; files maps a
	// position's file to its form in records.
	root  string
	files sync.Map
}

// relPos returns pos with its file relative to the source root, as
// records keep it: what a run recorded reads the same whatever the
// workflow file was called on the command line.
func (jr *journaling) relPos(pos Position) Position {
	if jr == nil || jr.root == "" || pos.File == "" {
		return pos
	}
	f, ok := jr.files.Load(pos.File)
	if !ok {
		rel := pos.File
		if abs, err := filepath.Abs(pos.File); err == nil {
			if r, err := filepath.Rel(jr.root, abs); err == nil {
				rel = filepath.ToSlash(r)
			}
		}
		f, _ = jr.files.LoadOrStore(pos.File, rel)
	}
	pos.File = f.(string)
	return pos
}

// record appends a live effect's record.
// external says the effect reached outside the process: its record is
// then made durable within the commit window.
func (d *domain) record(e *Effect, external bool) error {
	jr := d.journal
	if jr.cassette || jr.verify {
		return nil
	}
	if err := jr.j.Record(e); err != nil {
		return &EvaluationError{Msg: "cannot record " + e.Label + " in the journal", Pos: e.Pos, Err: err}
	}
	if external {
		jr.commit.soon()
	}
	return nil
}

// syncJournal makes the records so far durable before an external effect.
func (d *domain) syncJournal(pos Position) error {
	if d.journal.cassette || d.journal.verify {
		return nil
	}
	if err := d.journal.j.Sync(); err != nil {
		return &EvaluationError{Msg: "cannot sync the journal", Pos: pos, Err: err}
	}
	return nil
}

// checkReads records the application reads made before evaluation, or
// checks them against the recorded ones.
func (d *domain) checkReads(path *effectPath, reads []Read) error {
	for _, r := range reads {
		if err := d.read(path, r); err != nil {
			return err
		}
	}
	return nil
}

// read records or checks one application read in context path.
func (d *domain) read(path *effectPath, r Read) error {
	label := r.Kind + "(" + strconv.Quote(r.Name) + ")"
	var f fingerprint
	f.add("name", r.Kind+"\x00"+r.Name)
	f.addDigest("value", r.Digest)
	at := path.checkSlot("read", r.Kind+":"+r.Name)
	e := &Effect{ID: at.id, Kind: "read", Pos: d.journal.relPos(r.Pos), Label: label, Request: f.String()}
	if jr := d.journal; jr.uncheckedReads && !at.path.isLive() {
		if rec := jr.lookup(at.id); rec != nil && rec.Kind == e.Kind {
			jr.consume(at.id)
			return nil // served as recorded, unchecked
		}
	}
	rec, err := d.replay(at, e.Kind, r.Pos, label, e.Request)
	if err != nil || rec != nil {
		return err
	}
	return d.record(e, false)
}

// includeEffect records or checks the digest of an include()'s content.
func (d *domain) includeEffect(path *effectPath, n *Include, label, sum string) error {
	if d.journal == nil {
		return nil
	}
	var f fingerprint
	f.addDigest("content", sum)
	what := n.Path
	if what == "" {
		what = "src:" + n.Src
	}
	at := path.checkSlot("include", what)
	e := &Effect{ID: at.id, Kind: "include", Pos: d.journal.relPos(n.Position), Label: label, Request: f.String()}
	rec, err := d.replay(at, e.Kind, n.Position, label, e.Request)
	if err != nil || rec != nil {
		return err
	}
	return d.record(e, false)
}

// endJournal syncs the journal when the evaluation ends and turns an
// evaluation that failed only because questions wait for answers into a
// *SuspendedError.
func (d *domain) endJournal(err error) error {
	var serr error
	if !d.journal.cassette && !d.journal.verify {
		serr = errors.Join(d.journal.commit.stop(), d.journal.j.Sync())
	}
	jr := d.journal
	jr.mu.Lock()
	pending := append([]Question(nil), jr.pending...)
	jr.mu.Unlock()
	// Parallel branches ask in the order they happen to run: the run
	// lists its questions in source order, so that it says the same
	// every time.
	sort.SliceStable(pending, func(i, j int) bool {
		return bySource(pending[i].Pos, pending[i].ID, pending[j].Pos, pending[j].ID)
	})
	if err != nil && len(pending) > 0 && onlySuspended(err) {
		err = &SuspendedError{RunID: d.runID, Questions: pending}
	}
	if serr != nil {
		err = errors.Join(err, fmt.Errorf("syncing the journal: %w", serr))
	}
	return err
}

// onlySuspended reports whether every failure in err is an unanswered
// question.
func onlySuspended(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *ParallelError:
		for _, f := range e.Failures {
			if !onlySuspended(f.Err) {
				return false
			}
		}
		return len(e.Failures) > 0
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, x := range errs {
			if !onlySuspended(x) {
				return false
			}
		}
		return len(errs) > 0
	}
	if err == errSuspend {
		return true
	}
	if u := errors.Unwrap(err); u != nil {
		return onlySuspended(u)
	}
	return false
}

// RevisionLease is an optional WorkspaceLease capability: RevisionID
// names the revision the lease materialized ("" for none). A journaled
// evaluation records it with the acquisition, for aml runs show; the
// files themselves are put back from the acquisition's checkpoint.
type RevisionLease interface {
	RevisionID() string
}
