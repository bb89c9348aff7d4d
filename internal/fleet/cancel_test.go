package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spinWorkflows compute without end: in a deterministic agent's respond
// function, and in the entry's own body.
const (
	spinRespond = `def _respond(req):
    n = 0
    for i in range(1000000000):
        for j in range(1000000000):
            n += 1
    return "never"

spin = deterministic_agent(respond = _respond)

def main():
    return agent("spin", provider = spin)
`
	spinBody = `def main():
    n = 0
    for i in range(1000000000):
        for j in range(1000000000):
            n += 1
    return "never"
`
)

// TestCancelEndsEveryRun: aml cancel ends a run within its grace period
// whatever its workflow code does: a deterministic agent that computes
// without end, a component body that does, and a host script that
// sleeps (whose process ends with it); the workers stop computing. A run
// that cannot end in time (no worker serves it) is terminated, and aml
// cancel says so; the lease a terminated run held on a worker is released
// by the worker's sweep.
func TestCancelEndsEveryRun(t *testing.T) {
	srv, bin, dir, _ := setUp(t)
	workers := startWorkers(t, bin, srv.Address, []string{"--sweep-interval", "1s"}, func(string) []string { return nil })
	detach := func(name, src string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--detach", "--temporal", srv.Address, path)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("aml run --detach %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	c := srv.Dial(t)
	cancel := func(id string, grace time.Duration) (string, time.Duration) {
		t.Helper()
		started := time.Now()
		out, err := exec.Command(bin, "cancel", id, "--temporal", srv.Address, "--grace", grace.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("aml cancel %s: %v\n%s\n%s", id, err, out, historyOf(t, c, id))
		}
		return strings.TrimSpace(string(out)), time.Since(started)
	}
	// paces waits until the run's workflow code has paused n times:
	// it computes.
	paces := func(id string, n int) {
		t.Helper()
		for end := time.Now().Add(2 * time.Minute); strings.Count(historyOf(t, c, id), "SignalExternalWorkflowExecutionInitiated") < n; {
			if time.Now().After(end) {
				t.Fatalf("run %s did not compute:\n%s", id, historyOf(t, c, id))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, spin := range []struct{ name, src string }{{"respond", spinRespond}, {"body", spinBody}} {
		id := detach("spin_"+spin.name+".star", spin.src)
		paces(id, 2)
		out, took := cancel(id, 30*time.Second)
		if out != "cancelled "+id {
			t.Fatalf("aml cancel of a run spinning in its %s: %q", spin.name, out)
		}
		busy := cpuOf(t, workers)
		time.Sleep(3 * time.Second) // the window in which the workers must stay idle
		if used := cpuOf(t, workers) - busy; used > time.Second {
			t.Fatalf("the workers used %s of CPU in the 3 s after the run spinning in its %s was cancelled", used, spin.name)
		}
		t.Logf("a run spinning in its %s: cancelled in %s", spin.name, took.Round(time.Millisecond))
	}

	// A host script that sleeps: its process ends with the run.
	marker := "aml-fleet-cancel-" + strconv.Itoa(os.Getpid())
	logFile := filepath.Join(dir, "script.log")
	scriptSrc := fmt.Sprintf("def main():\n    return script(command = \"sh\", args = [\"-c\", \"echo up >> %s; sleep 600\", %q])\n", logFile, marker)
	waitUp := func(n int) {
		t.Helper()
		for end := time.Now().Add(time.Minute); countLines(t, logFile, "up") < n; {
			if time.Now().After(end) {
				t.Fatal("the script did not start")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	id := detach("sleep.star", scriptSrc)
	waitUp(1)
	out, took := cancel(id, 30*time.Second)
	if out != "cancelled "+id {
		t.Fatalf("aml cancel of a run whose script sleeps: %q", out)
	}
	if left := markedProcesses(t, marker); len(left) > 0 {
		t.Fatalf("the script's processes %v outlive the cancelled run", left)
	}
	t.Logf("a run whose host script sleeps: cancelled in %s, its process ended", took.Round(time.Millisecond))

	// No grace: the run is terminated; its script ends at its next
	// heartbeat, and the worker's sweep releases the host lease.
	id = detach("sleep.star", scriptSrc)
	waitUp(2)
	out, _ = cancel(id, 0)
	if !strings.HasPrefix(out, "terminated "+id+": ") {
		t.Fatalf("aml cancel --grace 0: %q", out)
	}
	for end := time.Now().Add(time.Minute); len(markedProcesses(t, marker)) > 0; {
		if time.Now().After(end) {
			t.Fatalf("the script's processes %v outlive the terminated run", markedProcesses(t, marker))
		}
		time.Sleep(200 * time.Millisecond)
	}
	released := "released 1 lease(s) of run " + id
	for end := time.Now().Add(2 * time.Minute); !strings.Contains(workerLogs(workers), released); {
		if time.Now().After(end) {
			t.Fatalf("no worker said %q:\n%s", released, workerLogs(workers))
		}
		time.Sleep(500 * time.Millisecond)
	}

	// No worker serves the run: it cannot end, and is terminated.
	id = detach("ask.star", "def main():\n    return ask(\"Ship it?\")\n")
	for end := time.Now().Add(time.Minute); !strings.Contains(historyOf(t, c, id), "WorkflowTaskCompleted"); {
		if time.Now().After(end) {
			t.Fatalf("run %s did not start", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, w := range workers {
		_ = w.Process.Signal(syscall.SIGTERM)
		_, _ = w.Process.Wait()
	}
	out, took = cancel(id, 3*time.Second)
	if !strings.HasPrefix(out, "terminated "+id+": it did not end within 3s") {
		t.Fatalf("aml cancel of a run no worker serves: %q\n%s", out, historyOf(t, c, id))
	}
	if took > time.Minute {
		t.Fatalf("aml cancel --grace 3s took %s", took)
	}
}

// cpuOf returns the CPU time the workers' processes have used.
func cpuOf(t *testing.T, workers map[string]*exec.Cmd) time.Duration {
	t.Helper()
	var total time.Duration
	for _, w := range workers {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.Process.Pid))
		if err != nil {
			t.Skipf("no /proc to read the workers' CPU time in: %v", err)
		}
		// The fields after the command (which may hold spaces) start
		// after its closing parenthesis; utime and stime are the 14th
		// and 15th fields of the line.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		for _, f := range fields[11:13] {
			ticks, _ := strconv.ParseInt(f, 10, 64)
			total += time.Duration(ticks) * time.Second / 100
		}
	}
	return total
}

// markedProcesses returns the pids of the processes whose command line
// holds marker.
func markedProcesses(t *testing.T, marker string) []int {
	t.Helper()
	return processes(t, func(cmdline []byte) bool { return bytes.Contains(cmdline, []byte(marker)) })
}

// longFlow computes for seconds in workflow code: in a deterministic
// agent's respond function, with a timeout_ms it stays within, and in
// the entry's own body.
const longFlow = `def _count(n):
    total = 0
    for i in range(n):
        total += i %% 7
    return total

def _respond(req):
    return "respond %%d" %% _count(%[1]d)

busy = deterministic_agent(respond = _respond)

def main():
    return [agent("work", provider = busy, timeout_ms = 600000), " body %%d" %% _count(%[1]d)]
`

// TestLongComputationPauses: workflow code that computes for longer than
// a worker lets one task of workflow code run (aml worker
// --deadlock-timeout, here 5 s) gives its result, because it pauses (a
// signal it sends itself, which ends the task) every so many Starlark steps;
// no workflow task fails or times out. (With 2 s, a CI machine whose
// other tests starved the worker thirtyfold took that long between two
// pauses.)
func TestLongComputationPauses(t *testing.T) {
	srv, bin, dir, _ := setUp(t)
	startWorkers(t, bin, srv.Address, []string{"--deadlock-timeout", "5s"}, func(string) []string { return nil })
	const n = 40_000_000 // some 5 s of computation, twice, on a current machine
	want := 0
	for i := range n {
		want += i % 7
	}
	path := filepath.Join(dir, "long.star")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(longFlow, n)), 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--quiet", "--temporal", srv.Address, path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("aml run --temporal (a run that does not pause never ends): %v\n%s", err, stderr.String())
	}
	if got, wantText := strings.TrimSpace(stdout.String()), fmt.Sprintf("respond %d body %d", want, want); got != wantText {
		t.Fatalf("the run printed %q, want %q", got, wantText)
	}
	c := srv.Dial(t)
	out, err := exec.Command(bin, "runs", "--temporal", srv.Address).Output()
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "long.star") {
			id = strings.Fields(line)[0]
		}
	}
	hist := historyOf(t, c, id)
	if strings.Contains(hist, "WorkflowTaskFailed") || strings.Contains(hist, "WorkflowTaskTimedOut") {
		t.Fatalf("a workflow task of the run failed:\n%s", hist)
	}
	pauses := strings.Count(hist, "SignalExternalWorkflowExecutionInitiated")
	if pauses < 2 {
		t.Fatalf("the run paused %d times:\n%s", pauses, hist)
	}
	t.Logf("%d Starlark iterations twice in %s, in %d pauses", n, time.Since(started).Round(time.Millisecond), pauses)
}
