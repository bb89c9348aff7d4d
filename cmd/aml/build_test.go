package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// built are the aml binaries this test process built, by whether they
// have the race detector: every test that runs the real binary shares
// one build of each kind (a link of the command takes seconds).
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[bool]string
}

// binParent is where the binaries go: the temporary directory the test
// process started with, whatever TMPDIR a test sets for itself later.
var binParent = os.TempDir()

// buildAML builds this command (once per test process), with -race when
// the test binary itself was built with it.
func buildAML(t *testing.T) string {
	t.Helper()
	return buildAMLRace(t, raceEnabled())
}

// buildAMLRace builds this command (once per test process and kind),
// with -race when race is set. Tests must not change the binary or its
// directory.
func buildAMLRace(t *testing.T, race bool) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if bin, ok := built.bins[race]; ok {
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("these tests need the go tool to build the aml binary: %v", err)
	}
	if built.dir == "" {
		if built.dir, err = os.MkdirTemp(binParent, "amltest-bin-"); err != nil {
			t.Fatal(err)
		}
		built.bins = map[bool]string{}
	}
	bin := filepath.Join(built.dir, "aml")
	args := []string{"build", "-o", bin}
	if race {
		bin += "-race"
		args = []string{"build", "-race", "-o", bin}
	}
	args = append(args, ".")
	t.Logf("go %s", strings.Join(args, " "))
	cmd := exec.Command(goTool, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	built.bins[race] = bin
	return bin
}

// removeBuilt removes what buildAMLRace built; TestMain calls it after
// the tests.
func removeBuilt() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}
