//go:build linux

package cli

import (
	"bytes"
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

// dirUsage counts the regular files below dir and their bytes.
func dirUsage(dir string) (files int, size int64) {
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			files++
			size += info.Size()
		}
		return nil
	})
	return files, size
}

// TestPruneAfterKilledSaves: aml run processes SIGKILLed in the middle of
// saving a filesystem workspace leave a materialization in TMPDIR and an
// unpublished revision in the store. Each next run sweeps what its dead
// predecessor left of the workspace; aml workspace prune removes the rest
// (also a dead process's staging directory) while a live run's workspace
// is named busy and its materialization kept. The store still restores.
func TestPruneAfterKilledSaves(t *testing.T) {
	if procscope.MachineID() == "" {
		t.Skip("needs /proc/sys/kernel/random/boot_id and /proc/self/ns/pid to tell dead owners")
	}
	// Parallel: its own TMPDIR and store, and its prune names its store
	// and kills nothing.
	t.Parallel()
	bin := buildAML(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	temp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(temp, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TMPDIR="+temp)
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := `configure(workspace_provider = filesystem_workspace(directory = ` + strconv.Quote(store) + `), sandbox_provider = local_sandbox())
`
	saver := write("save.star", header+`
def main():
    return workspace(
        sandbox(script("head -c 24000000 /dev/urandom > big; echo $RANDOM > small; echo saved", shell = "sh"), access = "read-write"),
        id = "ws",
        save = True,
    )
`)
	run := func(wf string) *exec.Cmd {
		cmd := exec.Command(bin, "run", "--quiet", wf)
		cmd.Dir, cmd.Env = dir, env
		return cmd
	}
	if out, err := run(saver).CombinedOutput(); err != nil {
		t.Fatalf("first save: %v\n%s", err, out)
	}
	pending := filepath.Join(store, "ws", "pending")

	// Kill each save once it announced its revision (the pending marker
	// is written just before the upload).
	const kills = 5
	killed, lastKilled := 0, false
	for i := range kills {
		// The marker the previous killed save left stays until this
		// run's acquisition sweeps it: wait for a new one.
		before := map[string]bool{}
		if m, _ := filepath.Glob(filepath.Join(pending, "*.json")); len(m) > 0 {
			for _, p := range m {
				before[p] = true
			}
		}
		cmd := run(saver)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(signalTimeout)
		for {
			m, _ := filepath.Glob(filepath.Join(pending, "*.json"))
			fresh := false
			for _, p := range m {
				fresh = fresh || !before[p]
			}
			if fresh {
				break
			}
			if cmd.ProcessState == nil && !processLive(cmd.Process.Pid) {
				_ = cmd.Wait()
				t.Fatalf("save %d ended before it started saving: %s", i, stderr.String())
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatal("no save started")
			}
			time.Sleep(time.Millisecond)
		}
		// At varied points of the upload; the last one right away.
		time.Sleep(time.Duration(kills-1-i) * 50 * time.Millisecond) // the stimulus: the kill point
		_ = cmd.Process.Signal(syscall.SIGKILL)
		lastKilled = cmd.Wait() != nil
		if lastKilled {
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("every save finished before its kill: nothing to sweep")
	}
	tempFiles, tempBytes := dirUsage(temp)
	revs, _ := filepath.Glob(filepath.Join(store, "ws", "revisions", "*"))
	t.Logf("after %d kills (%d mid-save): %d files, %d MB in TMPDIR; %d revision objects in the store (one is published)", kills, killed, tempFiles, tempBytes>>20, len(revs))
	if n, _ := filepath.Glob(filepath.Join(temp, "aml-workspace-*")); len(n) > 1 || lastKilled && len(n) != 1 {
		t.Errorf("%d materializations in TMPDIR after %d kills, want only the last killed run's: each run sweeps its predecessors'", len(n), kills)
	}

	// A dead process's staging directory, as a killed agent run leaves it.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(temp, "aml-agent-0123456789")
	owner := procscope.Self()
	owner.PID = gone.Process.Pid
	marker, _ := json.Marshal(owner)
	if err := os.Mkdir(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(staging, "prompt.md"), bytes.Repeat([]byte("x"), 1<<20), 0o600)
	_ = os.WriteFile(staging+".owner", marker, 0o600)

	// A live run holds another workspace.
	holder := write("hold.star", header+`
def main():
    return workspace(
        sandbox(script("echo started > `+filepath.Join(dir, "started")+`; sleep 300", shell = "sh"), access = "read-write"),
        id = "held",
        save = True,
    )
`)
	live := run(holder)
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	deadline := time.Now().Add(signalTimeout)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holding run never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var liveMats []string
	mats, _ := filepath.Glob(filepath.Join(temp, "aml-workspace-*"))
	for _, m := range mats {
		if b, _ := os.ReadFile(filepath.Join(m, "owner.json")); bytes.Contains(b, []byte(`"pid":`+strconv.Itoa(live.Process.Pid)+`,`)) {
			liveMats = append(liveMats, m)
		}
	}
	if len(liveMats) != 1 {
		t.Fatalf("the live run's materializations: %q of %q", liveMats, mats)
	}

	prune := exec.Command(bin, "workspace", "prune", "--json", store)
	prune.Env = env
	var out, errb bytes.Buffer
	prune.Stdout, prune.Stderr = &out, &errb
	if err := prune.Run(); err != nil {
		t.Fatalf("prune: %v\n%s%s", err, out.String(), errb.String())
	}
	var rep pruneReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("prune --json: %v\n%s", err, out.String())
	}
	t.Logf("prune removed %d items (%d MB): %q; busy: %q", len(rep.Removed), rep.Bytes>>20, rep.Removed, rep.Busy)
	if len(rep.Busy) != 1 || !strings.Contains(rep.Busy[0], `"held"`) {
		t.Errorf("busy %q, want the workspace the live run holds", rep.Busy)
	}
	if !containsPrefix(rep.Removed, staging) {
		t.Errorf("the dead process's staging directory was not removed: %q", rep.Removed)
	}
	if _, err := os.Lstat(staging + ".owner"); err == nil {
		t.Error("the staging directory's marker survived")
	}

	// What is left in TMPDIR is the live run's, and in the store only
	// published revisions and no markers or temporary uploads.
	left, _ := filepath.Glob(filepath.Join(temp, "aml-*"))
	var foreign []string
	for _, l := range left {
		if !containsPrefix(liveMats, l) && !strings.HasPrefix(filepath.Base(l), "aml-acp-") {
			foreign = append(foreign, l)
		}
	}
	if len(foreign) > 0 {
		t.Errorf("left in TMPDIR after prune: %q (the live run has %q)", foreign, liveMats)
	}
	for _, m := range liveMats {
		if _, err := os.Stat(m); err != nil {
			t.Errorf("the live run's materialization %s was removed", m)
		}
	}
	var index struct {
		Revisions []struct{ ID, Path string }
	}
	data, err := os.ReadFile(filepath.Join(store, "ws", "workspace.json"))
	if err != nil || json.Unmarshal(data, &index) != nil {
		t.Fatalf("index: %v %s", err, data)
	}
	revs, _ = filepath.Glob(filepath.Join(store, "ws", "revisions", "*"))
	if len(revs) != len(index.Revisions) {
		t.Errorf("store holds %d revision objects for %d published revisions: %q", len(revs), len(index.Revisions), revs)
	}
	if m, _ := filepath.Glob(filepath.Join(pending, "*")); len(m) > 0 {
		t.Errorf("pending markers left: %q", m)
	}
	var tmps []string
	_ = filepath.Walk(filepath.Join(store, "ws"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			tmps = append(tmps, p)
		}
		return nil
	})
	if len(tmps) > 0 {
		t.Errorf("temporary uploads left: %q", tmps)
	}
	files, size := dirUsage(temp)
	t.Logf("after prune: %d files, %d MB in TMPDIR (the live run's), %d revision objects in the store", files, size>>20, len(revs))

	// The store still works: the current revision restores.
	check := write("check.star", header+`
def main():
    return workspace(sandbox(script("wc -c < big", shell = "sh"), access = "read-write"), id = "ws")
`)
	got, err := run(check).CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "24000000" {
		t.Fatalf("restoring the current revision after prune: %v\n%s", err, got)
	}
}

func containsPrefix(list []string, p string) bool {
	for _, l := range list {
		if l == p || strings.HasPrefix(l, p+"/") || strings.HasPrefix(p, l+"/") {
			return true
		}
	}
	return false
}
