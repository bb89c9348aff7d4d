package scratch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const helperEnv = "AML_SCRATCH_HELPER"

// TestMain lets the test binary act as a process that makes a scratch
// directory, fills it, reports it and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		dir, err := MkdirTemp("aml-agent-")
		if err != nil {
			println("error:", err.Error())
			os.Exit(2)
		}
		_ = os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1<<20), 0o600)
		os.Stdout.WriteString(dir + "\n")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper starts a process that makes one scratch directory in temp.
func helper(t *testing.T, temp string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "TMPDIR="+temp)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// TestSweepRemovesWhatKilledProcessesLeft: the directories of SIGKILLed
// processes go, with their markers: each new process's first MkdirTemp
// sweeps what its dead predecessors left, and Sweep the rest. A live
// process's directory, a directory without a marker and one with an
// unreadable marker stay.
func TestSweepRemovesWhatKilledProcessesLeft(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owners are only judged gone on Linux (boot id and pid namespace)")
	}
	temp := t.TempDir()
	unmarked := filepath.Join(temp, "aml-agent-unmarked")
	garbled := filepath.Join(temp, "aml-agent-garbled")
	for _, d := range []string{unmarked, garbled} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(garbled+MarkerSuffix, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, live := helper(t, temp)
	const kills = 5
	var dead []string
	for range kills {
		cmd, dir := helper(t, temp)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		dead = append(dead, dir)
	}
	present := func() (n int) {
		for _, d := range dead {
			if _, err := os.Lstat(d); err == nil {
				n++
			}
		}
		return n
	}
	t.Logf("after %d kills: %d of their directories left (each new process swept its predecessors')", kills, present())
	if n := present(); n != 1 {
		t.Errorf("%d directories of killed processes left, want only the last one's", n)
	}

	res, err := Sweep(temp)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Sweep: %d directories, %d bytes", len(res.Removed), res.Bytes)
	if len(res.Removed) != 1 || res.Removed[0] != dead[kills-1] || res.Bytes != 1<<20 {
		t.Errorf("swept %q (%d bytes), want the last killed process's directory of 1 MiB", res.Removed, res.Bytes)
	}
	for _, d := range dead {
		for _, p := range []string{d, d + MarkerSuffix} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s of a killed process survived the sweep", p)
			}
		}
	}
	for _, p := range []string{live, live + MarkerSuffix, unmarked, garbled} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestMkdirTempAndRemoveAll: the directory is private, its marker names
// this process, and RemoveAll removes both; a bad prefix is refused.
func TestMkdirTempAndRemoveAll(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir, err := MkdirTemp("aml-test-")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		t.Fatalf("directory %s: %v %v", dir, info, err)
	}
	if b, err := os.ReadFile(dir + MarkerSuffix); err != nil || !strings.Contains(string(b), `"pid":`) {
		t.Fatalf("marker: %q %v", b, err)
	}
	if res, _ := Sweep(filepath.Dir(dir)); len(res.Removed) != 0 {
		t.Fatalf("the sweep removed a live process's directory: %q", res.Removed)
	}
	if err := RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, dir + MarkerSuffix} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s survived RemoveAll", p)
		}
	}
	for _, bad := range []string{"tmp-", "aml-a/b", "aml-*"} {
		if _, err := MkdirTemp(bad); err == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}
