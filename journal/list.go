package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/durable"
)

// Summary describes one run for listings. It is a plain value.
type Summary struct {
	// ID is the run's id.
	ID string
	// Workflow is the workflow's path, as the run was given it.
	Workflow string
	// State is the run's state: Running while a process holds the run
	// (whatever its last state record says), Interrupted when the last
	// state record says Running but no process holds it, else the last
	// state record's.
	State State
	// Started is when the run started.
	Started time.Time
	// Effects counts the effect records, superseded ones included.
	Effects int
	// LastEffect is the last effect record, nil when there is none.
	LastEffect *eval.Effect
	// LastAt is when the last record (effect or state) was appended.
	LastAt time.Time
	// Questions are the questions a Suspended run waits for.
	Questions []eval.Question
	// Error is a Failed run's error message.
	Error string
	// Result is a Succeeded run's result.
	Result string
	// ReadErr is why the journal could not be read in full (ErrCorrupt,
	// say); the other fields hold what was read before it. Prune never
	// removes such a run.
	ReadErr error
}

// pruningPrefix names a run directory Prune is removing.
const pruningPrefix = ".pruning-"

// List describes every run in dir, sorted by id (and so by start time).
// Entries of dir that are not runs (not a directory named as a run id,
// or with no journal.log) are skipped. It reads the journals without
// taking their locks, so it sees a snapshot of runs that are in
// progress; to tell Running from Interrupted it briefly takes a shared
// lock on each run whose lock is free, so an Open of that run at the
// same instant may fail with ErrLocked. A missing dir is an error
// wrapping fs.ErrNotExist. A run whose journal.log is not a regular
// file (or is a symbolic link) is listed with only its ID and a ReadErr
// wrapping ErrNotRegular; it is neither read nor probed. List may be called concurrently, also with
// Runs of the same directory.
func List(dir string) ([]Summary, error) {
	ids, err := runIDs(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(ids))
	for _, id := range ids {
		runDir := filepath.Join(dir, id)
		s := readSummary(runDir, id)
		if s.ReadErr != nil && errors.Is(s.ReadErr, fs.ErrNotExist) {
			continue // pruned meanwhile
		}
		if errors.Is(s.ReadErr, ErrNotRegular) {
			out = append(out, s) // no run: nothing holds it
			continue
		}
		held, err := probe(runDir)
		switch {
		case err != nil:
			s.ReadErr = errors.Join(s.ReadErr, err)
		case held:
			s.State = Running
		case s.State == Running:
			s.State = Interrupted
		}
		out = append(out, s)
	}
	return out, nil
}

// runIDs returns the names of the run directories in dir, sorted.
func runIDs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list the runs in %s: %w", dir, err)
	}
	var ids []string
	for _, e := range entries {
		if !e.IsDir() || checkID(e.Name()) != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, e.Name(), logName)); err != nil {
			continue
		}
		ids = append(ids, e.Name()) // os.ReadDir sorts by name
	}
	return ids, nil
}

// readSummary reads the summary of the run in runDir, without its lock;
// its State is the last state record's.
func readSummary(runDir, id string) Summary {
	s := Summary{ID: id}
	path := filepath.Join(runDir, logName)
	f, err := openLog(path, os.O_RDONLY)
	if err != nil {
		s.ReadErr = fmt.Errorf("cannot read run %s: %w", id, err)
		return s
	}
	defer f.Close()
	var (
		haveMeta bool
		last     []byte // the last effect record's payload
		state    StateRecord
	)
	_, err = scan(path, f, func(line int, _ int64, payload []byte) error {
		if at, ok := peekEffect(payload); ok && haveMeta {
			s.Effects++
			last = append(last[:0], payload...)
			if at > 0 {
				s.LastAt = time.UnixMilli(at)
			}
			return nil
		}
		rec, err := decodeRecord(payload)
		if err != nil {
			return err
		}
		if !haveMeta {
			if rec.t != typeMeta {
				return fmt.Errorf("%w: %s line %d: the first record is not the run's metadata", ErrCorrupt, path, line)
			}
			s.Workflow, s.Started, haveMeta = rec.meta.Workflow, rec.meta.Started, true
			return nil
		}
		switch rec.t {
		case typeMeta:
			return badf("a second metadata record")
		case typeEffect:
			s.Effects++
			last = append(last[:0], payload...)
			if !rec.at.IsZero() {
				s.LastAt = rec.at
			}
		case typeState:
			state = rec.state
			s.LastAt = rec.state.At
		}
		return nil
	})
	if err == nil && (!haveMeta || state.State == "") {
		err = fmt.Errorf("%w: %s has no complete metadata and state records: the run's creation was interrupted", ErrCorrupt, path)
	}
	s.ReadErr = err
	s.State, s.Error, s.Result = state.State, state.Error, state.Result
	if state.State == Suspended {
		s.Questions = state.Questions
	}
	if last != nil {
		rec, derr := decodeRecord(last)
		if derr != nil {
			s.ReadErr = errors.Join(s.ReadErr, fmt.Errorf("%w: %s: the last effect record: %v", ErrCorrupt, path, derr))
		} else {
			s.LastEffect = rec.effect
		}
	}
	return s
}

// probe reports whether a process holds the run in runDir, by taking and
// releasing a shared lock.
func probe(runDir string) (held bool, err error) {
	f, err := openLog(filepath.Join(runDir, logName), os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("cannot probe the lock of %s: %w", runDir, err)
	}
	defer f.Close()
	held, err = flock(f, true)
	if err != nil {
		return false, fmt.Errorf("cannot probe the lock of %s: %w", runDir, err)
	}
	if !held {
		funlock(f)
	}
	return held, nil
}

// Prune removes the directories of the finished runs in dir (Succeeded
// or Failed), and returns their ids, sorted. It takes each run's lock
// before it removes it and checks its state again under the lock, so it
// never removes a run that a process holds (or one that was resumed
// since it was listed); runs that cannot be read in full are kept. A
// run whose journal.log is not a regular file is kept too, unread, and
// reported in the returned error (wrapping ErrNotRegular): nothing a
// crash leaves looks like that, so it is left for a person to look at. It
// also finishes removals that an earlier Prune left half done. Errors
// removing some runs are joined; the ids returned are the runs that were
// removed. Prune may be called concurrently.
func Prune(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot prune the runs in %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), pruningPrefix) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("cannot remove %s: %w", filepath.Join(dir, e.Name()), err))
			}
		}
	}
	ids, err := runIDs(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, id := range ids {
		ok, err := pruneRun(dir, id)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, id)
		}
	}
	if len(removed) > 0 {
		if err := durable.SyncDir(dir); err != nil {
			errs = append(errs, fmt.Errorf("cannot sync %s: %w", dir, err))
		}
	}
	return removed, errors.Join(errs...)
}

// pruneRun removes the run id if it is finished and free.
func pruneRun(dir, id string) (removed bool, err error) {
	runDir := filepath.Join(dir, id)
	s := readSummary(runDir, id)
	if errors.Is(s.ReadErr, ErrNotRegular) {
		return false, s.ReadErr
	}
	if s.ReadErr != nil || (s.State != Succeeded && s.State != Failed) {
		return false, nil
	}
	lock, err := openLog(filepath.Join(runDir, logName), os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // removed meanwhile
		}
		return false, fmt.Errorf("cannot lock run %s: %w", id, err)
	}
	defer lock.Close()
	held, err := flock(lock, false)
	if err != nil {
		return false, fmt.Errorf("cannot lock run %s: %w", id, err)
	}
	if held {
		return false, nil
	}
	// Under the lock the state can no longer change.
	if s := readSummary(runDir, id); s.ReadErr != nil || (s.State != Succeeded && s.State != Failed) {
		return false, nil
	}
	// Renaming first makes the run vanish at once for Open and List; a
	// crash while removing leaves a hidden directory the next Prune
	// removes.
	tmp := filepath.Join(dir, pruningPrefix+id)
	if err := os.Rename(runDir, tmp); err != nil {
		return false, fmt.Errorf("cannot remove run %s: %w", id, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return true, fmt.Errorf("run %s was removed from the listing but %s is left: %w", id, tmp, err)
	}
	return true, nil
}

// ReadEffects returns the effect records of run id in dir, in file order
// (superseded ones included), without taking the run's lock: a run that
// is running may be read while it runs. A torn last record is skipped.
// A journal.log that is not a regular file (or is a symbolic link) is
// refused, unread, with an error wrapping ErrNotRegular.
func ReadEffects(dir, id string) ([]*eval.Effect, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, id, logName)
	f, err := openLog(path, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noRun(dir, id)
		}
		return nil, fmt.Errorf("cannot read run %s: %w", id, err)
	}
	defer f.Close()
	var out []*eval.Effect
	_, err = scan(path, f, func(line int, _ int64, payload []byte) error {
		if _, ok := peekEffect(payload); !ok {
			return nil
		}
		rec, err := decodeRecord(payload)
		if err != nil {
			return err
		}
		if rec.t == typeEffect {
			out = append(out, rec.effect)
		}
		return nil
	})
	return out, err
}
