//go:build unix

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGINTKillsHostScriptTree interrupts aml run while a host script's
// process tree runs: the CLI exits 130 after cleanup and no process of the
// script's tree survives.
func TestSIGINTKillsHostScriptTree(t *testing.T) {
	t.Parallel() // its run is its own, in its own directory
	bin := buildAML(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "tree.star")
	src := `def main():
    return script("echo $$ > pids; sleep 300 & echo $! >> pids; sleep 300 & echo $! >> pids; echo started >&2; wait", shell = "sh")
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, bin, dir, wf, atStart)
	pidsFile := filepath.Join(dir, "pids")
	deadline := time.Now().Add(signalTimeout)
	for {
		data, _ := os.ReadFile(pidsFile)
		if strings.Count(string(data), "\n") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the script never started its tree\nstderr:\n%s", r.stderrText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.signal(t, syscall.SIGINT)
	code, stdout, stderr := r.wait(t)
	if code != exitSIGINT {
		t.Fatalf("exit code %d after SIGINT, want %d\nstderr:\n%s", code, exitSIGINT, stderr)
	}
	checkCancelled(t, "SIGINT", stdout, stderr)
	data, _ := os.ReadFile(pidsFile)
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		if alive(pid) {
			t.Errorf("process %d of the script's tree survived the interrupted run", pid)
		}
	}
}

// alive reports whether pid names a live (not zombie) process once the
// kill had signalTimeout to take effect.
func alive(pid int) bool {
	deadline := time.Now().Add(signalTimeout)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return false
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && strings.Contains(string(st), ") Z ") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
