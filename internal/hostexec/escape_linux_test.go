//go:build linux

package hostexec_test

import (
	"context"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// TestSetsidDescendantIsKilled: a grandchild that leaves the command's
// process group with setsid is still killed when the command ends: it
// carries the command's mark.
func TestSetsidDescendantIsKilled(t *testing.T) {
	if _, err := osexec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid (util-linux)")
	}
	ws := t.TempDir()
	h := open(t, options(ws, eval.ReadWrite, ".", "."))
	defer h.Release(context.Background())
	res, err := h.Runtime().Exec(context.Background(), "sh", []string{"-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("pid %q: %v", res.Stdout, err)
	}
	deadline := time.Now().Add(time.Minute)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = osexec.Command("kill", "-9", strconv.Itoa(pid)).Run()
			t.Fatalf("the setsid grandchild %d outlived its command", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
