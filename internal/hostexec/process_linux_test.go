//go:build linux

package hostexec_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
	"github.com/aml-go/aml/internal/hostexec/hostexectest"
)

func TestMain(m *testing.M) {
	hostexectest.BecomeSubreaper()
	os.Exit(m.Run())
}

// spawnTree spawns the process tree and returns it with its group id.
func spawnTree(t *testing.T, ctx context.Context, rt eval.SandboxRuntime) (eval.SandboxProcess, int) {
	t.Helper()
	proc, err := rt.Spawn(ctx, "sh", []string{"-c", "echo $$; " + hostexectest.TreeScript}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(proc.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	hostexectest.WaitGroupSize(t, pgid, 3)
	return proc, pgid
}

func TestSpawnKillKillsProcessGroup(t *testing.T) {
	_, rt := rwRuntime(t)
	proc, pgid := spawnTree(t, context.Background(), rt)
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	hostexectest.AssertGroupGone(t, pgid)
	if err := proc.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	for range 2 {
		code, err := proc.Wait()
		if code != 128+int(syscall.SIGKILL) || err != nil {
			t.Fatalf("Wait = %d, %v", code, err)
		}
	}
}

func TestReleaseKillsSpawnedProcessGroups(t *testing.T) {
	ws := t.TempDir()
	h, err := hostexec.Open(context.Background(), options(ws, eval.ReadWrite, ".", "."))
	if err != nil {
		t.Fatal(err)
	}
	p1, g1 := spawnTree(t, context.Background(), h.Runtime())
	p2, g2 := spawnTree(t, context.Background(), h.Runtime())
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	hostexectest.AssertGroupGone(t, g1)
	hostexectest.AssertGroupGone(t, g2)
	for _, p := range []eval.SandboxProcess{p1, p2} {
		code, err := p.Wait()
		if code != 128+int(syscall.SIGKILL) || !errors.Is(err, hostexec.ErrReleased) {
			t.Fatalf("Wait = %d, %v", code, err)
		}
	}
}

func TestSpawnContextCancelKillsProcessGroup(t *testing.T) {
	_, rt := rwRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	proc, pgid := spawnTree(t, ctx, rt)
	cancel()
	code, err := proc.Wait()
	if code != 128+int(syscall.SIGKILL) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	hostexectest.AssertGroupGone(t, pgid)
}

// execTree runs the tree through Exec in the background and returns its
// group id and the channel of Exec's error.
func execTree(t *testing.T, ctx context.Context, ws string, rt eval.SandboxRuntime, opts eval.ExecOptions, tail string) (int, <-chan error) {
	t.Helper()
	pidFile := filepath.Join(ws, "pid")
	_ = os.Remove(pidFile)
	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(ctx, "sh", []string{"-c", "echo $$ > pid; " + tail}, opts)
		done <- err
	}()
	pgid := hostexectest.ReadPID(t, pidFile)
	hostexectest.WaitGroupSize(t, pgid, 3)
	return pgid, done
}

func awaitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(hostexectest.HangBound):
		t.Fatal("Exec did not return")
		return nil
	}
}

func TestExecContextCancelKillsProcessGroup(t *testing.T) {
	ws, rt := rwRuntime(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	pgid, done := execTree(t, ctx, ws, rt, eval.ExecOptions{}, hostexectest.TreeScript)
	cause := errors.New("evaluation cancelled")
	cancel(cause)
	err := awaitErr(t, done)
	if !errors.Is(err, cause) {
		t.Fatalf("Exec err = %v, want the cancellation cause", err)
	}
	hostexectest.AssertGroupGone(t, pgid)
}

// TestExecTimeoutKillsProcessGroup: the timeout kills the whole tree. The
// timer runs from the start, so the script marks when its tree is formed;
// a run whose timeout came first (a loaded machine) proves nothing and is
// repeated with a doubled timeout.
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	ws, rt := rwRuntime(t)
	pidFile, ready := filepath.Join(ws, "pid"), filepath.Join(ws, "ready")
	for timeout := 500 * time.Millisecond; ; timeout *= 2 {
		if timeout > hostexectest.HangBound {
			t.Fatalf("the process tree never formed within a timeout of %s", timeout/2)
		}
		for _, f := range []string{pidFile, ready} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() {
			_, err := rt.Exec(context.Background(), "sh", []string{"-c", "echo $$ > pid; sleep 300 & sleep 300 & : > ready; wait"}, eval.ExecOptions{Timeout: timeout})
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(timeout + hostexectest.HangBound):
			t.Fatalf("Exec with timeout %s did not return", timeout)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Exec err = %v", err)
		}
		if _, serr := os.Stat(ready); serr != nil {
			t.Logf("the %s timeout came before the tree formed; retrying", timeout)
			continue
		}
		// The shell, and its two sleepers, existed when the timeout fired.
		hostexectest.AssertGroupGone(t, hostexectest.ReadPID(t, pidFile))
		return
	}
}

func TestExecOutputOverflowKillsProcessGroup(t *testing.T) {
	ws := t.TempDir()
	h := open(t, hostexec.Options{Dir: ws, Root: ".", Cwd: ".", Access: eval.ReadWrite, MaxOutputBytes: 64 << 10})
	// The writer waits until the sleepers run, then floods stdout.
	pgid, done := execTree(t, context.Background(), ws, h.Runtime(), eval.ExecOptions{},
		`sleep 300 & sleep 300 & while [ ! -e go ]; do sleep 0.01; done; yes`)
	hostexectest.WriteHost(t, filepath.Join(ws, "go"), "")
	err := awaitErr(t, done)
	hostexectest.WantErr(t, err, "output exceeded 65536 bytes")
	hostexectest.AssertGroupGone(t, pgid)
}

func TestReleaseKillsRunningExec(t *testing.T) {
	ws := t.TempDir()
	h, err := hostexec.Open(context.Background(), options(ws, eval.ReadWrite, ".", "."))
	if err != nil {
		t.Fatal(err)
	}
	pgid, done := execTree(t, context.Background(), ws, h.Runtime(), eval.ExecOptions{}, hostexectest.TreeScript)
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := awaitErr(t, done); !errors.Is(err, hostexec.ErrReleased) {
		t.Fatalf("Exec err = %v", err)
	}
	hostexectest.AssertGroupGone(t, pgid)
}

// TestExecLeaderExitKillsLeftovers: a background process that outlives
// the command's leader (and holds its stdout) is killed with the group,
// so Exec returns at once instead of waiting for it.
func TestExecLeaderExitKillsLeftovers(t *testing.T) {
	_, rt := rwRuntime(t)
	start := time.Now()
	res, err := rt.Exec(context.Background(), "sh", []string{"-c", "sleep 300 & echo $$"}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Without the group kill Exec would wait for the leftover sleep 300
	// (or its own output grace); only a hang exceeds this bound.
	if d := time.Since(start); d > hostexectest.HangBound {
		t.Fatalf("Exec waited %s for a leftover process", d)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatal(err)
	}
	hostexectest.AssertGroupGone(t, pgid)
}
