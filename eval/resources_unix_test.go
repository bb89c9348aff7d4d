//go:build unix

package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// TestScriptCancellationKillsTheProcessTree checks cancelling a run kills
// the script's whole process group, children included. The cancellation
// comes once the script recorded its whole tree (polled within a generous
// bound), never after a fixed delay.
func TestScriptCancellationKillsTheProcessTree(t *testing.T) {
	const hangBound = time.Minute
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	rt, _ := eval.New(eval.Options{Cwd: dir, Host: host(t)})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	formed := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(hangBound)
		for {
			if data, _ := os.ReadFile(pids); strings.Count(string(data), "\n") >= 3 {
				formed <- true
				break
			}
			if time.Now().After(deadline) {
				formed <- false
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel(errors.New("stop"))
	}()
	_, err := rt.Evaluate(ctx, &eval.Script{Shell: "sh", Children: []any{"echo $$ > pids; sleep 300 & echo $! >> pids; sleep 300 & echo $! >> pids; wait"}})
	if !<-formed {
		t.Fatalf("the script never recorded its process tree (Evaluate: %v)", err)
	}
	if err == nil {
		t.Fatal("a cancelled script must fail")
	}
	data, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		deadline := time.Now().Add(hangBound)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			// A zombie still answers kill(0); check /proc for its state.
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(st), ") Z ") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := syscall.Kill(pid, 0); err == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
				t.Errorf("process %d of the script's tree is still alive", pid)
			}
		}
	}
}
