package testbin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildOnce: a second Build (after the in-process memo is cleared,
// as in another test process) returns the same file, unchanged; the
// binary runs; BuildTo places a working copy; other options build
// elsewhere.
func TestBuildOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a command")
	}
	const pkg = "github.com/aml-go/aml/internal/cmd/fake-acp-agent"
	bin := Build(t, pkg, Options{})
	before, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clear(built)
	mu.Unlock()
	if again := Build(t, pkg, Options{}); again != bin {
		t.Fatalf("the same build at %s, then %s", bin, again)
	}
	after, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the binary a test was given changed under it")
	}
	dst := filepath.Join(t.TempDir(), "agent")
	BuildTo(t, pkg, Options{}, dst)
	placed, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(placed, before) {
		t.Fatalf("BuildTo placed %d bytes (%v), want the %d of the build", len(placed), err, len(before))
	}
	if other := Build(t, pkg, Options{Static: true}); filepath.Dir(other) == filepath.Dir(bin) {
		t.Errorf("a static build shares the directory of a default one: %s", other)
	}
	// The fake agent speaks ACP on stdin and stdout: with stdin closed
	// it ends at once, without a crash.
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running %s: %v\n%s", bin, err, out)
		}
	}
}
