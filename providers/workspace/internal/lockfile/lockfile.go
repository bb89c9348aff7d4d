// Package lockfile implements renewable cross-process writer locks backed by
// one lock file.
//
// A lock on a resource is the file chosen by the caller (conventionally
// "<resource>.lock"). It is created atomically with O_CREATE|O_EXCL and
// records its owner (a random token, the process id, the host and an
// optional description) as JSON. The file's modification time is the
// heartbeat: a held lock refreshes it every Options.Update, and a lock whose
// modification time is older than Options.Stale is stale. A lock whose
// recorded owner is a process of this machine (same host, boot and pid
// namespace) that no longer exists is stale at once.
//
// A stale lock is taken over atomically: contenders serialize on a guard
// file created with O_EXCL, and the guard's holder checks again that the
// lock is stale and renames a complete new lock file over it (the lock path
// never disappears, so no plain creator can slip in). The owner of a lock
// that was taken over learns it from Check, from its heartbeat and from
// Release, which report ErrCompromised (and never remove the new owner's
// lock).
//
// There is no unconditional fencing: a process suspended for longer than
// the stale period can still write before it notices the loss.
package lockfile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/internal/procscope"
)

// Default timing of a lock: stale after 20 minutes without a heartbeat,
// refreshed every 5 minutes.
const (
	DefaultStale  = 20 * time.Minute
	DefaultUpdate = 5 * time.Minute
)

// maxRecordBytes bounds how much of a lock file is read.
const maxRecordBytes = 64 << 10

// ErrLocked is wrapped by Acquire errors when a healthy owner holds the lock.
var ErrLocked = errors.New("lock is held by another owner")

// ErrCompromised is wrapped by Check and Release errors once the lock file
// was removed or taken over by another owner.
var ErrCompromised = errors.New("lock was compromised")

// Options configure Acquire.
type Options struct {
	// Stale is the age of the last heartbeat after which a lock may be
	// taken over; 0 means DefaultStale.
	Stale time.Duration
	// Update is the heartbeat interval; 0 means DefaultUpdate and a
	// negative value disables the heartbeat.
	Update time.Duration
	// Owner is a free-form description recorded in the lock file.
	Owner string
}

// Record is the content of a lock file.
type Record struct {
	// Token identifies one acquisition.
	Token string `json:"token"`
	// Owner is Options.Owner.
	Owner string `json:"owner,omitempty"`
	// PID is the owning process.
	PID int `json:"pid"`
	// Host is the owner's host name.
	Host string `json:"host,omitempty"`
	// Machine identifies the owner's kernel instance and pid namespace
	// (empty where unknown); liveness of PID is only judged when it equals
	// this process's Machine.
	Machine string `json:"machine,omitempty"`
	// AcquiredAt is when the lock was created.
	AcquiredAt time.Time `json:"acquiredAt"`
	// Processes is the owner's process mark (procscope.Marker): every
	// process it started carries it, so that processes it left behind
	// when it died can be found.
	Processes string `json:"processes,omitempty"`
}

// Lock is one held lock. Its methods are safe for concurrent use.
type Lock struct {
	path  string
	token string
	opts  Options

	mu          sync.Mutex
	compromised error
	released    bool
	releaseErr  error

	stop chan struct{}
	done chan struct{}
}

// Acquire takes the lock file at path without waiting. It fails with an
// error wrapping ErrLocked when a healthy owner (possibly this process)
// holds it, and takes over a stale lock.
func Acquire(path string, opts Options) (*Lock, error) {
	if opts.Stale <= 0 {
		opts.Stale = DefaultStale
	}
	if opts.Update == 0 {
		opts.Update = DefaultUpdate
	}
	rec := Record{
		Token:      newToken(),
		Owner:      opts.Owner,
		PID:        os.Getpid(),
		Host:       hostname(),
		Machine:    machineID(),
		AcquiredAt: time.Now().UTC(),
		Processes:  procscope.Marker(),
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	l := &Lock{path: path, token: rec.Token, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	sweepTemporary(path)
	for attempt := 0; attempt < 4; attempt++ {
		err := create(path, data)
		if err == nil {
			return l.start(), nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lockfile: create %s: %w", path, err)
		}
		holder, stale, err := inspect(path, opts.Stale)
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("lockfile: inspect %s: %w", path, err)
		}
		if !stale {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, describe(holder))
		}
		if pids := leftovers(holder); len(pids) > 0 {
			// The owner is gone, but processes it started still run in
			// the resource: taking over now would let two writers work in
			// it. The error names them.
			return nil, fmt.Errorf("%w: its owner (%s) is gone, but processes it started are still running: pids %v; stop them (kill %s, or aml workspace prune --kill-orphans) and try again", ErrLocked, describe(holder), pids, pidList(pids))
		}
		ok, err := takeOver(path, data, opts.Stale)
		if err != nil {
			return nil, err
		}
		if ok {
			return l.start(), nil
		}
	}
	return nil, fmt.Errorf("%w (contended)", ErrLocked)
}

// AcquireWait is Acquire retried, with a growing pause of at most 100ms,
// while the lock is held by another owner and ctx is not done. A holder
// that stops refreshing is taken over once its lock is stale. The error of
// a done ctx wraps context.Cause(ctx).
func AcquireWait(ctx context.Context, path string, opts Options) (*Lock, error) {
	pause := 2 * time.Millisecond
	for {
		l, err := Acquire(path, opts)
		if err == nil || !errors.Is(err, ErrLocked) {
			return l, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lockfile: waiting for %s: %w (%v)", path, context.Cause(ctx), err)
		case <-t.C:
		}
		if pause < 100*time.Millisecond {
			pause *= 2
		}
	}
}

// start starts the heartbeat of a new lock.
func (l *Lock) start() *Lock {
	if l.opts.Update > 0 {
		go l.heartbeat()
	} else {
		close(l.done)
	}
	return l
}

// create writes a new lock file exclusively and whole: the record is
// written and synced under a temporary name ("<path>.*.new", which
// sweepTemporary removes when a killed process left it) and hard-linked
// to path (which fails when path exists), so a crash never leaves a lock
// file without its owner's record, which could only be judged by its
// age. On a filesystem without hard links the file is created in place.
func create(path string, data []byte) error {
	return durable.Write(path, data, durable.Options{
		Perm:         0o644,
		Umask:        true,
		Temp:         filepath.Base(path) + ".*.new",
		Exclusive:    true,
		LinkFallback: true,
	})
}

// sweepTemporary removes the temporary files of lock creations and
// takeovers at path that a killed process left (older than a minute).
func sweepTemporary(path string) {
	for _, pattern := range []string{path + ".*.new", path + ".*.tmp"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if info, err := os.Lstat(m); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > time.Minute {
				os.Remove(m)
			}
		}
	}
}

// inspect reports the holder of the lock at path and whether it is stale.
func inspect(path string, staleAfter time.Duration) (*Record, bool, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, false, err
	}
	rec, _ := readRecord(path) // an unreadable record is judged by its age
	return rec, isStale(info, rec, staleAfter), nil
}

// isStale reports whether a lock with this file info and record may be
// taken over.
func isStale(info fs.FileInfo, rec *Record, staleAfter time.Duration) bool {
	if time.Since(info.ModTime()) > staleAfter {
		return true
	}
	return rec != nil && ownerDead(rec)
}

// leftovers returns the live processes of this machine that the lock's
// owner started (they carry its mark), or nil when that cannot be told.
func leftovers(rec *Record) []int {
	m := machineID()
	if rec == nil || rec.Processes == "" || m == "" || rec.Machine != m || rec.Host != hostname() {
		return nil
	}
	return procscope.Find(procscope.OwnerVar, rec.Processes)
}

func pidList(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, " ")
}

// ownerDead reports whether rec names a process of this machine that no
// longer exists.
func ownerDead(rec *Record) bool {
	m := machineID()
	if m == "" || rec.Machine != m || rec.Host != hostname() || rec.PID <= 0 || rec.PID == os.Getpid() {
		return false
	}
	return !processAlive(rec.PID)
}

// guardStale bounds how long a takeover guard may be held before it is
// itself considered abandoned; the guarded section takes microseconds. A
// guard whose recorded holder is gone is abandoned at once.
const guardStale = 10 * time.Second

// guardOwnerGone reports whether the takeover guard names its holder and
// that holder is a process of this machine that no longer exists (it was
// killed while taking the lock over). A guard being written names no one
// yet and is judged by its age.
func guardOwnerGone(guard string) bool {
	data, err := os.ReadFile(guard)
	if err != nil || len(data) == 0 {
		return false
	}
	var p Process
	return json.Unmarshal(data, &p) == nil && p.Gone()
}

// takeOver replaces a stale lock at path with data. Contenders serialize on
// a guard file ("<path>.takeover", created with O_EXCL); the holder checks
// again that the lock is stale and renames its new lock file over it, so
// the lock path never disappears and plain creators (O_EXCL) cannot slip
// in. It reports false when another contender is taking the lock over or
// the lock turned out to be fresh.
func takeOver(path string, data []byte, staleAfter time.Duration) (bool, error) {
	guard := path + ".takeover"
	self, _ := json.Marshal(Self())
	if err := create(guard, self); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("lockfile: take over %s: %w", path, err)
		}
		info, serr := os.Lstat(guard)
		if serr != nil || time.Since(info.ModTime()) <= min(guardStale, staleAfter) && !guardOwnerGone(guard) {
			return false, nil
		}
		// An abandoned guard: move it aside (one contender wins) and retry.
		aside := fmt.Sprintf("%s.%s.stale", guard, newToken())
		if os.Rename(guard, aside) != nil {
			return false, nil
		}
		os.Remove(aside)
		if err := create(guard, self); err != nil {
			return false, nil
		}
	}
	defer os.Remove(guard)
	_, stale, err := inspect(path, staleAfter)
	if errors.Is(err, fs.ErrNotExist) {
		if err := create(path, data); err != nil {
			return false, nil
		}
		return true, nil
	}
	if err != nil || !stale {
		return false, err
	}
	if info, err := os.Lstat(path); err == nil && info.IsDir() {
		// A directory lock (made by other tools) cannot be renamed over:
		// move it away and create the file; a plain creator may win.
		aside := fmt.Sprintf("%s.%s.stale", path, newToken())
		if err := os.Rename(path, aside); err != nil {
			return false, nil
		}
		if err := os.RemoveAll(aside); err != nil {
			return false, fmt.Errorf("lockfile: remove stale lock: %w", err)
		}
		return create(path, data) == nil, nil
	}
	// Renamed over the stale lock from a temporary "<path>.*.tmp".
	err = durable.Write(path, data, durable.Options{Perm: 0o644, Umask: true, Temp: filepath.Base(path) + ".*.tmp"})
	if err != nil {
		return false, fmt.Errorf("lockfile: take over %s: %w", path, err)
	}
	return true, nil
}

// readRecord parses a lock file; a directory (a lock created by other
// tools) or unparsable content gives an error.
func readRecord(path string) (*Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes))
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

func describe(rec *Record) string {
	if rec == nil {
		return "owner unknown"
	}
	s := fmt.Sprintf("pid %d on %q since %s", rec.PID, rec.Host, rec.AcquiredAt.Format(time.RFC3339))
	if rec.Owner != "" {
		s = rec.Owner + ", " + s
	}
	return s
}

// Path is the lock file.
func (l *Lock) Path() string { return l.path }

// heartbeat refreshes the lock until Release or compromise.
func (l *Lock) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(l.opts.Update)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.refresh(); err != nil {
				l.mu.Lock()
				if l.compromised == nil {
					l.compromised = err
				}
				l.mu.Unlock()
				return
			}
		}
	}
}

// refresh verifies ownership and bumps the modification time.
func (l *Lock) refresh() error {
	if err := l.verify(); err != nil {
		return err
	}
	now := time.Now()
	if err := os.Chtimes(l.path, now, now); err != nil {
		return fmt.Errorf("%w: refresh %s: %v", ErrCompromised, l.path, err)
	}
	return nil
}

// verify checks that the lock file still carries this lock's token. A
// missing file is re-read once after a short pause, since a contender
// checking a stale lock may have moved it aside for an instant.
func (l *Lock) verify() error {
	rec, err := readRecord(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		time.Sleep(50 * time.Millisecond)
		rec, err = readRecord(l.path)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s was removed", ErrCompromised, l.path)
	case err != nil:
		return fmt.Errorf("%w: %s is unreadable: %v", ErrCompromised, l.path, err)
	case rec.Token != l.token:
		return fmt.Errorf("%w: %s was taken over (%s)", ErrCompromised, l.path, describe(rec))
	}
	return nil
}

// Check reports whether the lock is still held: nil, or an error wrapping
// ErrCompromised.
func (l *Lock) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("lockfile: %s was released", l.path)
	}
	if l.compromised != nil {
		return l.compromised
	}
	if err := l.verify(); err != nil {
		l.compromised = err
		return err
	}
	return nil
}

// Release stops the heartbeat and removes the lock file if it is still
// this lock's. It reports a compromise (wrapping ErrCompromised) instead of
// removing another owner's lock. It is idempotent: later calls return the
// first call's result.
func (l *Lock) Release() error {
	l.mu.Lock()
	if l.released {
		err := l.releaseErr
		l.mu.Unlock()
		return err
	}
	l.released = true
	close(l.stop)
	l.mu.Unlock()
	<-l.done

	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.compromised
	if err == nil {
		err = l.verify()
	}
	if err == nil {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("lockfile: remove %s: %w", l.path, rerr)
		}
	}
	l.releaseErr = err
	return err
}

func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

func hostname() string { return procscope.Hostname() }

func machineID() string { return procscope.MachineID() }

func processAlive(pid int) bool { return procscope.Alive(pid) }

// Process identifies a process across machines (procscope.Process).
type Process = procscope.Process

// Self is this process.
func Self() Process { return procscope.Self() }

// ErrHeld is wrapped by Break's error when the lock's owner is alive and
// the lock is fresh.
var ErrHeld = errors.New("the lock is held by a live owner")

// Break removes the lock at path when it may be taken over (stale after
// staleAfter, or its owner is a process of this machine that no longer
// exists), or whatever holds it with force. It returns a description of
// the holder, and fs.ErrNotExist (wrapped) when there is no lock. The
// owner of a broken lock learns it from Check and Release
// (ErrCompromised).
func Break(path string, staleAfter time.Duration, force bool) (string, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultStale
	}
	rec, stale, err := inspect(path, staleAfter)
	if err != nil {
		return "", err
	}
	holder := describe(rec)
	if !stale && !force {
		return holder, fmt.Errorf("%s is held by %s, which is alive and refreshes it: %w", path, holder, ErrHeld)
	}
	if err := os.RemoveAll(path); err != nil {
		return holder, fmt.Errorf("lockfile: remove %s: %w", path, err)
	}
	return holder, nil
}
