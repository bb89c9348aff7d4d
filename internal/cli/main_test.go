package cli

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/aml-go/aml/internal/services/full"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

var update = flag.Bool("update", false, "rewrite testscript files with the actual output of cmp commands")

func TestMain(m *testing.M) {
	// The tests run the command as aml-full: with the services linked.
	// The built aml (amlBinary) runs aml-full in its place as users'
	// aml does.
	linked = full.Linked
	testscript.Main(cleanup{m}, map[string]func(){
		"aml": func() {
			os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
		"fake-acp-agent": func() { os.Exit(acptest.Serve()) },
	})
}

// cleanup runs the tests, then removes the aml binaries they built.
//
// Which tests are parallel: go test runs the parallel ones only once all
// the others have finished, so a test that ends or removes what other
// runs left anywhere on the machine (aml sandbox prune and its
// --kill-orphans, aml workspace prune --kill-orphans) is not parallel,
// and neither is one whose leftovers must survive until it looks at them.
// A parallel test keeps to its own directories, servers and processes.
type cleanup struct{ m *testing.M }

func (c cleanup) Run() int {
	// A race-instrumented aml process sleeps 1 s when it exits with
	// status 0 (the race runtime's default atexit_sleep_ms): keep a short
	// sleep for every one the tests start, unless the caller chose
	// GORACE. This process read GORACE when it started; only its
	// children see the change (the scripts' Setup keeps theirs).
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=10")
	}
	return c.m.Run()
}

// TestScript runs the CLI scripts in testdata/script. Each script runs in
// a fresh directory with testscript's minimal environment (no AML_ENV, no
// provider credentials); the aml command is this test binary re-executed
// as the CLI.
func TestScript(t *testing.T) {
	t.Parallel()
	testscript.Run(t, scriptParams("testdata/script"))
}

// scriptParams are the parameters of the CLI scripts in dir.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		UpdateScripts:       *update,
		Setup: func(env *testscript.Env) error {
			// Under -race every aml process would sleep 1 s at exit
			// (the race runtime's default atexit_sleep_ms); keep a
			// short sleep unless the caller chose GORACE.
			if os.Getenv("GORACE") == "" {
				env.Setenv("GORACE", "atexit_sleep_ms=10")
			}
			// Journaled runs make the journal key in the user's config
			// directory: keep it in the script's own directory.
			env.Setenv("AML_JOURNAL_KEY_FILE", filepath.Join(env.WorkDir, ".config", "aml", "journal.key"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitCode,
			"setrunid": cmdSetRunID,
		},
	}
}

// cmdExitCode implements "exitcode N program [args...]": it runs program
// like exec (so stdout and stderr can be checked afterwards) and fails
// unless it exits with status N. exec alone only distinguishes zero from
// non-zero, and the CLI's exit codes (1 workflow failure, 2 usage or load
// error) are part of its contract.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: bad status %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// runIDPattern finds the run id in aml's "run RUN is journaled" line.
var runIDPattern = regexp.MustCompile(`run ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) is journaled`)

// cmdSetRunID implements "setrunid": it sets $RUN to the run id that the
// last command's stderr announced.
func cmdSetRunID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: setrunid")
	}
	m := runIDPattern.FindStringSubmatch(ts.ReadFile("stderr"))
	if m == nil {
		ts.Fatalf("setrunid: the last stderr names no journaled run")
	}
	ts.Setenv("RUN", m[1])
}
