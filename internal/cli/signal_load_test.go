//go:build unix

package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalDuringLoad: a signal while the workflow's top-level code
// runs (here an endless loop) stops the load and exits 130/143 through
// the handler, instead of the process dying by the signal.
func TestSignalDuringLoad(t *testing.T) {
	t.Parallel() // its runs are its own
	bin := buildAML(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "spin.star")
	src := "def spin():\n    n = 0\n    for i in range(100000000000):\n        n += 1\n    return n\n\nprint(\"loading\")\nN = spin()\n\ndef main():\n    return str(N)\n"
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, exitSIGINT}, {syscall.SIGTERM, exitSIGTERM}} {
		cmd := exec.Command(bin, "run", wf)
		pipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(pipe)
		var stderr strings.Builder
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "loading") {
				break
			}
		}
		if err := cmd.Process.Signal(c.sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			for sc.Scan() {
				stderr.WriteString(sc.Text() + "\n")
			}
			done <- cmd.Wait()
		}()
		select {
		case <-done:
		case <-time.After(signalTimeout):
			_ = cmd.Process.Kill()
			t.Fatalf("%v during load: aml did not exit\n%s", c.sig, stderr.String())
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() || ws.ExitStatus() != c.code {
			t.Fatalf("%v during load: status %v (signalled %v), want exit %d\n%s", c.sig, ws.ExitStatus(), ws.Signaled(), c.code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "while loading") {
			t.Errorf("%v during load: stderr does not say the load was stopped:\n%s", c.sig, stderr.String())
		}
	}
}
