package eval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
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

// VoidKind is the Kind of a record that withdraws the record appended
// before it under the same identity: a resume that accepted a change
// (RerunChanged) withdraws the records the changed program will not
// serve again, so that a later resume does not serve them either. A
// journal keeps it like any record; the evaluator treats an identity
// whose last record is void as having none.
const VoidKind = "void"

// Effect is one recorded effect of a journaled run.
type Effect struct {
	// ID is the effect's stable identity (see Journal).
	ID string
	// Kind is agent, script, tool, ask, workspace, sandbox, include,
	// read, RetryKind, or VoidKind.
	Kind string
	// Pos is the authored position of the node when it was recorded,
	// its file relative to the workflow's directory
	// (EvaluateOptions.SourceRoot). It names the node; it is not part of
	// the identity.
	Pos Position
	// Order holds the ordinal in its context of each segment of ID,
	// dotted ("3.0.1"; a branch's ordinal is its index), so that a
	// resume knows what the recorded run did after what. Checks
	// (include, read) have none.
	Order string
	// Label names the node in messages, for example agent(name="review").
	Label string
	// Request is the fingerprint of the request: "field=digest" pairs of
	// the fields that determine the result, sorted by field and joined
	// by ";", each digest short (see Fingerprint). Values are never
	// stored. RequestFields splits it.
	Request string
	// Result is the kind's result as JSON (nil for include and read).
	Result json.RawMessage
	// Checkpoint names the copy of the workspace's files the journal took
	// right after the effect (see Checkpointer), or "".
	Checkpoint string
}

type effectJSON struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind,omitempty"`
	File    string          `json:"file,omitempty"`
	Line    int32           `json:"line,omitempty"`
	Col     int32           `json:"col,omitempty"`
	Label   string          `json:"label,omitempty"`
	Request string          `json:"req,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	CP      string          `json:"cp,omitempty"`
	Order   string          `json:"o,omitempty"`
}

// MarshalJSON encodes the effect with its position as file, line and col
// (see AppendJSON).
func (e *Effect) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil), nil
}

// AppendJSON appends the effect's compact JSON object to dst: id, kind,
// file, line, col, o (the order), label, req, result and cp, the empty
// ones left out. Result must be valid compact JSON, as the evaluator
// records it. Journals encode an effect per record, so it is written by
// hand rather than through reflection.
func (e *Effect) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, e.ID)
	if e.Kind != "" {
		dst = append(dst, `,"kind":`...)
		dst = appendJSONString(dst, e.Kind)
	}
	if e.Pos.File != "" {
		dst = append(dst, `,"file":`...)
		dst = appendJSONString(dst, e.Pos.File)
	}
	if e.Pos.Line != 0 {
		dst = append(dst, `,"line":`...)
		dst = strconv.AppendInt(dst, int64(e.Pos.Line), 10)
	}
	if e.Pos.Col != 0 {
		dst = append(dst, `,"col":`...)
		dst = strconv.AppendInt(dst, int64(e.Pos.Col), 10)
	}
	if e.Order != "" {
		dst = append(dst, `,"o":`...)
		dst = appendJSONString(dst, e.Order)
	}
	if e.Label != "" {
		dst = append(dst, `,"label":`...)
		dst = appendJSONString(dst, e.Label)
	}
	if e.Request != "" {
		dst = append(dst, `,"req":`...)
		dst = appendJSONString(dst, e.Request)
	}
	if len(e.Result) > 0 {
		dst = append(dst, `,"result":`...)
		dst = append(dst, e.Result...)
	}
	if e.Checkpoint != "" {
		dst = append(dst, `,"cp":`...)
		dst = appendJSONString(dst, e.Checkpoint)
	}
	return append(dst, '}')
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (e *Effect) UnmarshalJSON(b []byte) error {
	var j effectJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Effect{ID: j.ID, Kind: j.Kind, Pos: Position{File: j.File, Line: j.Line, Col: j.Col}, Label: j.Label, Request: j.Request, Result: j.Result, Checkpoint: j.CP, Order: j.Order}
	return nil
}

// Fingerprint returns the short digest the evaluator records for a
// request field's value: 12 characters of base64url SHA-256 (72 bits),
// enough to notice a change, not to recover the value.
func Fingerprint(value string) string {
	sum := sha256.Sum256([]byte(value))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// digest is the short digest of a request field: 11 characters of
// base64url xxHash-64. It notices changes; it is not meant to resist an
// adversary (Fingerprint, SHA-256, digests application reads).
func digest(value string) string {
	var out [11]byte
	return string(appendDigest(out[:0], value))
}

// appendDigest appends the digest of value to dst: the 64 bits of
// xxHash-64, big-endian, in unpadded base64url (as
// base64.RawURLEncoding encodes the 8 bytes), written out by hand
// because a journaled run digests every field of every effect.
func appendDigest(dst []byte, value string) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	v := xxhash.Sum64String(value)
	for shift := 58; shift >= 4; shift -= 6 {
		dst = append(dst, alphabet[v>>uint(shift)&63])
	}
	return append(dst, alphabet[v&15<<2])
}

// Read is an application-owned value the program read before or outside
// the tree, such as an env() value: its digest is recorded, never the
// value, and a changed value is a divergence on resume.
type Read struct {
	// Kind names the source, for example "env".
	Kind string
	// Name names the value, for example the variable's name.
	Name string
	// Pos is where it was read.
	Pos Position
	// Digest identifies the value (Fingerprint of it, or of a marker for
	// "not set").
	Digest string
}

// ChangeKind says how a resumed program differs from its journal at one
// place (see DivergenceError).
type ChangeKind string

// The kinds of change.
const (
	// ChangeRequest: an effect whose place matches a record, but whose
	// request (or kind) changed.
	ChangeRequest ChangeKind = "changed"
	// ChangeInserted: an effect with no record, where the recorded run
	// went on past its place.
	ChangeInserted ChangeKind = "inserted"
	// ChangeRemoved: a recorded effect that the program no longer
	// reaches.
	ChangeRemoved ChangeKind = "removed"
)

// DivergenceError reports a place where the resumed program no longer
// matches its journal: the script, an included file or a read value
// changed since the journal recorded the run (see ChangeKind).
type DivergenceError struct {
	// ID is the identity of the place.
	ID string
	// Kind says what changed; "" reads as ChangeRequest.
	Kind ChangeKind
	// Pos and Label name the node: where the program reaches it now, or,
	// for ChangeRemoved, where it was when it was recorded (Recorded.Pos).
	Pos   Position
	Label string
	// Changed lists the request fields whose digests differ, sorted
	// (ChangeRequest).
	Changed []string
	// Recorded is the record at the place (nil for ChangeInserted).
	Recorded *Effect
	// Now, for ChangeRemoved, is the effect the program reaches in the
	// removed one's place, when there is one; its ID is set when the run
	// recorded it later.
	Now *Effect
	// Cassette is set when the journal is a cassette (see Cassette).
	Cassette bool
}

func (e *DivergenceError) Error() string {
	d := e.Describe()
	if e.Cassette {
		return d + "; restore the workflow (and its inputs) as they were, or record the cassette again with aml run --journal"
	}
	switch e.Kind {
	case ChangeInserted:
		return d + "; restore the workflow (and its inputs) as they were, or resume with --rerun-changed (ResumeOptions.RerunChanged) to run it and everything after it in its sequential context live"
	case ChangeRemoved:
		return d + "; restore the workflow (and its inputs) as they were, or resume with --rerun-changed (ResumeOptions.RerunChanged) to drop its record and run everything after it in its sequential context live"
	}
	return d + "; restore the workflow (and its inputs) as they were, or resume with --rerun-changed (ResumeOptions.RerunChanged) to run this effect and everything after it in its sequential context live"
}

// Describe says what changed, where, without the advice of Error.
func (e *DivergenceError) Describe() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	}
	b.WriteString(e.Label)
	switch e.Kind {
	case ChangeInserted:
		b.WriteString(" was inserted since the run was recorded: the journal has no record of it, but records of what the run did after its place")
	case ChangeRemoved:
		b.WriteString(" was removed since the run was recorded: the journal recorded it")
		if e.Pos.IsValid() {
			b.WriteString(" here")
		}
		b.WriteString(", and the program no longer reaches it")
		if n := e.Now; n != nil {
			b.WriteString("; in its place runs ")
			b.WriteString(n.Label)
			if n.Pos.IsValid() {
				b.WriteString(" at ")
				b.WriteString(n.Pos.String())
			}
			if n.ID != "" {
				b.WriteString(", which the run recorded after it")
			}
		}
	default:
		b.WriteString(" no longer matches the journal: ")
		b.WriteString(changedText(e.Changed))
		if e.Cassette {
			b.WriteString(" changed since the cassette was recorded")
		} else {
			b.WriteString(" changed since the run was recorded")
		}
		if r := e.Recorded; r != nil && r.Label != "" && r.Label != e.Label {
			b.WriteString(" (in its place the run recorded ")
			b.WriteString(r.Label)
			if r.Pos.IsValid() {
				b.WriteString(" at ")
				b.WriteString(r.Pos.String())
			}
			b.WriteString(")")
		}
	}
	return b.String()
}

func changedText(fields []string) string {
	switch len(fields) {
	case 0:
		return "its request"
	case 1:
		return "its " + fields[0]
	}
	return "its " + strings.Join(fields[:len(fields)-1], ", ") + " and " + fields[len(fields)-1]
}

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
	Reads []Read
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
	if sz, ok := opts.Journal.(Sized); !ok || sz.Len() > 0 {
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

// changedFields names the fields whose digests differ between two
// fingerprints (see Effect.Request), sorted.
func changedFields(old, now string) []string {
	if old == now {
		return nil
	}
	o, n := RequestFields(old), RequestFields(now)
	var out []string
	for k, v := range n {
		if o[k] != v {
			out = append(out, k)
		}
	}
	for k := range o {
		if _, ok := n[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// RequestFields splits a fingerprint (Effect.Request) into field names
// and digests.
func RequestFields(fp string) map[string]string {
	out := map[string]string{}
	for fp != "" {
		var pair string
		pair, fp, _ = strings.Cut(fp, ";")
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = v
		}
	}
	return out
}

// fingerprint builds an Effect.Request, appended to b from start: add
// fields in sorted order.
type fingerprint struct {
	b     []byte
	start int
}

// add appends field name with the digest of value.
func (f *fingerprint) add(name, value string) {
	f.b = appendField(f.b, f.start, name, value)
}

// addDigest appends field name with a digest computed elsewhere.
func (f *fingerprint) addDigest(name, sum string) {
	f.b = append(startField(f.b, f.start, name), sum...)
}

// appendField appends to fingerprint b (started at b[start]) field name
// with the digest of value.
func appendField(b []byte, start int, name, value string) []byte {
	return appendDigest(startField(b, start, name), value)
}

// startField appends to fingerprint b (started at b[start]) the name of
// a field.
func startField(b []byte, start int, name string) []byte {
	if len(b) > start {
		b = append(b, ';')
	}
	b = append(b, name...)
	return append(b, '=')
}

func (f *fingerprint) String() string { return string(f.b[f.start:]) }

// fp is the fingerprint of name, value pairs given in sorted order.
func fp(pairs ...string) string {
	var buf [128]byte
	f := fingerprint{b: buf[:0]}
	for i := 0; i+1 < len(pairs); i += 2 {
		f.add(pairs[i], pairs[i+1])
	}
	return f.String()
}

// MemoryJournal is a Journal that keeps its records in memory: for tests
// and embedders whose runs need not survive the process. It is safe for
// concurrent use.
type MemoryJournal struct {
	mu sync.Mutex
	// effects indexes order[:indexed] by id; Lookup indexes the rest.
	effects map[string]*Effect
	order   []*Effect
	indexed int
	syncs   int
	// trees are the checkpoints, by id.
	trees    map[string]memTree
	restores int
}

// NewMemoryJournal returns an empty in-memory journal.
func NewMemoryJournal() *MemoryJournal { return &MemoryJournal{effects: map[string]*Effect{}} }

// Lookup implements Journal.
func (m *MemoryJournal) Lookup(id string) *Effect {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.order[m.indexed:] {
		m.effects[e.ID] = e
	}
	m.indexed = len(m.order)
	return m.effects[id]
}

// Record implements Journal.
func (m *MemoryJournal) Record(e *Effect) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.order = append(m.order, e)
	return nil
}

// Len implements Sized.
func (m *MemoryJournal) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.order)
}

// Sync implements Journal; it only counts the calls.
func (m *MemoryJournal) Sync() error {
	m.mu.Lock()
	m.syncs++
	m.mu.Unlock()
	return nil
}

// Effects returns the records in the order they were appended.
func (m *MemoryJournal) Effects() []*Effect {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Effect(nil), m.order...)
}

// turnRecord is one turn of a recorded agent session.
type turnRecord struct {
	Index      int    `json:"index"`
	Kind       string `json:"kind"`
	SessionID  string `json:"sessionId,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
	Usage      string `json:"usage,omitempty"`
}

func turnOf(index int, kind string, r *AgentResponse) turnRecord {
	usage := r.Usage
	if usage == "" && r.Spent != nil {
		if b, err := json.Marshal(r.Spent); err == nil {
			usage = string(b)
		}
	}
	return turnRecord{Index: index, Kind: kind, SessionID: r.SessionID, StopReason: r.StopReason, Usage: usage}
}

// agentResult is the recorded result of an agent session.
type agentResult struct {
	Text       string       `json:"text,omitempty"`
	Structured any          `json:"structured,omitempty"`
	Turns      []turnRecord `json:"turns,omitempty"`
}

// appendAgentFingerprint appends to dst the digests of what determines an
// agent's result (see Effect.Request). system is the authored system
// text, before any skill fragment (which names staging paths that differ
// from run to run); staging paths in the prompt are replaced by a
// placeholder for the same reason.
func appendAgentFingerprint(dst []byte, req *AgentRequest, system string, p AgentProvider, schema *Schema, plan *agentPlan) []byte {
	prompt := req.Prompt
	if st := plan.staging; st != nil && st.dir != "" {
		prompt = strings.ReplaceAll(prompt, st.dir, "<staging>")
	}
	// Fields in sorted order.
	b, start := dst, len(dst)
	if len(req.FollowUps) > 0 {
		b = appendField(b, start, "follow-ups", strings.Join(req.FollowUps, "\x00"))
	}
	if len(plan.mcp) > 0 {
		names := make([]string, len(plan.mcp))
		for i, m := range plan.mcp {
			names[i] = m.GrantName()
		}
		b = appendField(b, start, "mcp servers", strings.Join(names, "\x00"))
	}
	if req.Model != "" {
		b = appendField(b, start, "model", req.Model)
	}
	if req.Permissions != DefaultPermissions() {
		b = appendField(b, start, "permissions", fmt.Sprintf("%s/%t/%t", req.Permissions.Filesystem, req.Permissions.Network, req.Permissions.Shell))
	}
	b = appendField(b, start, "prompt", prompt)
	b = appendField(b, start, "provider", p.Name())
	if schema != nil {
		b = appendField(b, start, "schema", schema.JSON())
	}
	if len(plan.skills) > 0 {
		var sb strings.Builder
		for _, sk := range plan.skills {
			sb.WriteString(sk.Name)
			sb.WriteByte(0)
			sb.WriteString(sk.Description)
			sb.WriteByte(0)
		}
		b = appendField(b, start, "skills", sb.String())
	}
	if system != "" {
		b = appendField(b, start, "system", system)
	}
	if len(plan.tools) > 0 {
		var sb strings.Builder
		for _, g := range plan.tools {
			sb.WriteString(g.Tool.Name())
			sb.WriteByte(0)
			sb.WriteString(g.Tool.Description())
			sb.WriteByte(0)
			sb.WriteString(g.Tool.InputSchema().JSON())
			sb.WriteByte(0)
		}
		b = appendField(b, start, "tools", sb.String())
	}
	return b
}

// replayedAgent turns a recorded agent result back into a response, with
// what its turns spent (their recorded usage reports, summed).
func replayedAgent(rec *Effect) (*AgentResponse, Usage, error) {
	if text, ok := plainText(rec.Result); ok {
		return &AgentResponse{Text: text}, Usage{}, nil
	}
	var r agentResult
	if err := decodeJSON(rec.Result, &r); err != nil {
		return nil, Usage{}, &EvaluationError{Msg: "the journal's record of " + rec.Label + " cannot be read", Pos: rec.Pos, Err: err}
	}
	resp := &AgentResponse{Text: r.Text, Structured: r.Structured}
	var spent Usage
	for _, t := range r.Turns {
		u, err := ParseUsage(t.Usage)
		if err != nil {
			return nil, Usage{}, &EvaluationError{Msg: "the journal's record of " + rec.Label + " has a usage report that cannot be read", Pos: rec.Pos, Err: err}
		}
		spent = spent.Add(u)
	}
	if n := len(r.Turns); n > 0 {
		t := r.Turns[n-1]
		resp.SessionID, resp.StopReason, resp.Usage = t.SessionID, t.StopReason, t.Usage
	}
	return resp, spent, nil
}

// RecordedUsage returns what a journaled agent effect's session spent, as
// its turns' usage reports recorded it (the metered spend of a metered
// session), and whether the record says; other effects spent nothing.
func RecordedUsage(e *Effect) (Usage, bool) {
	if e == nil || e.Kind != "agent" {
		return Usage{}, false
	}
	_, u, err := replayedAgent(e)
	if err != nil || u.IsZero() {
		return Usage{}, false
	}
	if u.ModelCalls == 0 {
		// Unmetered turns report tokens, not calls: a turn is one.
		var r agentResult
		if decodeJSON(e.Result, &r) == nil {
			u.ModelCalls = int64(len(r.Turns))
		}
	}
	return u, true
}

// plainText reads the result {"text":"..."} whose text needs no
// unescaping, as most recorded texts are, without a JSON decoder; ok is
// false for anything else.
func plainText(b []byte) (string, bool) {
	const prefix, suffix = `{"text":"`, `"}`
	if len(b) < len(prefix)+len(suffix) || string(b[:len(prefix)]) != prefix || string(b[len(b)-len(suffix):]) != suffix {
		return "", false
	}
	body := b[len(prefix) : len(b)-len(suffix)]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// recordAgent records a live agent result that passed its checks.
func (d *domain) recordAgent(ctx context.Context, ws *wsState, e *Effect, resp *AgentResponse, structured bool, turns []turnRecord, external bool) error {
	b := make([]byte, 0, len(resp.Text)+32+48*len(turns))
	b = append(b, '{')
	if structured {
		b = append(b, `"structured":`...)
		var ok bool
		if b, ok = appendJSON(b, resp.Structured); !ok {
			s, err := CanonicalJSON(resp.Structured)
			if err != nil {
				return &EvaluationError{Msg: "cannot record " + e.Label + " in the journal", Pos: e.Pos, Err: err}
			}
			b = append(b[:len(`{"structured":`)], s...)
		}
	} else {
		b = append(b, `"text":`...)
		b = appendJSONString(b, resp.Text)
	}
	if len(turns) > 0 {
		b = append(b, `,"turns":[`...)
		for i, t := range turns {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(t.Index), 10)
			b = append(b, `,"kind":`...)
			b = appendJSONString(b, t.Kind)
			for _, f := range [...]struct{ k, v string }{{"sessionId", t.SessionID}, {"stopReason", t.StopReason}, {"usage", t.Usage}} {
				if f.v != "" {
					b = append(b, ',', '"')
					b = append(b, f.k...)
					b = append(b, '"', ':')
					b = appendJSONString(b, f.v)
				}
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	e.Result = append(b, '}')
	return d.recordIn(ctx, ws, e, external)
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

func inProcess(p AgentProvider) bool {
	ip, ok := p.(InProcess)
	return ok && ip.InProcess()
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

// decodeJSON decodes a recorded result, numbers as int64 or float64 as
// the evaluator's JSON-like values have them.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	switch r := v.(type) {
	case *agentResult:
		r.Structured = normalizeNumbers(r.Structured)
	case *toolResult:
		r.Output = normalizeNumbers(r.Output)
	case *askResult:
		r.Answer = normalizeNumbers(r.Answer)
	}
	return nil
}

// memTree is one in-memory checkpoint: slash paths to files ("" data
// and dir set for directories).
type memTree map[string]memFile

type memFile struct {
	dir  bool
	mode fs.FileMode
	data []byte
}

// Checkpoint implements Checkpointer: the tree under dir is copied into
// memory.
func (m *MemoryJournal) Checkpoint(ctx context.Context, dir string) (string, error) {
	tree := memTree{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case de.IsDir():
			tree[rel] = memFile{dir: true, mode: info.Mode().Perm()}
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = memFile{mode: info.Mode().Perm(), data: b}
		default:
			return fmt.Errorf("%s is neither a regular file nor a directory", rel)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.trees == nil {
		m.trees = map[string]memTree{}
	}
	id := fmt.Sprintf("%08d", len(m.trees)+1)
	m.trees[id] = tree
	return id, nil
}

// Restore implements Checkpointer.
func (m *MemoryJournal) Restore(ctx context.Context, id, dir string) error {
	m.mu.Lock()
	tree, ok := m.trees[id]
	m.restores++
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("no checkpoint %q", id)
	}
	var stale []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if f, ok := tree[filepath.ToSlash(rel)]; !ok || f.dir != de.IsDir() {
			stale = append(stale, p)
			if de.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents first
	for _, rel := range paths {
		f := tree[rel]
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if f.dir {
			if err := os.MkdirAll(p, f.mode|0o700); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// LastCheckpoint implements Checkpointer.
func (m *MemoryJournal) LastCheckpoint() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.order) - 1; i >= 0; i-- {
		if c := m.order[i].Checkpoint; c != "" {
			return c
		}
	}
	return ""
}

// Restores counts the Restore calls, for tests.
func (m *MemoryJournal) Restores() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restores
}

// Truncated returns a journal holding the first n records of m and all
// its checkpoints: the journal a crash after the n-th record would leave.
// It is for tests of resumption.
func (m *MemoryJournal) Truncated(n int) *MemoryJournal {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMemoryJournal()
	out.order = append(out.order, m.order[:min(n, len(m.order))]...)
	out.trees = maps.Clone(m.trees)
	return out
}

// RevisionLease is an optional WorkspaceLease capability: RevisionID
// names the revision the lease materialized ("" for none). A journaled
// evaluation records it with the acquisition, for aml runs show; the
// files themselves are put back from the acquisition's checkpoint.
type RevisionLease interface {
	RevisionID() string
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
