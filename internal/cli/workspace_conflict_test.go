//go:build unix

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentRunsOnALockedWorkspace starts two aml run processes on the
// same locked workspace: exactly one fails with a workspace conflict and
// the other's result is intact.
func TestConcurrentRunsOnALockedWorkspace(t *testing.T) {
	bin := buildAML(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	wf := filepath.Join(dir, "wf.star")
	src := `configure(workspace_provider = filesystem_workspace(directory = "` + store + `"), sandbox_provider = local_sandbox())

def main():
    return workspace(
        sandbox(script("sleep 1; echo done > result.txt; cat result.txt", shell = "sh"), access = "read-write"),
        id = "shared",
        save = True,
    )
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		code           int
		stdout, stderr string
	}
	results := make([]outcome, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "run", "--quiet", wf)
			cmd.Dir = dir
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
			}
			results[i] = outcome{code, out.String(), errb.String()}
		}()
	}
	wg.Wait()
	var ok, conflicts int
	for _, r := range results {
		switch {
		case r.code == 0 && r.stdout == "done\n":
			ok++
		case r.code == 1 && strings.Contains(r.stderr, "AML_WORKSPACE_CONFLICT"):
			conflicts++
		default:
			t.Errorf("unexpected outcome: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	}
	if ok != 1 || conflicts != 1 {
		t.Fatalf("%d successes and %d conflicts, want exactly one of each", ok, conflicts)
	}
}
