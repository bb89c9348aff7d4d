package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Question is a pending ask(): the run waits for its answer.
type Question struct {
	// ID identifies the question across replays: the id the program gave,
	// else its effect identity (path, position and occurrence).
	ID string `json:"id"`
	// Text is the question.
	Text string `json:"question"`
	// Schema is the answer's JSON Schema document, nil for free text.
	Schema map[string]any `json:"schema,omitempty"`
	// Pos is where ask() was called.
	Pos Position `json:"-"`
	// Source is Pos as file:line:col.
	Source string `json:"source,omitempty"`
}

// SuspendedError ends a journaled evaluation that reached questions with
// no recorded answer: everything was released as on failure and the
// journal was synced. Resume the run with the answers
// (ResumeOptions.Answers) to continue.
type SuspendedError struct {
	RunID     string
	Questions []Question
}

func (e *SuspendedError) Error() string {
	ids := make([]string, len(e.Questions))
	for i, q := range e.Questions {
		ids[i] = q.ID
	}
	return fmt.Sprintf("run %s is waiting for %d answer(s): %s", e.RunID, len(e.Questions), strings.Join(ids, ", "))
}

// errSuspend is what an unanswered ask() fails with inside the tree; the
// evaluation turns it into a *SuspendedError when nothing else failed.
var errSuspend = errors.New("the run is waiting for an answer")

// ResumeOptions configure Runtime.Resume.
type ResumeOptions struct {
	// RunID is the run the journal holds.
	RunID string
	// Journal holds the run's recorded effects.
	Journal Journal
	// RerunChanged accepts the changes the resume finds (see
	// DivergenceError): a changed or inserted effect and every effect
	// after it in its sequential context run live, the records of a
	// removed effect and of what follows it there are withdrawn, and the
	// rest is served. Without it the resume fails with the changes before
	// anything runs live.
	RerunChanged bool
	// OnChange, with RerunChanged, is called with each change accepted:
	// those the dry replay found, before anything runs live, then any the
	// live run meets (an effect after a rerun one whose request changed
	// in turn). It is called from the evaluation's goroutines, one call
	// at a time per change.
	OnChange func(*DivergenceError)
	// CommitWindow is EvaluateOptions.CommitWindow.
	CommitWindow time.Duration
	// Answers answer pending questions by id; each answer must already be
	// valid for its question's schema. They are recorded when the
	// question is reached.
	Answers map[string]any
	// Reads are the application reads made before evaluation (see
	// EvaluateOptions.Reads).
	Reads []RecordedRead
	// SourceRoot is EvaluateOptions.SourceRoot: it must be the directory
	// the recorded run named.
	SourceRoot string
	// UncheckedReads serves the recorded application reads (Reads, and
	// ComponentContext.Read) as they are, without comparing their
	// digests and without recording them again: for a resume whose
	// digests cannot match the recorded ones although the values may be
	// the same (the run's digests were keyed with a key this process does
	// not have). A read with no record is recorded as usual.
	UncheckedReads bool
}

// Resume evaluates value again against the effects recorded in
// opts.Journal: recorded effects are served without calling their
// providers, and the evaluation continues live at the first effect with
// no record. value must be the tree the recorded run evaluated, built
// again by the same program.
//
// Before anything runs live, Resume replays the program dry: nothing
// runs (an effect with no record stops its branch there), output (traces,
// print()) is dropped, and every change is found: a changed request, an
// effect inserted between recorded ones, a recorded effect no longer
// reached, also in a parallel() branch that the live run would reach
// after a sibling went live, and a changed include() or env() value.
// Unless opts.RerunChanged accepts them, Resume fails with them (a
// *DivergenceError, or several joined with errors.Join, ordered by
// position). Resources (workspace(), sandbox()) are acquired in that
// pass too.
func (r *Runtime) Resume(ctx context.Context, value any, opts ResumeOptions) (string, error) {
	if opts.Journal == nil {
		return "", errors.New("Resume needs the run's journal (ResumeOptions.Journal)")
	}
	if opts.RunID == "" {
		return "", errors.New("Resume needs the run's id (ResumeOptions.RunID)")
	}
	eo := EvaluateOptions{RunID: opts.RunID, Journal: opts.Journal, RerunChanged: opts.RerunChanged, Answers: opts.Answers, Reads: opts.Reads, SourceRoot: opts.SourceRoot, CommitWindow: opts.CommitWindow}
	eo.uncheckedReads = opts.UncheckedReads
	var changes []*DivergenceError
	if sz, ok := opts.Journal.(SizedJournal); !ok || sz.Len() > 0 {
		// A journal with no record has nothing to compare.
		var err error
		if changes, err = r.verify(ctx, value, eo); err != nil {
			return "", err
		}
	}
	if len(changes) > 0 && !opts.RerunChanged {
		return "", joinChanges(changes)
	}
	eo.onChange = opts.OnChange
	for _, c := range changes {
		if opts.OnChange != nil {
			opts.OnChange(c)
		}
		eo.reported = append(eo.reported, c.ID)
		if c.Kind == ChangeRemoved && c.Recorded != nil {
			eo.withdraw = append(eo.withdraw, c.Recorded)
		}
	}
	return r.Evaluate(ctx, value, eo)
}

// joinChanges is the error of a resume that found changes: the one
// change, or every change joined (errors.Join), a change found at
// several places of the run with the same message (a component called
// twice) once, saying how many.
func joinChanges(changes []*DivergenceError) error {
	if len(changes) == 1 {
		return changes[0]
	}
	var (
		errs  []error
		first = map[string]int{}
		times []int
	)
	for _, c := range changes {
		msg := c.Error()
		if i, ok := first[msg]; ok {
			times[i]++
			continue
		}
		first[msg] = len(errs)
		errs = append(errs, c)
		times = append(times, 1)
	}
	for i, n := range times {
		if n > 1 {
			errs[i] = fmt.Errorf("%w (found at %d places of the run)", errs[i], n)
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// verify is Resume's dry replay: it returns the changes of the program
// against its journal, ordered by position (the removed ones by where
// they were recorded, after the others), or the cancellation.
func (r *Runtime) verify(ctx context.Context, value any, eo EvaluateOptions) ([]*DivergenceError, error) {
	dry := *r
	dry.opts.Trace, dry.opts.OnStart, dry.opts.OnFinish = nil, nil, nil
	dry.opts.Ask = nil
	eo.verify = true
	var found []*DivergenceError
	eo.findings = &found
	_, err := dry.Evaluate(context.WithValue(ctx, dryKey{}, true), value, eo)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	// Any other failure (an effect with no record, a failure the live run
	// will meet and report in its turn) is left to the live run.
	return found, nil
}

// dryKey marks the context of Resume's dry replay (see DryRun).
type dryKey struct{}

// DryRun reports whether ctx belongs to a pass whose output is dropped:
// the dry replay of ResumeOptions.Verify, or an Expand. Bindings use it
// to keep print() quiet there. It is safe for concurrent use.
func DryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryKey{}).(bool)
	return v
}

// errFrontier stops a branch of the dry replay at its first effect with
// no record.
var errFrontier = errors.New("the dry replay reached an effect with no record")
