//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/testbin"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/providers/workspace/filesystem"
)

// crashWorkflow has 31 effects, all of them reaching outside the
// process: three parallel branches, each a component whose evaluate()
// loop alternates a host script (which writes a file into the workspace
// and reads its branch's files back) and a session of the fake ACP
// agent given the script's output, then one script over every file, all
// in a filesystem workspace through a local sandbox. Branches a and b
// are fast; c pauses in each script, so the fast branches finish while
// it runs. Each script, and each agent's wrapper, logs its start and its
// end (with the time in nanoseconds: only ends are timed) in EFFECT_LOG,
// outside the workspace. A script counts the lines of its branch's files
// with the shell's read (as wc -l would, without a process per count:
// the trials' processes are most of the test's time).
// The steps overwrite rather than append: a step in flight at a crash
// runs again, and in parallel() branches the checkpoint a sibling took
// may already hold its partial writes (see docs/durable-runs.md).
const crashWorkflow = `store = filesystem_workspace(directory = env("STORE"))
log = env("EFFECT_LOG")
fake = env("FAKE_AGENT")

def step(name, n, pause):
    out = []
    for i in range(n):
        x = "%s%d" % (name, i)
        s = evaluate(script(
            "echo start %s >> %s; sleep %s; echo %s > %s-%d.txt; n=0; for f in %s-*.txt; do while read l; do n=$((n+1)); done < $f; done; echo %s:$n; echo end %s $(date +%%s%%N) >> %s" % (x, log, pause, x, name, i, name, x, x, log),
            shell = "sh"))
        a = acp_agent(command = fake, env = {"STEP": "agent-" + x, "EFFECT_LOG": log}, name = "fake")
        out.append(evaluate(agent("%s saw %s\necho" % (x, s.strip()), provider = a)).strip())
    return " ".join(out) + "\n"

branch = component(step)

def main():
    return workspace(
        sandbox(
            parallel(branch("a", 6, "0.01"), branch("b", 6, "0.02"), branch("c", 2, "0.6")),
            script("echo start z >> " + log + "; echo z:$(ls | wc -l):$(cat *.txt | wc -l); echo end z $(date +%s%N) >> " + log, shell = "sh"),
            provider = local_sandbox(), access = "read-write"),
        id = "crash", provider = store, save = True)
`

// crashAgent wraps the fake ACP agent: it logs the session's start and
// end, named by its STEP, the end with the time in nanoseconds.
const crashAgent = `#!/bin/sh
echo "start $STEP" >> "$EFFECT_LOG"
"$FAKE" "$@"
rc=$?
echo "end $STEP $(date +%s%N)" >> "$EFFECT_LOG"
exit $rc
`

var runLine = regexp.MustCompile(`run ([0-9a-f-]{36}) is journaled`)

// lateMargin is how long after the commit window a completed effect's
// record may still become durable in the crash test: the time from the
// step's own end to its record (the process's exit, a workspace
// checkpoint) and the fsync, on a loaded machine.
const lateMargin = 250 * time.Millisecond

// TestJournalCrashResume is the crash-resume property: aml run --journal
// is SIGKILLed at random points (a real process, a real signal), and
// aml resume continues each killed run. Every resumed run prints what an
// uninterrupted run prints and leaves the same saved workspace; no
// recorded step runs live again; and a step (script or agent session)
// that had finished more than the commit window (plus lateMargin)
// before the kill never runs again: only steps in flight at the kill, or
// finished just before it, do.
func TestJournalCrashResume(t *testing.T) {
	trials := 100
	if testing.Short() {
		trials = 10
	}
	// Without -race even under go test -race: the property is about
	// crashes, and a hundred kills of a race-instrumented binary take
	// minutes (the evaluator's journaling is race-tested in process).
	bin := buildAMLRace(t, false)
	// The journal key, out of the user's config directory.
	t.Setenv("AML_JOURNAL_KEY_FILE", filepath.Join(t.TempDir(), "journal.key"))
	dir := t.TempDir()
	fake := testbin.Build(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", testbin.Options{})
	wrapper := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(wrapper, []byte(strings.Replace(crashAgent, `"$FAKE"`, fake, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "crash.star")
	if err := os.WriteFile(wf, []byte(crashWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		stdout string
		files  map[string]string
	}
	// run runs aml with args in dir with its own store and effect log.
	run := func(store, log string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "STORE="+store, "EFFECT_LOG="+log, "FAKE_AGENT="+wrapper, "AML_ENV=test")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd, &stdout, &stderr
	}
	saved := func(store string) map[string]string {
		t.Helper()
		p, err := filesystem.New(filesystem.Options{Directory: store})
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "crash", Load: &eval.WorkspaceLoad{Revision: "current"}})
		if err != nil {
			t.Fatalf("the saved workspace does not load: %v", err)
		}
		defer l.Release(context.Background())
		files := map[string]string{}
		entries, _ := os.ReadDir(l.Directory())
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(l.Directory(), e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = sortedLines(string(b))
		}
		return files
	}

	// The uninterrupted run: its output and saved files are the reference
	// (lines of files written by parallel branches are compared sorted).
	store0, log0 := filepath.Join(dir, "store-ref"), filepath.Join(dir, "log-ref")
	// The kills land in the time an uninterrupted run takes: the median
	// of three (the first run of a binary is slower).
	var want result
	var times []time.Duration
	for i := range 3 {
		store, log := store0+strconv.Itoa(i), log0+strconv.Itoa(i)
		cmd, stdout, stderr := run(store, log, "run", "--quiet", "--journal", filepath.Join(dir, "j-ref"), wf)
		started := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("the uninterrupted run: %v\n%s", err, stderr)
		}
		times = append(times, time.Since(started))
		want = result{stdout: stdout.String(), files: saved(store)}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	full := times[1]
	const steps = 2*(6+6+2) + 1
	if n := strings.Count(want.stdout, " saw "); n != 14 || !strings.Contains(want.stdout, "z:14:14") || !strings.Contains(want.stdout, "a5 saw a5:6") {
		t.Fatalf("the uninterrupted run printed %q", want.stdout)
	}
	t.Logf("an uninterrupted run takes %s", full)

	rng := rand.New(rand.NewPCG(14, 1))
	var killed, beforeJournal, finished, inFlight, late int
	var latest time.Duration // the longest a re-run step had been finished at the kill
	// The trials run concurrently, each a subtest with its own store, log
	// and journal: one more at a time than go test's -parallel (three
	// under its default on two cores), since a trial spends much of its
	// time waiting (on branch c's pauses, on its kill) rather than
	// computing. They are not t.Parallel subtests, which -parallel alone
	// would bound.
	var mu sync.Mutex
	t.Run("trials", func(t *testing.T) {
		trialRuns := newConcurrentRuns(t, testParallel()+1)
		for trial := range trials {
			wait := time.Duration(rng.Int64N(int64(full)))
			trialRuns.run(strconv.Itoa(trial), func(t *testing.T) {
				store := filepath.Join(dir, "store", strconv.Itoa(trial))
				log := filepath.Join(dir, "log"+strconv.Itoa(trial))
				jdir := filepath.Join(dir, "j"+strconv.Itoa(trial))
				cmd, _, stderr := run(store, log, "run", "--quiet", "--journal", jdir, wf)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(wait) // the stimulus: a random point of the run to kill it at
				killedAt := time.Now()
				_ = cmd.Process.Signal(syscall.SIGKILL)
				werr := cmd.Wait()
				m := runLine.FindStringSubmatch(stderr.String())
				if m == nil {
					mu.Lock()
					beforeJournal++
					mu.Unlock()
					return
				}
				id := m[1]
				if werr == nil || runState(t, jdir, id) == journal.Succeeded {
					// Finished (the kill may land after the end was recorded).
					mu.Lock()
					finished++
					mu.Unlock()
					// A finished run is refused.
					cmd, _, stderr := run(store, log, "resume", id, "--journal", jdir)
					if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "already finished") {
						t.Fatalf("trial %d: resuming a finished run: %v\n%s", trial, err, stderr)
					}
					return
				}
				mu.Lock()
				killed++
				mu.Unlock()
				recorded := recordedSteps(t, jdir, id)
				// What the log gets from here on is the resume's; the resume ends
				// what the killed run left running before anything runs.
				appendLine(t, log, resumeMark)
				cmd, stdout, rerr := run(store, log, "resume", id, "--journal", jdir, "--quiet")
				if err := cmd.Run(); err != nil {
					t.Fatalf("trial %d: resume: %v\n%s", trial, err, rerr)
				}
				killedLog, resumedLog := readLogs(t, log)
				if stdout.String() != want.stdout {
					t.Fatalf("trial %d: the resumed run printed\n%s\nwant\n%s", trial, stdout, want.stdout)
				}
				if got := saved(store); !equalFiles(got, want.files) {
					t.Fatalf("trial %d: the resumed run saved\n%v\nwant\n%v", trial, got, want.files)
				}
				for step, n := range resumedLog.starts {
					if n > 1 {
						t.Fatalf("trial %d: step %s ran %d times in the resumed run", trial, step, n)
					}
					if recorded[step] {
						t.Fatalf("trial %d: step %s was recorded before the kill and ran live again", trial, step)
					}
					if killedLog.starts[step] == 0 {
						continue
					}
					mu.Lock()
					inFlight++ // started by the killed run, not recorded: it runs again
					mu.Unlock()
					if end, ok := killedLog.ends[step]; ok && end.Before(killedAt) {
						ago := killedAt.Sub(end)
						mu.Lock()
						latest = max(latest, ago)
						mu.Unlock()
						if ago > eval.DefaultCommitWindow+lateMargin {
							mu.Lock()
							late++
							mu.Unlock()
							t.Errorf("trial %d: step %s had finished %s before the kill, yet ran again: a finished step's record must be durable within the commit window (%s)", trial, step, ago, eval.DefaultCommitWindow)
						}
					}
				}
				for step, n := range killedLog.starts {
					if n > 1 {
						t.Fatalf("trial %d: step %s ran %d times in the killed run", trial, step, n)
					}
				}
				for step := range recorded {
					if killedLog.starts[step] == 0 {
						t.Fatalf("trial %d: step %s is recorded but the killed run never started it", trial, step)
					}
				}
				if n := len(killedLog.starts) + len(resumedLog.starts) - countBoth(killedLog.starts, resumedLog.starts); n != steps {
					t.Fatalf("trial %d: %d steps ran in all, want %d (killed %v, resumed %v)", trial, n, steps, killedLog.starts, resumedLog.starts)
				}
			})
		}
		trialRuns.wait()
	})
	t.Logf("%d trials: %d killed and resumed, %d killed before the journal existed, %d finished before the kill; %d steps were in flight at a kill (or finished within the window) and ran again, the longest finished %s before the kill; %d finished earlier and ran again (must be 0)", trials, killed, beforeJournal, finished, inFlight, latest, late)
	if killed < trials/2 {
		t.Fatalf("only %d of %d kills landed inside a run", killed, trials)
	}
}

// concurrentRuns runs subtests of t from goroutines of their own, at most
// limit at a time (t.Run may be called from several goroutines at once);
// wait waits for them all, and must return before t's function does.
type concurrentRuns struct {
	t   *testing.T
	sem chan struct{}
	wg  sync.WaitGroup
}

func newConcurrentRuns(t *testing.T, limit int) *concurrentRuns {
	return &concurrentRuns{t: t, sem: make(chan struct{}, limit)}
}

// run starts subtest name once fewer than limit run.
func (c *concurrentRuns) run(name string, f func(t *testing.T)) {
	c.sem <- struct{}{}
	c.wg.Add(1)
	go func() {
		defer func() { <-c.sem; c.wg.Done() }()
		c.t.Run(name, f)
	}()
}

func (c *concurrentRuns) wait() { c.wg.Wait() }

// testParallel is go test's -parallel: how many parallel tests run at
// once (GOMAXPROCS unless it was set).
func testParallel() int {
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return runtime.GOMAXPROCS(0)
}

// runState returns the state the journal recorded last for run id.
func runState(t *testing.T, jdir, id string) journal.State {
	t.Helper()
	runs, err := journal.List(jdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == id {
			return r.State
		}
	}
	t.Fatalf("no run %s in %s", id, jdir)
	return ""
}

// recordedSteps returns the steps whose results the journal of run id
// holds: scripts by the step name their output starts with, agent
// sessions as agent-STEP by the prompt they echo.
func recordedSteps(t *testing.T, jdir, id string) map[string]bool {
	t.Helper()
	effects, err := journal.ReadEffects(jdir, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range effects {
		switch e.Kind {
		case "script":
			var r struct{ Stdout string }
			if err := json.Unmarshal(e.Result, &r); err != nil {
				t.Fatal(err)
			}
			step, _, _ := strings.Cut(strings.TrimSpace(r.Stdout), ":")
			out[step] = true
		case "agent":
			var r struct{ Text string }
			if err := json.Unmarshal(e.Result, &r); err != nil {
				t.Fatal(err)
			}
			step, _, _ := strings.Cut(strings.TrimSpace(r.Text), " ")
			out["agent-"+step] = true
		}
	}
	return out
}

// resumeMark separates a trial's killed run from its resume in the log.
const resumeMark = "== resume"

// stepLog is what an effect log says of one run: how many times each
// step started, and when each ended.
type stepLog struct {
	starts map[string]int
	ends   map[string]time.Time
}

// readLogs reads an effect log before and after its last resumeMark.
func readLogs(t *testing.T, path string) (killed, resumed stepLog) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.LastIndex(text, resumeMark+"\n")
	if i < 0 {
		t.Fatalf("%s has no resume mark", path)
	}
	return parseSteps(text[:i]), parseSteps(text[i:])
}

// parseSteps reads "start STEP NS" and "end STEP NS" lines.
func parseSteps(text string) stepLog {
	l := stepLog{starts: map[string]int{}, ends: map[string]time.Time{}}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "start":
			l.starts[f[1]]++
		case "end":
			if len(f) == 3 {
				if ns, err := strconv.ParseInt(f[2], 10, 64); err == nil {
					l.ends[f[1]] = time.Unix(0, ns)
				}
			}
		}
	}
	return l
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func countBoth(a, b map[string]int) int {
	n := 0
	for k := range a {
		if b[k] > 0 {
			n++
		}
	}
	return n
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func equalFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// leftoverWorkflow's script starts a writer that leaves its process
// group (setsid) and so outlives a SIGKILLed aml, then waits. Run again
// (the file "started" exists), it reports whether the first writer is
// still alive (a zombie no init reaped is gone), and ends at once.
const leftoverWorkflow = `def _main():
    return evaluate(script("""
if [ -f started ]; then
    state=$(awk '{print $3}' "/proc/$(cat writer.pid)/stat" 2>/dev/null)
    if [ -n "$state" ] && [ "$state" != Z ]; then echo "the old writer still runs"; else echo "the old writer is gone"; fi
    exit 0
fi
setsid sh -c 'echo $$ > writer.pid; while true; do echo old >> writer.log; sleep 0.05; done' &
while [ ! -s writer.pid ]; do sleep 0.01; done
touch started
sleep 60
""", shell = "sh"))

main = component(_main)
`

// killJournaledRun writes workflow to name in a fresh directory, starts
// aml run --journal j on it, SIGKILLs aml once the file marker exists in
// that directory (what says is what the run did by then, for the error
// when it never appears), and returns the directory and the run's id.
func killJournaledRun(t *testing.T, bin, name, workflow, marker, says string) (dir, runID string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(workflow), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--journal", "j", name)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s never happened:\n%s", says, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	m := runLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no run id in:\n%s", stderr.String())
	}
	return dir, m[1]
}

// TestResumeEndsWhatTheKilledRunLeft kills aml while its script's
// setsid writer runs, and resumes: the resume ends the writer before
// the script runs again, and says so.
func TestResumeEndsWhatTheKilledRunLeft(t *testing.T) {
	bin := buildAMLRace(t, false)
	dir, runID := killJournaledRun(t, bin, "leftover.star", leftoverWorkflow, "started", "the script's writer")
	pidText, err := os.ReadFile(filepath.Join(dir, "writer.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(st), ") Z ") {
		t.Fatalf("the writer %d did not outlive the killed aml, so the test proves nothing: %v %s", pid, err, st)
	}
	resume := exec.Command(bin, "resume", runID, "--journal", "j")
	resume.Dir = dir
	var out, rerr bytes.Buffer
	resume.Stdout, resume.Stderr = &out, &rerr
	if err := resume.Run(); err != nil {
		t.Fatalf("resume: %v\n%s", err, rerr.String())
	}
	if got := strings.TrimSpace(out.String()); got != "the old writer is gone" {
		t.Fatalf("the re-run script said %q, want the old writer gone before it ran\n%s", got, rerr.String())
	}
	// The writer, its sleep, and what else the script's process group
	// left: at least one.
	if !regexp.MustCompile(`ended [1-9][0-9]* process\(es\) that the interrupted run of ` + runID + ` left running`).MatchString(rerr.String()) {
		t.Fatalf("the resume did not say what it ended:\n%s", rerr.String())
	}
}

// spendWorkflow spends 150 tokens per session; after the third it runs
// a script that waits (the first time) so that the test can kill aml
// there.
const spendWorkflow = `configure(
    agent_provider = deterministic_agent(usage = {"input_tokens": 100, "output_tokens": 50}),
    budget = {"tokens": 600},
)

def _main():
    out = []
    for i in range(6):
        out.append(evaluate(agent("step %d" % i)))
        if i == 2:
            evaluate(script("if [ -f reached ]; then exit 0; fi; touch reached; sleep 60", shell = "sh"))
    return out

main = component(_main)
`

// TestKilledRunKeepsItsSpend SIGKILLs aml mid-run, after three sessions
// spent 450 of its 600 tokens, and resumes it: the resume counts what the
// killed run spent, so the budget stops it before the fifth session (a
// resume that started from zero would finish all six).
func TestKilledRunKeepsItsSpend(t *testing.T) {
	bin := buildAMLRace(t, false)
	dir, runID := killJournaledRun(t, bin, "spend.star", spendWorkflow, "reached", "the run's script")
	resume := func(args ...string) (string, int) {
		c := exec.Command(bin, append([]string{"resume", runID, "--journal", "j"}, args...)...)
		c.Dir = dir
		out, _ := c.CombinedOutput()
		return string(out), c.ProcessState.ExitCode()
	}
	out, code := resume()
	if code != exitLimit || !strings.Contains(out, "the run's tokens budget is used up (600 of 600 spent)") ||
		!regexp.MustCompile(`finished run \S+ \(error\) in \S+, 600 tokens`).MatchString(out) {
		t.Fatalf("resume exited %d:\n%s", code, out)
	}
}
