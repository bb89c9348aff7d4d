package procscope

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "AML_PROCSCOPE_HELPER"

// TestMain lets the test binary act as an aml process that starts a
// marked script whose grandchild leaves the process group, reports the
// script's pid and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		// The script says "started" once it forked both sleeps: from
		// then on they carry the marker.
		cmd := exec.Command("sh", "-c", "setsid sleep 300 >/dev/null & sleep 300 >/dev/null & echo started; wait")
		cmd.Env = append(os.Environ(), Env("script")...)
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			println("error:", err.Error())
			os.Exit(2)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
			println("error: the script did not start its sleeps:", line, err)
			os.Exit(2)
		}
		os.Stdout.WriteString(Marker() + "\n")
		_ = cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOrphansOfAKilledOwner: after a SIGKILL of the owner, the processes
// it started (also the one that called setsid) are orphans, and
// KillOrphans ends them; the processes of a live owner are not orphans.
func TestOrphansOfAKilledOwner(t *testing.T) {
	if MachineID() == "" {
		t.Skip("needs /proc/sys/kernel/random/boot_id and /proc/self/ns/pid")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid (util-linux)")
	}
	// Other tests of this machine may kill orphans meanwhile (aml
	// workspace prune --kill-orphans), so this test kills only its own
	// and compares what Orphans reports with the processes that carry
	// each helper's marker at the same moment.
	var all []int
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		marker := strings.TrimSpace(line)
		if !strings.HasPrefix(marker, "aml-") {
			t.Fatalf("helper: %q", line)
		}
		all = append(all, Find(OwnerVar, marker)...)
		return cmd, marker
	}
	live, _ := start()
	t.Cleanup(func() {
		_ = live.Process.Kill()
		_ = live.Wait()
		for _, pid := range all {
			kill(pid)
		}
	})
	owned := func(owner int) (pids []int) {
		for _, o := range Orphans() {
			if o.Owner == owner {
				pids = append(pids, o.PID)
			}
		}
		return pids
	}
	if p := owned(live.Process.Pid); len(p) != 0 {
		t.Fatalf("processes of a live owner reported as orphans: %v", p)
	}

	const kills = 3
	type dead struct {
		owner  int
		marker string
	}
	var owners []dead
	for range kills {
		h, marker := start()
		_ = h.Process.Signal(syscall.SIGKILL)
		_ = h.Wait()
		owners = append(owners, dead{h.Process.Pid, marker})
	}
	var left []int
	for _, o := range owners {
		orphans := owned(o.owner)
		marked := Find(OwnerVar, o.marker) // a subset, should some be killed in between
		in := map[int]bool{}
		for _, p := range orphans {
			in[p] = true
		}
		for _, p := range marked {
			if !in[p] {
				t.Errorf("owner %d (killed): process %d carries its marker but is not an orphan (orphans %v)", o.owner, p, orphans)
			}
		}
		if len(orphans) > 3 {
			t.Errorf("owner %d (killed): orphans %v, want at most its sh, sleep and setsid sleep", o.owner, orphans)
		}
		left = append(left, orphans...)
	}
	t.Logf("after %d SIGKILLs of owners: %d processes they started still run", kills, len(left))
	if len(left) == 0 {
		t.Skip("every orphan was gone before the check: another process killed them meanwhile (aml workspace prune --kill-orphans in a concurrent test)")
	}
	for _, pid := range left {
		kill(pid)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range left {
		for Alive(pid) && !zombie(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if Alive(pid) && !zombie(pid) {
			t.Errorf("orphan %d still runs", pid)
		}
	}
	for _, o := range owners {
		if p := owned(o.owner); len(p) != 0 {
			t.Errorf("orphans of %d after the kill: %v", o.owner, p)
		}
	}
	if p := owned(live.Process.Pid); len(p) != 0 {
		t.Errorf("processes of the live owner reported as orphans after the kills: %v", p)
	}
}
