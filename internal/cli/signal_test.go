//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slowWorkflow's agent answers with a Starlark function that loops for
// minutes unless its thread is cancelled.
const slowWorkflow = `def slow(req):
    n = 0
    for i in range(1000000000):
        n += i
    return "done"

busy = deterministic_agent(respond = slow)

def main():
    return agent("spin", provider = busy)
`

// The stderr lines startRun can wait for before it returns.
const (
	// atStart: the run was announced; the signal handler is installed
	// before this line is logged.
	atStart = "starting run "
	// inSession: the agent session began, so respond is spinning.
	inSession = "▶ agent.session"
)

// signalTimeout bounds every wait of the signal tests. It is generous
// (only a real hang exceeds it, even for a -race binary on a loaded
// machine): the tests assert what happened (exit code, cleanup line), not
// how fast.
const signalTimeout = time.Minute

// TestSignals runs the real aml binary, interrupts a run whose agent is
// busy in Starlark, and checks the exit code and that the run was
// cancelled and cleaned up (rather than abandoned after the 10 s cleanup
// deadline).
func TestSignals(t *testing.T) {
	t.Parallel() // its runs are its own, in its own directory
	bin := buildAML(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "slow.star")
	if err := os.WriteFile(wf, []byte(slowWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("SIGINT", func(t *testing.T) {
		t.Parallel()
		r := startRun(t, bin, dir, wf, inSession)
		r.signal(t, syscall.SIGINT)
		code, stdout, stderr := r.wait(t)
		if code != exitSIGINT {
			t.Fatalf("exit code %d after SIGINT, want %d\nstderr:\n%s", code, exitSIGINT, stderr)
		}
		checkCancelled(t, "SIGINT", stdout, stderr)
	})

	t.Run("SIGINT at start", func(t *testing.T) {
		t.Parallel()
		// A signal the moment the run is announced still cancels it
		// gracefully instead of killing the process.
		r := startRun(t, bin, dir, wf, atStart)
		r.signal(t, syscall.SIGINT)
		code, stdout, stderr := r.wait(t)
		if code != exitSIGINT {
			t.Fatalf("exit code %d after an early SIGINT, want %d\nstderr:\n%s", code, exitSIGINT, stderr)
		}
		checkCancelled(t, "SIGINT", stdout, stderr)
	})

	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		r := startRun(t, bin, dir, wf, inSession)
		r.signal(t, syscall.SIGTERM)
		code, stdout, stderr := r.wait(t)
		if code != exitSIGTERM {
			t.Fatalf("exit code %d after SIGTERM, want %d\nstderr:\n%s", code, exitSIGTERM, stderr)
		}
		checkCancelled(t, "SIGTERM", stdout, stderr)
	})

	t.Run("SIGINT twice within milliseconds", func(t *testing.T) {
		t.Parallel()
		// One signal delivered twice (GNU timeout signals the child and
		// then its group) counts once: the run is cleaned up, not
		// abandoned.
		r := startRun(t, bin, dir, wf, inSession)
		first := time.Now()
		r.signal(t, syscall.SIGINT)
		time.Sleep(5 * time.Millisecond) // the stimulus: the second delivery, milliseconds later
		// The cleanup may already have ended the process.
		if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		skipIfApart(t, "SIGINT", time.Since(first))
		// The cleanup may also have ended the run just before the
		// second signal, which then lands while the process exits, after
		// aml stopped listening: being ended by it then is as good as
		// exiting with 130.
		code, stdout, stderr := r.waitOrSignalled(t, syscall.SIGINT)
		if code != exitSIGINT {
			t.Fatalf("exit code %d after two SIGINTs, want %d\nstderr:\n%s", code, exitSIGINT, stderr)
		}
		checkCancelled(t, "SIGINT", stdout, stderr)
		if strings.Contains(stderr, "second signal") {
			t.Errorf("a signal delivered twice 5 ms apart was taken as a second request:\n%s", stderr)
		}
	})
}

// skipIfApart skips a test of one signal delivered twice when this
// machine took so long to send the second delivery that it came
// signalRepeatWindow or more after the first: it was then a second
// request, not the case under test.
func skipIfApart(t *testing.T, name string, apart time.Duration) {
	t.Helper()
	if apart >= signalRepeatWindow {
		t.Skipf("the two %ss were sent %v apart, past the %v repeat window (a loaded machine): not one signal delivered twice", name, apart.Round(time.Millisecond), signalRepeatWindow)
	}
}

// checkCancelled checks that the run was cancelled by the signal and its
// cleanup finished, and that nothing was printed as a result.
func checkCancelled(t *testing.T, name, stdout, stderr string) {
	t.Helper()
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing after an interrupted run", stdout)
	}
	if !strings.Contains(stderr, "received "+name+": cancelling run") {
		t.Errorf("stderr does not announce the cancellation:\n%s", stderr)
	}
	if !strings.Contains(stderr, "stopped after cleanup") {
		t.Errorf("the run did not stop after cleanup (was the Starlark thread cancelled?):\n%s", stderr)
	}
}

// run is one aml run process whose stderr is collected line by line.
type run struct {
	cmd      *exec.Cmd
	stdout   bytes.Buffer
	mu       sync.Mutex
	stderr   strings.Builder
	scanned  chan struct{} // closed when stderr reached EOF
	exited   chan struct{} // closed when Wait returned
	waitErr  error
	finished bool
}

// startRun starts "aml run --trace FILE" and returns once stderr showed
// the "starting run" lifecycle line and then the line containing until
// (atStart or inSession).
func startRun(t *testing.T, bin, dir, wf, until string) *run {
	t.Helper()
	r := &run{scanned: make(chan struct{}), exited: make(chan struct{})}
	r.cmd = exec.Command(bin, "run", "--trace", wf)
	r.cmd.Dir = dir
	r.cmd.Stdout = &r.stdout
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !r.finished {
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})

	ready := make(chan struct{})
	go func() {
		defer close(r.scanned)
		started, signalled := false, false
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.stderr.WriteString(line + "\n")
			r.mu.Unlock()
			if strings.Contains(line, "starting run ") {
				started = true
			}
			if started && !signalled && strings.Contains(line, until) {
				signalled = true
				close(ready)
			}
		}
	}()
	go func() {
		<-r.scanned // StderrPipe must be drained before Wait
		r.waitErr = r.cmd.Wait()
		close(r.exited)
	}()

	select {
	case <-ready:
	case <-r.exited:
		t.Fatalf("aml run exited before the agent session started: %v\nstderr:\n%s", r.waitErr, r.stderrText())
	case <-time.After(signalTimeout):
		t.Fatalf("no \"starting run\" and agent session on stderr within %s\nstderr:\n%s", signalTimeout, r.stderrText())
	}
	return r
}

func (r *run) stderrText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

func (r *run) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v: %v", sig, err)
	}
}

// waitOrSignalled is wait, except that a process ended by sig after its
// cleanup finished ("stopped after cleanup" on stderr) yields 128+sig.
func (r *run) waitOrSignalled(t *testing.T, sig syscall.Signal) (int, string, string) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(signalTimeout):
		t.Fatalf("aml run did not exit within %s of the signal\nstderr:\n%s", signalTimeout, r.stderrText())
	}
	var ee *exec.ExitError
	if errors.As(r.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == sig && strings.Contains(r.stderrText(), "stopped after cleanup") {
			r.finished = true
			return 128 + int(sig), r.stdout.String(), r.stderrText()
		}
	}
	return r.wait(t)
}

// wait waits for the process to exit and returns its exit code, stdout and
// stderr. A process killed by a signal yields a failure, not a code.
func (r *run) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(signalTimeout):
		t.Fatalf("aml run did not exit within %s of the signal\nstderr:\n%s", signalTimeout, r.stderrText())
	}
	r.finished = true
	stderr := r.stderrText()
	if r.waitErr == nil {
		return 0, r.stdout.String(), stderr
	}
	var ee *exec.ExitError
	if !errors.As(r.waitErr, &ee) {
		t.Fatalf("aml run: %v\nstderr:\n%s", r.waitErr, stderr)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("aml run was killed by %v instead of exiting with a code\nstderr:\n%s", ws.Signal(), stderr)
	}
	return ee.ExitCode(), r.stdout.String(), stderr
}

// TestRepeatedSignal: the same signal within signalRepeatWindow is one
// signal delivered twice; a later one, or another signal, is a second
// request that forces the exit.
func TestRepeatedSignal(t *testing.T) {
	for _, c := range []struct {
		first, again os.Signal
		since        time.Duration
		want         bool
	}{
		{syscall.SIGINT, syscall.SIGINT, 5 * time.Millisecond, true},
		{syscall.SIGTERM, syscall.SIGTERM, 99 * time.Millisecond, true},
		{syscall.SIGINT, syscall.SIGINT, 200 * time.Millisecond, false},
		{syscall.SIGINT, syscall.SIGINT, 2 * time.Second, false},
		{syscall.SIGINT, syscall.SIGINT, signalRepeatWindow, false},
		{syscall.SIGTERM, syscall.SIGINT, time.Millisecond, false},
	} {
		t0 := time.Now()
		if got := repeatedSignal(arrival{c.first, t0}, arrival{c.again, t0.Add(c.since)}); got != c.want {
			t.Errorf("repeatedSignal(%v, %v, %s) = %v, want %v", c.first, c.again, c.since, got, c.want)
		}
	}
}

// waitCPU waits until process pid has used at least d of CPU time
// (/proc/PID/stat), failing the test when it exits first or takes longer
// than signalTimeout; it skips without /proc.
func waitCPU(t *testing.T, pid int, d time.Duration, exited <-chan error) {
	t.Helper()
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	deadline := time.After(signalTimeout)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Skipf("needs /proc to measure the CPU time of a process (Linux): %v", err)
		}
		// The fields after the command name, which is in parentheses:
		// utime and stime are the 12th and 13th.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.Atoi(f[11])
			s, _ := strconv.Atoi(f[12])
			if time.Duration(u+s)*tick >= d {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the process exited (%v) before using %s of CPU", err, d)
		case <-deadline:
			t.Fatalf("the process did not use %s of CPU within %s", d, signalTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// uncancellable squares a big integer to 33 million bits (well under a
// second of CPU, not two with -race) and converts it to
// decimal: one builtin call of seconds (7, 14 with -race) that a cancelled thread only notices once it
// returns, so cleanup after a first signal takes as long as it does.
const uncancellable = `def main():
    y = 1 << 500
    for i in range(16):
        y = y * y
    return str(len(str(y)))
`

// TestSecondSignalExitsAtOnce: while the cleanup of a first SIGINT cannot
// finish, a second SIGINT a person sends (200 ms after aml said it got
// the first: beyond the window of one signal delivered twice) ends aml run and aml test at once with
// 130, rather than after the 10 s cleanup deadline or the computation.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	bin := buildAML(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.star"), []byte(uncancellable), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, first, second string }{
		{"run", "received SIGINT: cancelling run", "second signal: exiting without waiting for cleanup"},
		{"test", "aml test: received SIGINT: cancelling", "aml test: second signal: exiting without waiting for cleanup"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, c.name, "big.star")
			cmd.Dir = dir
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			// Within the conversion: loading and squaring use well under
			// this much CPU, the conversion far more. CPU time, not wall
			// time, so that a loaded machine changes nothing.
			waitCPU(t, cmd.Process.Pid, 3*time.Second, exited)
			_ = cmd.Process.Signal(syscall.SIGINT)
			// A person's second Ctrl-C comes after aml said it got the
			// first, and not at once. Waiting for the words keeps a
			// loaded machine, which can stamp the first signal late, from
			// bringing the two within the window of one signal delivered
			// twice.
			for deadline := time.Now().Add(signalTimeout); !strings.Contains(stderr.String(), c.first); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("aml %s did not say it got the first signal:\n%s", c.name, stderr.String())
				}
			}
			time.Sleep(200 * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGINT)
			var err error
			select {
			case err = <-exited:
			case <-time.After(signalTimeout):
				t.Fatalf("aml %s did not exit within %s of two signals\nstderr:\n%s", c.name, signalTimeout, stderr.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitSIGINT {
				t.Fatalf("aml %s: %v, want exit code %d\nstderr:\n%s", c.name, err, exitSIGINT, stderr.String())
			}
			for _, line := range []string{c.first, c.second} {
				if !strings.Contains(stderr.String(), line) {
					t.Errorf("aml %s: stderr lacks %q:\n%s", c.name, line, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "cleanup did not finish") {
				t.Errorf("aml %s waited for the cleanup deadline:\n%s", c.name, stderr.String())
			}
		})
	}
}

// TestSignalsStampedOnArrival: two SIGINTs sent 200 ms apart stay two
// signals when their handler only gets to them after both arrived (a
// loaded machine), because each is stamped when it arrives.
func TestSignalsStampedOnArrival(t *testing.T) {
	dst := make(chan arrival, 2)
	stop := listen(dst)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // a person's second Ctrl-C
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The handler is late: it reads both only now.
	var got []arrival
	timeout := time.After(signalTimeout)
	for len(got) < 2 {
		select {
		case a := <-dst:
			got = append(got, a)
		case <-timeout:
			t.Fatalf("received %d of 2 signals within %s", len(got), signalTimeout)
		}
	}
	if gap := got[1].at.Sub(got[0].at); repeatedSignal(got[0], got[1]) || gap < 150*time.Millisecond {
		t.Fatalf("two SIGINTs sent 200 ms apart arrived %s apart (repeated: %v)", gap, repeatedSignal(got[0], got[1]))
	}
}
