//go:build linux

package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/aml-go/aml/internal/dockertest"
	"github.com/aml-go/aml/internal/procscope"
)

// setsidWorkflow's script records its owner mark, starts a descendant in
// a session of its own (out of the script's process group), then waits.
const setsidWorkflow = `def main():
    return script("echo $AML_OWNER > owner; setsid sleep 300 & echo started > started; sleep 300", shell = "sh")
`

// TestSignalsLeaveNothing: a run ended by GNU timeout (which signals aml
// and then its process group) or by one SIGINT delivered twice 5 ms apart
// cleans up as for one signal: exit 124 or 130, and no process the run
// started, its script's setsid descendant included, is left.
func TestSignalsLeaveNothing(t *testing.T) {
	if !procscope.Supported() {
		t.Skip("the processes a run started cannot be found on this host (/proc)")
	}
	// Parallel: it looks only for processes that carry its runs' owner
	// marks, and the tests that end other runs' leftovers are not
	// parallel (see cleanup), so none can hide what it left.
	t.Parallel()
	bin := buildAML(t)
	prepare := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "w.star"), []byte(setsidWorkflow), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// leftBy returns the live processes that carry the run's owner mark.
	leftBy := func(t *testing.T, dir string) []int {
		t.Helper()
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			t.Fatalf("the script did not record its owner mark: %v", err)
		}
		mark := strings.TrimSpace(string(owner))
		var left []int
		for range 300 { // the kernel ends SIGKILLed processes at once; reaping may lag (30 s on a loaded machine)
			if left = procscope.Find(procscope.OwnerVar, mark); len(left) == 0 {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return left
	}
	started := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	}

	t.Run("GNU timeout", func(t *testing.T) {
		timeoutCmd, err := exec.LookPath("timeout")
		if err != nil {
			t.Skip("GNU timeout is not on PATH (coreutils)")
		}
		// Without -race the binary starts in milliseconds, so that the
		// script runs well within the 2 s even on a loaded machine; a
		// run whose script did not start yet is tried again.
		fast := buildAMLRace(t, false)
		var dir string
		var out []byte
		for try := range 3 {
			dir = prepare(t)
			cmd := exec.Command(timeoutCmd, "2", fast, "run", "w.star")
			cmd.Dir = dir
			out, err = cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 124 {
				t.Fatalf("timeout 2 aml run: %v, want exit 124\n%s", err, out)
			}
			if started(dir) {
				break
			}
			if try == 2 {
				t.Fatalf("the script did not start within 2 s in 3 tries, so the test proves nothing:\n%s", out)
			}
		}
		if strings.Contains(string(out), "second signal") || !strings.Contains(string(out), "stopped after cleanup") {
			t.Errorf("the signal GNU timeout delivered twice was not taken as one:\n%s", out)
		}
		if left := leftBy(t, dir); len(left) > 0 {
			t.Errorf("processes of the run left after timeout ended it: %v\n%s", left, out)
		}
	})

	t.Run("SIGINT twice 5 ms apart", func(t *testing.T) {
		dir := prepare(t)
		cmd := exec.Command(bin, "run", "w.star")
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the script to start", func() bool { return started(dir) })
		first := time.Now()
		_ = cmd.Process.Signal(syscall.SIGINT)
		time.Sleep(5 * time.Millisecond) // the stimulus: the second SIGINT 5 ms after the first
		_ = cmd.Process.Signal(syscall.SIGINT)
		apart := time.Since(first)
		err := cmd.Wait()
		if apart >= signalRepeatWindow {
			leftBy(t, dir) // ends what a second request may have left
			skipIfApart(t, "SIGINT", apart)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitSIGINT {
			t.Fatalf("aml run after two SIGINTs: %v, want exit %d\n%s", err, exitSIGINT, stderr.String())
		}
		if strings.Contains(stderr.String(), "second signal") || !strings.Contains(stderr.String(), "stopped after cleanup") {
			t.Errorf("one SIGINT delivered twice was not taken as one:\n%s", stderr.String())
		}
		if left := leftBy(t, dir); len(left) > 0 {
			t.Errorf("processes of the run left after the SIGINTs: %v\n%s", left, stderr.String())
		}
	})
}

// TestSecondSignalDuringSlowCleanup: when cleanup is slow (here the
// Docker daemon froze with the run's container in it, so its removal
// waits for engine_timeout_ms), a second SIGINT 2 s after the first still
// forces the exit at once; once the daemon answers again, nothing is
// left after aml sandbox prune (the daemon may also carry out the
// removal aml asked for before it exited).
func TestSecondSignalDuringSlowCleanup(t *testing.T) {
	d := dockertest.PrivateDaemon(t, dockerTestImage)
	bin := buildAML(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "frozen.star")
	if err := os.WriteFile(wf, []byte(`box = docker_sandbox(image = "`+dockerTestImage+`", workspace = `+strconv.Quote(dir)+`, engine_timeout_ms = 120000)

def main():
    return sandbox(script("echo started > /workspace/started; sleep 300", shell = "sh"), provider = box, access = "read-write")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", wf)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+d.Host)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the script to start in its container", func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	d.Freeze()
	_ = cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(2 * time.Second) // the stimulus: a person waits 2 s on the frozen daemon, then presses Ctrl-C again
	second := time.Now()
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	took := time.Since(second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitSIGINT {
		t.Fatalf("aml run after a second SIGINT: %v, want exit %d\n%s", err, exitSIGINT, stderr.String())
	}
	if !strings.Contains(stderr.String(), "second signal: exiting without waiting for cleanup") {
		t.Errorf("the second SIGINT did not force the exit:\n%s", stderr.String())
	}
	// The cleanup deadline (10 s) would have ended it too; the second
	// signal must end it well before.
	if took > 5*time.Second {
		t.Errorf("the exit came %v after the second SIGINT", took)
	}
	t.Logf("exited %v after the second SIGINT", took.Round(time.Millisecond))

	list := func() []container.Summary {
		t.Helper()
		l, err := d.Client.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml.lease"))})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// Once thawed, the daemon may still carry out the removal aml asked
	// for before it exited; what it does not, aml sandbox prune removes.
	d.Thaw()
	prune := exec.Command(bin, "sandbox", "prune")
	prune.Env = append(os.Environ(), "DOCKER_HOST="+d.Host)
	if out, err := prune.CombinedOutput(); err != nil {
		t.Errorf("aml sandbox prune: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(list()) != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(list()); n != 0 {
		t.Errorf("%d containers after aml sandbox prune", n)
	}
}
