package eval

import (
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
// through ListingJournal), calls Record after the effect succeeded and before
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

// journaling is the journal state of one evaluation.
type journaling struct {
	j            Journal
	rerunChanged bool
	answers      map[string]any
	// cassette is set for a journal replayed as a cassette
	// (EvaluateOptions.Cassette).
	cassette bool
	// scopesKept is Options.ExecutorKeepsScopes, asksLive
	// Options.AskLive.
	scopesKept, asksLive bool
	// fresh is set when the journal held no record at the start (see
	// SizedJournal): nothing is looked up.
	fresh bool
	// verify is set in Resume's dry replay: nothing runs live.
	verify bool
	// ix indexes the journal's records when it lists them (ListingJournal); nil
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
func (d *domain) checkReads(path *effectPath, reads []RecordedRead) error {
	for _, r := range reads {
		if err := d.read(path, r); err != nil {
			return err
		}
	}
	return nil
}

// read records or checks one application read in context path.
func (d *domain) read(path *effectPath, r RecordedRead) error {
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
