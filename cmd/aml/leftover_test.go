//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/procscope"
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

	// The operator looks for leftovers, then has prune end them.
	named := map[int]bool{}
	for _, f := range strings.Fields(string(out)[strings.Index(string(out), "(kill ")+len("(kill "):]) {
		pid, err := strconv.Atoi(strings.TrimSuffix(f, ","))
		if err != nil {
			break
		}
		named[pid] = true
	}
	if !named[escaped] {
		t.Fatalf("the error names pids %v, not the escaped %d", named, escaped)
	}
	prune := func(args ...string) pruneReport {
		cmd := exec.Command(bin, append([]string{"workspace", "prune", "--json"}, args...)...)
		out, err := cmd.Output()
		var rep pruneReport
		if err != nil || json.Unmarshal(out, &rep) != nil {
			t.Fatalf("aml workspace prune %v: %v\n%s", args, err, out)
		}
		return rep
	}
	pids := func(os []procscope.Orphan) map[int]bool {
		m := map[int]bool{}
		for _, o := range os {
			m[o.PID] = true
		}
		return m
	}
	if rep := prune(); !pids(rep.Orphans)[escaped] || len(rep.Killed) != 0 {
		t.Fatalf("prune without --kill-orphans: orphans %v, killed %v; want the escaped %d listed and nothing killed", rep.Orphans, rep.Killed, escaped)
	}
	if !processLive(escaped) {
		t.Fatal("prune without --kill-orphans killed a process")
	}
	rep := prune("--kill-orphans")
	killed := pids(rep.Killed)
	for pid := range named {
		if !killed[pid] {
			t.Errorf("prune --kill-orphans did not kill %d (killed %v)", pid, rep.Killed)
		}
	}
	t.Logf("prune --kill-orphans killed %d leftover processes of the SIGKILLed run", len(named))
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
