package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/durable"
)

// logName is the journal file inside a run's directory; the process
// that holds the run holds an flock(2) lock on it.
const logName = "journal.log"

// Permissions of what this package creates.
const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
)

var (
	// ErrLocked is wrapped by the error of Open when another Run, in
	// this process or another, holds the run.
	ErrLocked = errors.New("the run is locked")
	// ErrCorrupt is wrapped by the error of Open (and Summary.ReadErr)
	// when a record that is not the file's last line is damaged, which a
	// crash does not do, or when the run has no metadata.
	ErrCorrupt = errors.New("corrupt journal")
	// ErrFormat is wrapped by the error of Open (and Summary.ReadErr,
	// ReadEffects) for a run recorded in a format this version does not
	// resume.
	ErrFormat = errors.New("unsupported journal format")
	// ErrClosed is wrapped by the errors of a Run's methods that write
	// after Close.
	ErrClosed = fmt.Errorf("the run's journal is closed: %w", fs.ErrClosed)
)

// Meta describes a run: what was run and how. It is the first record of
// a run's journal and never changes. A Meta is a plain value.
type Meta struct {
	// Workflow is the workflow file's path, as the run was given it.
	Workflow string
	// WorkflowDigest is the hex SHA-256 of the workflow file's content.
	WorkflowDigest string
	// Entry names the entry point that was evaluated.
	Entry string
	// Options are the run's options as JSON, opaque to this package (the
	// CLI keeps its flags there); nil for none. It is stored compacted.
	Options json.RawMessage
	// Started is when the run started; Create sets it to the current
	// time when it is zero. It is stored with nanosecond precision.
	Started time.Time
	// Owner, given to Create, is the owner marker of the process that
	// creates the run: Create writes it as the Owner of the run's first
	// state record (see StateRecord.Owner), not in the metadata, and Meta
	// reads back without it.
	Owner string
}

// State is a run's state, as its last state record says.
type State string

// The states of a run. Running, Suspended, Failed and Succeeded are
// recorded; Interrupted is only reported by List.
const (
	// Running: the run is being evaluated (or was, when it crashed).
	Running State = "running"
	// Suspended: the run waits for answers to its questions.
	Suspended State = "suspended"
	// Failed: the evaluation ended with an error.
	Failed State = "failed"
	// Succeeded: the evaluation ended with a result.
	Succeeded State = "succeeded"
	// Interrupted is what List reports for a run whose last state is
	// Running while no process holds it: the process died mid-run.
	Interrupted State = "interrupted"
)

// StateRecord is one state record of a run. It is a plain value.
type StateRecord struct {
	// State is Running, Suspended, Failed or Succeeded.
	State State
	// At is when the state was recorded (stored to the millisecond);
	// SetState sets it to the current time when it is zero.
	At time.Time
	// Error is the failure's message (Failed).
	Error string
	// Questions are the questions the run waits for (Suspended).
	Questions []eval.Question
	// Result is the run's result (Succeeded): what it printed, so that
	// a run killed between finishing and printing loses nothing.
	Result string
	// Owner is the owner marker (the AML_OWNER value) of the process
	// that runs the run (Running): a later resume ends what that process
	// left running if it died.
	Owner string
}

// Torn describes a damaged last line of a journal: a record whose write
// a crash interrupted. It is ignored when the journal is read and
// truncated away before the next record is appended.
type Torn struct {
	// Offset is where the line starts in journal.log.
	Offset int64
	// Bytes is the line's length, its newline included if it has one.
	Bytes int
	// Reason says what is wrong with it.
	Reason string
}

// Run is one run's journal, held open: it implements eval.Journal,
// records the run's states, and keeps the run's workspace checkpoints
// (eval.Checkpointer). Create or Open makes one and takes the run's
// lock; Close releases it. All methods are safe for concurrent use.
type Run struct {
	id   string
	dir  string // the run's directory
	path string // its journal.log
	meta Meta
	torn *Torn

	// cpMu serializes Checkpoint, Restore, the pruning of checkpoints
	// and Close, and guards cp; it is taken before syncMu and mu, never
	// after, so that a long checkpoint holds up no Record.
	cpMu sync.Mutex
	cp   checkpoints

	// syncMu serializes fsyncs (and Close), so that concurrent Syncs
	// share one fsync; it is taken before mu, never after.
	syncMu sync.Mutex

	mu       sync.RWMutex
	owners   []string // the Owner of every Running state record
	f        *os.File
	w        *bufio.Writer
	buf      []byte // scratch for framing records
	truncate bool   // the torn tail is still in the file
	state    StateRecord
	// effects indexes order[:indexed] by id; Lookup indexes the rest,
	// so a new run that looks nothing up (see eval.SizedJournal) keeps no index.
	effects map[string]*eval.Effect
	order   []*eval.Effect
	indexed int
	// lastCheckpoint is the Checkpoint of the last effect in order that
	// names one.
	lastCheckpoint string
	// qMu guards the queue of effects recorded but not yet written (see
	// Record); it is taken after mu, never before.
	qMu      sync.Mutex
	queue    []*eval.Effect
	spare    []*eval.Effect // the last written queue, for reuse
	draining bool           // a drain goroutine is running
	drainers sync.WaitGroup
	qClosed  bool  // Close has begun: Record fails
	qErr     error // r.err once set, for Record

	// newDirs is the journal directory of a run created here whose
	// directory entries are not yet durable; the first fsync syncs them.
	newDirs string
	// lastAt is the time ("at", in milliseconds) of the last record
	// written with one.
	lastAt int64
	// size is the number of bytes appended since Open or Create, and
	// wroteBack how many of them had their writeback started.
	size, wroteBack int64
	// Records appended (to w), written to f, and known to be durable.
	appended, flushed, synced uint64
	err                       error // sticky: a write or fsync failed
	closed                    bool
	fsyncs                    int // test hook: fsyncs of the journal file
}

// drainBatch is how many recorded effects wait before a goroutine
// starts writing them: a run of in-process effects, which syncs only at
// its end, encodes its records beside the evaluation instead of in it.
const drainBatch = 64

var (
	_ eval.Journal      = (*Run)(nil)
	_ eval.SizedJournal = (*Run)(nil)
)

// Create starts a new run in dir: it makes dir (0700) if it is missing,
// the run's directory DIR/<id> (0700, id from eval.NewRunID) with its
// journal.log (0600), takes the run's lock (an flock on journal.log), and
// writes the metadata record and a Running state record. The first Sync (or Close)
// makes them durable with the new directory entries: a new run costs no
// fsync until something outside the process depends on it. The returned
// Run holds the run until Close. Create may be called concurrently.
func Create(dir string, meta Meta) (*Run, error) {
	if meta.Started.IsZero() {
		meta.Started = time.Now()
	}
	meta.Started = meta.Started.Round(0)
	return create(dir, eval.NewRunID(), meta)
}

func create(dir, id string, meta Meta) (_ *Run, err error) {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("cannot create the journal directory: %w", err)
	}
	runDir := filepath.Join(dir, id)
	if err := os.Mkdir(runDir, dirPerm); err != nil {
		return nil, fmt.Errorf("cannot create the run's directory: %w", err)
	}
	r := &Run{id: id, dir: runDir, path: filepath.Join(runDir, logName), meta: meta, effects: map[string]*eval.Effect{}}
	defer func() {
		if err != nil {
			r.closeFiles()
			os.RemoveAll(runDir)
		}
	}()
	r.f, err = os.OpenFile(r.path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, filePerm)
	if err != nil {
		return nil, fmt.Errorf("cannot create the run's journal: %w", err)
	}
	// The file is new, so another holder can only be a List or Prune
	// probing it for a moment: wait for it, briefly.
	for try := 0; ; try++ {
		held, err := flock(r.f, false)
		if err == nil && !held {
			break
		}
		if err == nil && try < 100 {
			time.Sleep(time.Millisecond)
			continue
		}
		if err == nil {
			err = ErrLocked
		}
		return nil, fmt.Errorf("cannot lock %s: %w", r.path, err)
	}
	r.state = StateRecord{State: Running, At: meta.Started, Owner: meta.Owner}
	if meta.Owner != "" {
		r.owners = []string{meta.Owner}
	}
	meta.Owner = ""
	r.meta.Owner = ""
	b, err := appendMeta(nil, meta)
	if err != nil {
		return nil, err
	}
	if b, err = appendState(b, r.state); err != nil {
		return nil, err
	}
	if _, err := r.f.Write(b); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", r.path, err)
	}
	// The first Sync makes the new run durable, with its directory
	// entries: until then nothing outside the process depends on it (a
	// run lost to a machine crash before it lists as interrupted at
	// creation, or not at all).
	r.appended, r.flushed, r.newDirs = 1, 1, dir
	r.w = bufio.NewWriterSize(r.f, 64<<10)
	r.lastAt = r.state.At.UnixMilli()
	return r, nil
}

// Open opens the run runID in dir: it takes the run's lock (failing with
// an error wrapping ErrLocked while another Run, in any process, holds
// it) and reads all its records, checking each one's checksum. A torn
// last line is ignored (see Run.Torn); a damaged record before the last
// line fails with an error wrapping ErrCorrupt that names the file and
// line. A missing run fails with an error wrapping fs.ErrNotExist, and
// a journal.log that is not a regular file (or is a symbolic link) one
// wrapping ErrNotRegular, before anything reads it. The
// returned Run holds the run until Close. Open may be called
// concurrently.
func Open(dir, runID string) (*Run, error) {
	if err := checkID(runID); err != nil {
		return nil, err
	}
	runDir := filepath.Join(dir, runID)
	path := filepath.Join(runDir, logName)
	if _, err := os.Lstat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noRun(dir, runID)
		}
		return nil, fmt.Errorf("cannot open run %s: %w", runID, err)
	}
	r := &Run{id: runID, dir: runDir, path: path, effects: map[string]*eval.Effect{}}
	if err := r.open(dir); err != nil {
		r.closeFiles()
		return nil, err
	}
	return r, nil
}

// open takes the lock of the run in dir that Open made r for, and reads
// its journal. On failure the caller closes what it opened.
func (r *Run) open(dir string) error {
	runID, path := r.id, r.path
	var err error
	if r.f, err = openLog(path, os.O_RDWR|os.O_APPEND); err != nil {
		if errors.Is(err, fs.ErrNotExist) { // pruned meanwhile
			return noRun(dir, runID)
		}
		return fmt.Errorf("cannot open run %s: %w", runID, err)
	}
	held, err := flock(r.f, false)
	if err != nil {
		return fmt.Errorf("cannot lock %s: %w", path, err)
	}
	if held {
		return fmt.Errorf("run %s is being run or resumed by another process right now; wait for that to finish, or stop it, and try again: %w", runID, ErrLocked)
	}
	if err := r.load(); err != nil {
		return err
	}
	r.w = bufio.NewWriterSize(r.f, 64<<10)
	return nil
}

func noRun(dir, runID string) error {
	return fmt.Errorf("there is no run %s in %s: %w", runID, dir, fs.ErrNotExist)
}

// checkID refuses run ids that are not a plain directory name.
func checkID(id string) error {
	if id == "" {
		return errors.New("the run id is empty")
	}
	if strings.ContainsAny(id, `/\`+"\x00") || strings.Contains(id, "..") || strings.HasPrefix(id, ".") {
		return fmt.Errorf("invalid run id %q: a run id names a directory, with no path separators and no leading dot or \"..\"", id)
	}
	return nil
}

// load reads the journal file into r.
func (r *Run) load() error {
	haveMeta, haveState := false, false
	torn, err := scan(r.path, r.f, func(line int, _ int64, payload []byte) error {
		rec, err := decodeRecord(payload)
		if err != nil {
			return err
		}
		if !haveMeta {
			if rec.t != typeMeta {
				return fmt.Errorf("%w: %s line %d: the first record is not the run's metadata", ErrCorrupt, r.path, line)
			}
			r.meta, haveMeta = rec.meta, true
			return nil
		}
		switch rec.t {
		case typeMeta:
			return badf("a second metadata record")
		case typeEffect:
			r.order = append(r.order, rec.effect)
			if c := rec.effect.Checkpoint; c != "" {
				r.lastCheckpoint = c
			}
		case typeState:
			r.state, haveState = rec.state, true
			if o := rec.state.Owner; o != "" && !slices.Contains(r.owners, o) {
				r.owners = append(r.owners, o)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !haveMeta || !haveState {
		return fmt.Errorf("%w: %s has no complete metadata and state records: the run's creation was interrupted", ErrCorrupt, r.path)
	}
	r.torn = torn
	r.truncate = torn != nil
	return nil
}

// ID returns the run's id. It is safe for concurrent use.
func (r *Run) ID() string { return r.id }

// Dir returns the run's directory. It is safe for concurrent use.
func (r *Run) Dir() string { return r.dir }

// Meta returns the run's metadata. It is safe for concurrent use.
func (r *Run) Meta() Meta {
	m := r.meta
	m.Options = bytes.Clone(m.Options)
	return m
}

// Torn returns the torn last line Open found and ignored, or nil. It is
// safe for concurrent use.
func (r *Run) Torn() *Torn {
	if r.torn == nil {
		return nil
	}
	t := *r.torn
	return &t
}

// State returns the state of the run's last state record. It is safe
// for concurrent use.
func (r *Run) State() State {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state.State
}

// LastState returns the run's last state record. It is safe for
// concurrent use.
func (r *Run) LastState() StateRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st := r.state
	st.Questions = append([]eval.Question(nil), st.Questions...)
	return st
}

// Owners returns the owner markers of the processes that ran or resumed
// the run (the Owner of its Running state records), oldest first. It is
// safe for concurrent use.
func (r *Run) Owners() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.owners)
}

// Questions returns the questions the run waits for: those of its last
// state record when that is Suspended, else nil. It is safe for
// concurrent use.
func (r *Run) Questions() []eval.Question {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.state.State != Suspended {
		return nil
	}
	return append([]eval.Question(nil), r.state.Questions...)
}

// Effects returns every effect record of the run in file order, the
// superseded ones included, then the ones appended since Open. The
// effects are shared: do not modify them. It is safe for concurrent use.
func (r *Run) Effects() []*eval.Effect {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeQueuedLocked()
	return append([]*eval.Effect(nil), r.order...)
}

// Lookup implements eval.Journal: it returns the last effect recorded
// under id, read from the file or appended since, or nil. The effect is
// shared: do not modify it. It is safe for concurrent use, and keeps
// working after Close.
func (r *Run) Lookup(id string) *eval.Effect {
	r.mu.RLock()
	if r.indexed == len(r.order) && !r.anyQueued() {
		defer r.mu.RUnlock()
		return r.effects[id]
	}
	r.mu.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeQueuedLocked()
	for _, e := range r.order[r.indexed:] {
		r.effects[e.ID] = e
	}
	r.indexed = len(r.order)
	return r.effects[id]
}

// Len implements eval.SizedJournal: the number of effect records the run holds.
// It is safe for concurrent use.
func (r *Run) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	r.qMu.Lock()
	defer r.qMu.Unlock()
	return len(r.order) + len(r.queue)
}

// anyQueued reports whether recorded effects wait to be written.
func (r *Run) anyQueued() bool {
	r.qMu.Lock()
	defer r.qMu.Unlock()
	return len(r.queue) > 0
}

// Record implements eval.Journal: it appends e to the journal (durable
// once Sync returns) and makes it what Lookup returns for its id. e must
// have an id and a kind, its Result must be compact JSON, and it must
// not be modified afterwards. An effect recorded without a label reads
// back (after Open) labelled with its kind, as "agent()".
//
// Records are encoded and written in order, by a goroutine once enough
// of them wait and at the latest by the next Sync, SetState, Lookup,
// Effects or Close. Once a write to the file failed every later Record
// fails, and Sync reports the failure. It is safe for concurrent use.
func (r *Run) Record(e *eval.Effect) error {
	if e == nil {
		return errors.New("cannot record a nil effect")
	}
	if e.ID == "" {
		return fmt.Errorf("cannot record the effect %q: it has no id", e.Label)
	}
	if e.Kind == "" {
		return fmt.Errorf("cannot record the effect %s: it has no kind", e.ID)
	}
	if bytes.IndexByte(e.Result, '\n') >= 0 {
		// Everything else is escaped when encoded.
		return fmt.Errorf("cannot record the effect %s: its result contains a newline (a result is compact JSON)", e.ID)
	}
	r.qMu.Lock()
	switch {
	case r.qClosed:
		r.qMu.Unlock()
		return fmt.Errorf("run %s: %w", r.id, ErrClosed)
	case r.qErr != nil:
		r.qMu.Unlock()
		return r.qErr
	}
	r.queue = append(r.queue, e)
	start := !r.draining && len(r.queue) >= drainBatch
	if start {
		r.draining = true
		r.drainers.Add(1)
	}
	r.qMu.Unlock()
	if start {
		go r.drain()
	}
	return nil
}

// drain writes queued records until none wait.
func (r *Run) drain() {
	defer r.drainers.Done()
	for {
		r.mu.Lock()
		r.writeQueuedLocked()
		r.startWritebackLocked()
		r.mu.Unlock()
		r.qMu.Lock()
		if len(r.queue) == 0 || r.qErr != nil {
			r.draining = false
			r.qMu.Unlock()
			return
		}
		r.qMu.Unlock()
	}
}

// writeQueuedLocked encodes the queued records and appends them to the
// buffer, in the order they were recorded, timed now: a record waits at
// most for drainBatch others, or until the next Sync. A record appended
// in the same millisecond as the one before it goes without its time.
// After a failure (which is sticky) the rest are dropped. r.mu is held.
func (r *Run) writeQueuedLocked() {
	r.qMu.Lock()
	batch := r.queue
	r.queue, r.spare = r.spare[:0], nil
	r.qMu.Unlock()
	if len(batch) > 0 {
		now := time.Now().UnixMilli()
		for _, e := range batch {
			at := now
			if at == r.lastAt {
				at = 0
			} else {
				r.lastAt = at
			}
			if err := r.appendLocked(func(b []byte) ([]byte, error) { return appendEffect(b, e, at) }); err != nil {
				if r.err == nil {
					r.failLocked(err)
				}
				break
			}
			r.order = append(r.order, e)
			if c := e.Checkpoint; c != "" {
				r.lastCheckpoint = c
			}
		}
	}
	clear(batch)
	r.qMu.Lock()
	if r.spare == nil && cap(batch) <= 4096 {
		r.spare = batch[:0]
	}
	r.qMu.Unlock()
}

// SetState appends the state record st and fsyncs the journal: the CLI
// records Suspended (with the questions) or Failed (with the error) or
// Succeeded when an evaluation ends, and Running when it resumes a run.
// st.State must be Running, Suspended, Failed or Succeeded; a zero st.At
// is the current time. Once a Succeeded record is synced, SetState
// removes the run's workspace checkpoints (objects/ and checkpoints/):
// they only serve resuming the run. Failing to remove them is not an
// error (Prune removes the whole run later); a Checkpoint after that
// starts them over, numbered after the removed ones. It is safe for
// concurrent use.
func (r *Run) SetState(st StateRecord) error {
	switch st.State {
	case Running, Suspended, Failed, Succeeded:
	default:
		return fmt.Errorf("cannot record the state %q of run %s: a recorded state is running, suspended, failed or succeeded", st.State, r.id)
	}
	if st.At.IsZero() {
		st.At = time.Now()
	}
	st.Questions = append([]eval.Question(nil), st.Questions...)
	r.mu.Lock()
	r.writeQueuedLocked()
	err := r.appendLocked(func(b []byte) ([]byte, error) { return appendState(b, st) })
	if err == nil {
		r.state, r.lastAt = st, st.At.UnixMilli()
		if st.Owner != "" && !slices.Contains(r.owners, st.Owner) {
			r.owners = append(r.owners, st.Owner)
		}
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := r.Sync(); err != nil {
		return err
	}
	if st.State == Succeeded {
		// The checkpoints only served resuming the run. Failing to remove
		// them fails nothing: Prune removes the whole run later.
		r.pruneCheckpoints()
	}
	return nil
}

// appendLocked frames a record with enc and appends it to the buffer,
// truncating a torn tail away first. r.mu is held.
func (r *Run) appendLocked(enc func([]byte) ([]byte, error)) error {
	if err := r.usableLocked(); err != nil {
		return err
	}
	b, err := enc(r.buf[:0])
	if err != nil {
		return err
	}
	if cap(b) <= 64<<10 {
		r.buf = b
	}
	if r.truncate {
		if err := r.f.Truncate(r.torn.Offset); err != nil {
			return r.failLocked(fmt.Errorf("cannot truncate the torn last record of %s: %w", r.path, err))
		}
		r.truncate = false
	}
	if _, err := r.w.Write(b); err != nil {
		return r.failLocked(fmt.Errorf("cannot write %s: %w", r.path, err))
	}
	r.appended++
	r.size += int64(len(b))
	return nil
}

// writebackEvery is how many appended bytes wait before the drain
// goroutine starts their writeback (see startWriteback): a long run's
// Sync then waits for the last of them only.
const writebackEvery = 256 << 10

// startWritebackLocked starts the writeback of the bytes appended since
// the last time, once there are writebackEvery of them. r.mu is held.
func (r *Run) startWritebackLocked() {
	if r.size-r.wroteBack < writebackEvery || r.err != nil || r.closed {
		return
	}
	if err := r.w.Flush(); err != nil {
		r.failLocked(fmt.Errorf("cannot write %s: %w", r.path, err))
		return
	}
	r.flushed = r.appended
	startWriteback(r.f)
	r.wroteBack = r.size
}

// usableLocked returns why r cannot be written. r.mu is held.
func (r *Run) usableLocked() error {
	if r.closed {
		return fmt.Errorf("run %s: %w", r.id, ErrClosed)
	}
	return r.err
}

// failLocked makes err sticky: after a failed write or fsync the file's
// content past the last successful fsync is unknown, so nothing more is
// appended (a later Open drops a torn tail). r.mu is held.
func (r *Run) failLocked(err error) error {
	if r.err == nil {
		r.err = fmt.Errorf("the journal of run %s is unusable: %w", r.id, err)
		r.qMu.Lock()
		r.qErr = r.err
		r.qMu.Unlock()
	}
	return r.err
}

// Sync implements eval.Journal: it writes the buffered records to the
// file and fsyncs it, making every record appended before the call
// durable. It does nothing when nothing was appended since the last
// Sync, and concurrent calls share one fsync. It is safe for concurrent
// use.
func (r *Run) Sync() error {
	r.mu.Lock()
	r.writeQueuedLocked()
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	target := r.appended
	if r.synced >= target {
		r.mu.Unlock()
		return nil
	}
	if r.flushed < target {
		if err := r.w.Flush(); err != nil {
			err = r.failLocked(fmt.Errorf("cannot write %s: %w", r.path, err))
			r.mu.Unlock()
			return err
		}
		r.flushed = r.appended
	}
	r.mu.Unlock()

	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	r.mu.Lock()
	if r.synced >= target { // another Sync's fsync covered these
		r.mu.Unlock()
		return nil
	}
	if err := r.usableLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	covered, f, dirs := r.flushed, r.f, r.newDirs
	r.mu.Unlock()
	err := r.fsync(f, dirs)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fsyncs++
	if err != nil {
		return r.failLocked(err)
	}
	r.synced, r.newDirs = max(r.synced, covered), ""
	return nil
}

// fsync makes f durable and, for a run created here that never synced
// (dirs is its journal directory), the entries of the run's directory
// and of the file in it.
func (r *Run) fsync(f *os.File, dirs string) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", r.path, err)
	}
	if dirs == "" {
		return nil
	}
	if err := durable.SyncDir(r.dir); err != nil {
		return fmt.Errorf("cannot sync the run's directory %s: %w", r.dir, err)
	}
	if err := durable.SyncDir(dirs); err != nil {
		return fmt.Errorf("cannot sync the journal directory %s: %w", dirs, err)
	}
	return nil
}

// Close syncs the journal, closes its file and releases the run's lock.
// It reports a failed write or fsync that left records unsaved. Calls
// after the first do nothing and return nil. It waits for a Checkpoint
// or Restore in progress. It is safe for concurrent use; the other
// methods that write, and Checkpoint and Restore, fail after it.
func (r *Run) Close() error {
	// Record fails from here on; a drain goroutine finishes first.
	r.qMu.Lock()
	r.qClosed = true
	r.qMu.Unlock()
	r.drainers.Wait()
	r.cpMu.Lock()
	defer r.cpMu.Unlock()
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.writeQueuedLocked()
	r.closed = true
	var errs []error
	if r.err == nil && r.synced < r.appended {
		if err := r.w.Flush(); err != nil {
			r.failLocked(fmt.Errorf("cannot write %s: %w", r.path, err))
		} else {
			r.fsyncs++
			if err := r.fsync(r.f, r.newDirs); err != nil {
				r.failLocked(err)
			} else {
				r.flushed, r.synced, r.newDirs = r.appended, r.appended, ""
			}
		}
	}
	if r.err != nil && r.synced < r.appended {
		errs = append(errs, r.err)
	}
	errs = append(errs, r.closeFiles())
	return errors.Join(errs...)
}

// closeFiles closes the journal file and releases and closes the lock.
func (r *Run) closeFiles() error {
	var errs []error
	if r.f != nil {
		funlock(r.f) // closing releases it anyway
		if err := r.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close %s: %w", r.path, err))
		}
		r.f = nil
	}
	return errors.Join(errs...)
}
