package pidline

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestID: the zero ID is usable, the first Set wins, Ready closes then.
func TestID(t *testing.T) {
	var id ID
	select {
	case <-id.Ready():
		t.Fatal("Ready closed before Set")
	default:
	}
	if id.Load() != 0 {
		t.Fatalf("Load before Set = %d", id.Load())
	}
	id.Set([]byte("42"))
	id.Set([]byte("43"))
	id.Set(nil)
	<-id.Ready()
	if got := id.Load(); got != 42 {
		t.Fatalf("Load = %d, want 42 (the first line)", got)
	}
	var none ID
	none.Set(nil)
	<-none.Ready()
	if none.Load() != 0 {
		t.Fatalf("an ID whose line never came says %d", none.Load())
	}
}

// fast shortens Kill's timings for one test.
func fast(t *testing.T, wait, g time.Duration) {
	oldWait, oldGrace := idWait, grace
	idWait, grace = wait, g
	t.Cleanup(func() { idWait, grace = oldWait, oldGrace })
}

// recorder records Kill's steps in order.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// TestKillSteps: Kill signals the id the line gave, escalates only while
// the command runs on, and stops at the step that ended it.
func TestKillSteps(t *testing.T) {
	fast(t, 200*time.Millisecond, 50*time.Millisecond)
	cases := []struct {
		name string
		line []byte
		// endAt is the step whose run ends the command ("" never).
		endAt string
		want  []string
	}{
		{"the signal ends it", []byte("7"), "signal 7", []string{"signal 7"}},
		{"closing the stream ends it", []byte("7"), "close", []string{"signal 7", "close"}},
		{"only deleting the sandbox ends it", []byte("7"), "", []string{"signal 7", "close", "delete"}},
		{"no id: nothing to signal", nil, "close", []string{"close"}},
		{"a line that names init is not signalled", []byte("1"), "", []string{"close", "delete"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var id ID
			done := make(chan struct{})
			var r recorder
			step := func(name string) {
				r.add(name)
				if name == c.endAt {
					close(done)
				}
			}
			id.Set(c.line)
			Kill(done, &id,
				func(pid int64) { step("signal " + strconv.FormatInt(pid, 10)) },
				func() { step("close") }, func() { step("delete") })
			if got := r.got(); !slices.Equal(got, c.want) {
				t.Fatalf("steps %q, want %q", got, c.want)
			}
		})
	}
}

// TestKillOfAnEndedCommand: a command that ended before its id came, or
// that ends as it is signalled, is left alone (its sandbox is spared).
func TestKillOfAnEndedCommand(t *testing.T) {
	fast(t, 100*time.Millisecond, 2*time.Second)
	var r recorder
	done := make(chan struct{})
	close(done)
	var id ID
	Kill(done, &id, func(int64) { r.add("signal") }, func() { r.add("delete") })
	if got := r.got(); len(got) != 0 {
		t.Fatalf("an ended command got %q", got)
	}

	// Its id never comes; it ends by itself within the grace.
	done = make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(done) })
	var late ID
	Kill(done, &late, func(int64) { r.add("signal") }, func() { r.add("delete") })
	if got := r.got(); len(got) != 0 {
		t.Fatalf("a command that ended in its grace got %q", got)
	}
}

// TestKillArgv: the argv kills a real process group, its leader and its
// child, as the wrapper's commands lead theirs.
func TestKillArgv(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this machine (install a POSIX shell)")
	}
	leader := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	leader.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child's id: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the child's id %q: %v", line, err)
	}
	argv := KillArgv(int64(leader.Process.Pid))
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%q: %v: %s", argv, err, out)
	}
	end := make(chan error, 1)
	go func() { end <- leader.Wait() }()
	select {
	case <-end:
	case <-time.After(5 * time.Second):
		t.Fatal("the group's leader still runs after the kill")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the group's child %d outlived the kill", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie, whose reaper may be slow,
// does not).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command's name in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
