//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLeftoversBlockTakeover: after a SIGKILL of aml, the scripts it ran
// in a local_workspace (one of them escaped its process group with
// setsid) still work in the directory; the next run does not take the
// dead owner's lock over while they run, and names them. Once they are
// gone, it does.
func TestLeftoversBlockTakeover(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid (util-linux)")
	}
	bin := buildAML(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "busy.star")
	src := `store = local_workspace(directory = ` + strconv.Quote(ws) + `)

def main():
    return workspace(script("setsid sleep 300 & echo $! > escaped.pid; echo started > started; sleep 300", shell = "sh"), provider = store)
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	first := exec.Command(bin, "run", "--quiet", wf)
	first.Dir = dir
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(dir, "started")
	deadline := time.Now().Add(signalTimeout)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = first.Process.Kill()
			t.Fatal("the script never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	b, _ := os.ReadFile(filepath.Join(dir, "escaped.pid"))
	escaped, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	second := exec.Command(bin, "run", "--quiet", wf)
	second.Dir = dir
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "processes it started are still running: pids") || !strings.Contains(string(out), strconv.Itoa(escaped)) {
		t.Fatalf("the second run did not refuse the takeover while the leftovers run (escaped pid %d): %v\n%s", escaped, err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(string(out)))

	// The operator stops them (the pids the error names); then the lock
	// is taken over and the workspace works again.
	for _, f := range strings.Fields(string(out)[strings.Index(string(out), "(kill ")+len("(kill "):]) {
		f = strings.TrimSuffix(f, ")")
		pid, err := strconv.Atoi(f)
		if err != nil {
			break
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, p := range []int{escaped} {
		for i := 0; processLive(p) && i < 6000; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := os.WriteFile(wf, []byte(`store = local_workspace(directory = `+strconv.Quote(ws)+`)

def main():
    return workspace("ok", provider = store)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	third := exec.Command(bin, "run", "--quiet", wf)
	third.Dir = dir
	out, err = third.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("after the leftovers were stopped: %v\n%s", err, out)
	}
}

func processLive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
