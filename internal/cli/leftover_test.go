//go:build linux

package cli

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
// gone, it does. Not parallel: its prune --kill-orphans ends every dead
// run's leftovers on the machine (see cleanup).
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
	waitUntil(t, "the escaped process to end after prune --kill-orphans", func() bool { return !processLive(escaped) })
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

// TestAgentDiesWithAML: an ACP agent that never answers is SIGKILLed by
// the kernel when aml is (it no longer runs on, unbounded, after its
// client died); what the agent started itself is an orphan that aml
// workspace prune names.
func TestAgentDiesWithAML(t *testing.T) {
	bin := buildAML(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "agent.star")
	src := `mute = acp_agent(command = "sh", args = ["-c", "sleep 300 & echo $! > helper.pid; echo $$ > agent.pid; exec sleep 300"])

def main():
    return agent("hello", provider = mute)
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "run", "--quiet", wf)
	run.Dir = dir
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	deadline := time.Now().Add(signalTimeout)
	for read("agent.pid") == 0 || read("helper.pid") == 0 {
		if time.Now().After(deadline) {
			_ = run.Process.Kill()
			t.Fatal("the agent never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	agentPID, helperPID := read("agent.pid"), read("helper.pid")
	t.Cleanup(func() { _ = syscall.Kill(helperPID, syscall.SIGKILL) })
	_ = run.Process.Signal(syscall.SIGKILL)
	_ = run.Wait()
	for i := 0; processLive(agentPID) && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if processLive(agentPID) {
		_ = syscall.Kill(agentPID, syscall.SIGKILL)
		t.Fatalf("the agent (pid %d) outlived the SIGKILLed aml by 5 s", agentPID)
	}
	out, err := exec.Command(bin, "workspace", "prune", "--json").Output()
	var rep pruneReport
	if err != nil || json.Unmarshal(out, &rep) != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	found := false
	for _, o := range rep.Orphans {
		found = found || o.PID == helperPID && o.Owner == run.Process.Pid
	}
	if !found {
		t.Errorf("prune lists orphans %v, not the agent's helper %d of aml %d", rep.Orphans, helperPID, run.Process.Pid)
	}
}
