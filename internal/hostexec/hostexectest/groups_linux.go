package hostexectest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TreeScript is shell source that forms a process tree in one process
// group: the shell (whose pid is the group id) and two background
// sleepers.
const TreeScript = `sleep 300 & sleep 300 & wait`

// HangBound bounds the waits of these helpers, and is meant for the
// waits of the tests using them: only a real hang exceeds it.
const HangBound = time.Minute

// subreaper reports whether BecomeSubreaper made the test binary the
// child subreaper of its descendants. It is written once, before any
// test runs.
var subreaper bool

// BecomeSubreaper makes the test binary the child subreaper of its
// descendants: orphans of killed process groups are then reparented to
// it, so AssertGroupGone can reap them and demand ESRCH instead of
// trusting the container's init to reap zombies. Call it from TestMain
// before m.Run; it is not safe for concurrent use with the other
// functions.
func BecomeSubreaper() {
	const prSetChildSubreaper = 36
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	subreaper = errno == 0
}

// member is one process of a process group.
type member struct {
	pid, ppid int
	zombie    bool
}

// groupMembers returns the processes of process group pgid, read from
// /proc.
func groupMembers(t testing.TB, pgid int) []member {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var ms []member
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if g, _ := strconv.Atoi(fields[2]); g == pgid {
			ms = append(ms, member{pid: pid, ppid: ppid, zombie: fields[0] == "Z"})
		}
	}
	return ms
}

// live counts the members that are not zombies.
func live(ms []member) int {
	n := 0
	for _, m := range ms {
		if !m.zombie {
			n++
		}
	}
	return n
}

// WaitGroupSize waits until process group pgid has at least n live
// processes, and fails t after HangBound. Safe for concurrent use.
func WaitGroupSize(t testing.TB, pgid, n int) {
	t.Helper()
	deadline := time.Now().Add(HangBound)
	for live(groupMembers(t, pgid)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d never reached %d processes: %v", pgid, n, groupMembers(t, pgid))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// AssertGroupGone fails t unless every process of group pgid is dead: no
// live member remains in /proc and, once the orphaned zombies reparented
// to this subreaper (see BecomeSubreaper) are reaped, kill(-pgid, 0)
// answers ESRCH. Without a subreaper, a group of zombies only is taken
// as gone. Safe for concurrent use.
func AssertGroupGone(t testing.TB, pgid int) {
	t.Helper()
	deadline := time.Now().Add(HangBound)
	for {
		ms := groupMembers(t, pgid)
		for _, m := range ms {
			if m.zombie && m.ppid == os.Getpid() && m.pid != pgid {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(m.pid, &ws, syscall.WNOHANG, nil)
			}
		}
		err := syscall.Kill(-pgid, 0)
		if err == syscall.ESRCH {
			return
		}
		if err != nil {
			t.Fatalf("kill(-%d, 0): %v", pgid, err)
		}
		if live(ms) == 0 && !subreaper {
			t.Logf("process group %d: only zombies remain (no subreaper to reap them)", pgid)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has processes %+v", pgid, ms)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ReadPID waits for the file name to hold a pid and a newline (as
// "echo $$ > name" writes it) and returns the pid; it fails t after
// HangBound. Safe for concurrent use.
func ReadPID(t testing.TB, name string) int {
	t.Helper()
	deadline := time.Now().Add(HangBound)
	for {
		b, err := os.ReadFile(name)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
