package lockfile

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcquireRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "res.lock")
	l, err := Acquire(path, Options{Owner: "test owner"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := readRecord(path)
	if err != nil || rec.Owner != "test owner" || rec.PID != os.Getpid() || rec.Token == "" {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if _, err := Acquire(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire in the same process: %v, want ErrLocked", err)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("lock file survives release: %v", err)
	}
	if l.Check() == nil {
		t.Fatal("Check after Release reports a held lock")
	}
	l2, err := Acquire(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
}

func TestStaleTakeover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "res.lock")
	old, err := Acquire(path, Options{Update: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Not stale yet.
	if _, err := Acquire(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("fresh lock: %v", err)
	}
	past := time.Now().Add(-DefaultStale - time.Minute)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(path, Options{})
	if err != nil {
		t.Fatalf("stale lock not taken over: %v", err)
	}
	defer l.Release()
	if err := old.Check(); !errors.Is(err, ErrCompromised) {
		t.Fatalf("old owner's Check: %v, want ErrCompromised", err)
	}
	if err := old.Release(); !errors.Is(err, ErrCompromised) {
		t.Fatalf("old owner's Release: %v, want ErrCompromised", err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("the old owner's release removed the new lock: %v", err)
	}
	// A custom stale period.
	past = time.Now().Add(-2 * time.Second)
	os.Chtimes(path, past, past)
	if _, err := Acquire(path, Options{Stale: time.Hour}); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock within a custom stale period: %v", err)
	}
}

func TestUnreadableAndDirectoryLocks(t *testing.T) {
	dir := t.TempDir()
	// An empty file (a creator that has not written yet) is held while fresh.
	empty := filepath.Join(dir, "empty.lock")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Acquire(empty, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("fresh empty lock: %v", err)
	}
	// A stale directory lock (as other tools create) is taken over.
	dlock := filepath.Join(dir, "dir.lock")
	os.Mkdir(dlock, 0o755)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(dlock, past, past)
	l, err := Acquire(dlock, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

func TestDeadOwnerTakeover(t *testing.T) {
	if machineID() == "" {
		t.Skip("process liveness is not judged on this platform")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "res.lock")
	rec := Record{Token: "dead", PID: cmd.Process.Pid, Host: hostname(), Machine: machineID(), AcquiredAt: time.Now()}
	data, _ := json.Marshal(rec)
	os.WriteFile(path, data, 0o644)
	l, err := Acquire(path, Options{})
	if err != nil {
		t.Fatalf("lock of an exited process not taken over: %v", err)
	}
	l.Release()
	// A live process of another machine identity is not judged.
	rec.Machine = "elsewhere"
	data, _ = json.Marshal(rec)
	os.WriteFile(path, data, 0o644)
	if _, err := Acquire(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("foreign fresh lock: %v", err)
	}
}

func TestHeartbeat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "res.lock")
	l, err := Acquire(path, Options{Update: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(path, past, past)
	// The heartbeat runs every 10ms; the generous bounds only catch a
	// heartbeat that never comes.
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(info.ModTime()) < time.Minute {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("heartbeat did not refresh the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A takeover is noticed by the heartbeat.
	os.Remove(path)
	other, err := Acquire(path, Options{Update: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	deadline = time.Now().Add(time.Minute)
	for l.Check() == nil {
		if time.Now().After(deadline) {
			t.Fatal("compromise not detected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Release(); !errors.Is(err, ErrCompromised) {
		t.Fatalf("Release after takeover: %v", err)
	}
	if other.Check() != nil {
		t.Fatal("compromised owner removed the new lock")
	}
}

func TestContendedAcquire(t *testing.T) {
	path := filepath.Join(t.TempDir(), "res.lock")
	for round := range 20 {
		if round%2 == 1 { // half the rounds contend for a stale lock
			os.WriteFile(path, []byte(`{"token":"stale"}`), 0o644)
			past := time.Now().Add(-time.Hour)
			os.Chtimes(path, past, past)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []*Lock
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := Acquire(path, Options{Update: -1})
				if err != nil && !errors.Is(err, ErrLocked) {
					t.Error(err)
				}
				if err == nil {
					mu.Lock()
					won = append(won, l)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d winners", round, len(won))
		}
		if err := won[0].Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAcquireWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "res.lock")
	l, err := Acquire(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The holder releases once AcquireWait waits: AcquireWait consults
	// its context only after an attempt found the lock held.
	var released atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l2, err := AcquireWait(onDone{ctx, func() {
		if !released.Swap(true) {
			l.Release()
		}
	}}, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !released.Load() {
		t.Fatal("AcquireWait acquired the lock without waiting for its holder")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := AcquireWait(ctx2, path, Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireWait on a held lock: %v", err)
	}
	l2.Release()
}

// onDone is a context that calls f whenever its Done channel is asked
// for, that is when AcquireWait starts to wait.
type onDone struct {
	context.Context
	f func()
}

func (c onDone) Done() <-chan struct{} {
	c.f()
	return c.Context.Done()
}

// TestGuardOfAKilledTakeover: a process killed while it took a dead
// owner's lock over leaves the takeover guard; the next contender takes
// the lock over at once instead of failing as contended until the guard
// is ten seconds old. A fresh guard of a live holder still defers.
func TestGuardOfAKilledTakeover(t *testing.T) {
	if machineID() == "" {
		t.Skip("process liveness is not judged on this platform")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Self()
	dead.PID = cmd.Process.Pid
	path := filepath.Join(t.TempDir(), "res.lock")
	rec := Record{Token: "dead", PID: dead.PID, Host: dead.Host, Machine: dead.Machine, AcquiredAt: time.Now()}
	data, _ := json.Marshal(rec)
	os.WriteFile(path, data, 0o644)
	guard, _ := json.Marshal(dead)
	os.WriteFile(path+".takeover", guard, 0o644)
	l, err := Acquire(path, Options{})
	if err != nil {
		t.Fatalf("a dead taker's guard blocked the takeover: %v", err)
	}
	l.Release()

	// The guard of a live holder (here: a foreign one) is respected.
	os.WriteFile(path, data, 0o644)
	live := dead
	live.Machine = "elsewhere"
	guard, _ = json.Marshal(live)
	os.WriteFile(path+".takeover", guard, 0o644)
	if _, err := Acquire(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a live taker's fresh guard: %v, want ErrLocked (contended)", err)
	}
}

// TestCreationKilledMidway: a process killed while creating a lock leaves
// at most its temporary file, never a lock file without a record; the
// lock is free, and the next Acquire removes leftovers older than a
// minute.
func TestCreationKilledMidway(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "res.lock")
	// What a kill between writing the record and linking it leaves.
	leftover := path + ".0123abcd.new"
	if err := os.WriteFile(leftover, []byte(`{"token":"dead"`), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	fresh := path + ".4567cdef.new"
	if err := os.WriteFile(fresh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(path, Options{Update: -1})
	if err != nil {
		t.Fatalf("Acquire beside a killed creation's temporary file: %v", err)
	}
	defer l.Release()
	if rec, err := readRecord(path); err != nil || rec.PID != os.Getpid() {
		t.Fatalf("the lock file holds %+v, %v; want this process's whole record", rec, err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("an old temporary file survives Acquire: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temporary file (another creator's, maybe) was removed: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("the directory holds %d entries after Acquire, want the lock and the fresh file", len(entries))
	}
}
