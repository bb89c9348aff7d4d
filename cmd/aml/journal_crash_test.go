//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/providers/workspace/filesystem"
)

// crashWorkflow has 29 effects: three parallel branches, each a component
// whose evaluate() loop alternates a script (which writes a file into the
// workspace and reads its branch's files back) and an agent given the
// script's output, then one script over every file, all in a filesystem
// workspace through a local sandbox. Each script logs its start and end
// in EFFECT_LOG, outside the workspace, and prints its step name first.
// The steps overwrite rather than append: a step in flight at a crash runs
// again, and in parallel() branches the checkpoint a sibling took may
// already hold its partial writes (see the README on durable runs).
const crashWorkflow = `store = filesystem_workspace(directory = env("STORE"))
log = env("EFFECT_LOG")
echo = deterministic_agent(respond = lambda req: "ok(" + req.prompt + ")", supports_sandbox = True)

def step(name, n):
    out = []
    for i in range(n):
        x = "%s%d" % (name, i)
        s = evaluate(script(
            "echo start %s >> %s; sleep 0.0%d; echo %s > %s-%d.txt; echo %s:$(cat %s-*.txt | wc -l); echo end %s >> %s" % (x, log, 1 + i % 3, x, name, i, x, name, x, log),
            shell = "sh"))
        out.append(evaluate(agent("%s saw %s" % (x, s.strip()), provider = echo)))
    return " ".join(out) + "\n"

branch = component(step)

def main():
    return workspace(
        sandbox(
            parallel(branch("a", 5), branch("b", 5), branch("c", 4)),
            script("echo start z >> " + log + "; echo z:$(ls | wc -l):$(cat *.txt | wc -l); echo end z >> " + log, shell = "sh"),
            provider = local_sandbox(), access = "read-write"),
        id = "crash", provider = store, save = True)
`

var runLine = regexp.MustCompile(`run ([0-9a-f-]{36}) is journaled`)

// TestJournalCrashResume is the crash-resume property: aml run --journal
// is SIGKILLed at random points (a real process, a real signal), and
// aml resume continues each killed run. Every resumed run prints what an
// uninterrupted run prints and leaves the same saved workspace, and no
// step runs live twice, except steps in flight at the kill: started by
// the killed run but not recorded in its journal.
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
		cmd.Env = append(os.Environ(), "STORE="+store, "EFFECT_LOG="+log, "AML_ENV=test")
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
	if n := strings.Count(want.stdout, "ok("); n != 14 || !strings.Contains(want.stdout, "z:14:14") || !strings.Contains(want.stdout, "ok(a4 saw a4:5)") {
		t.Fatalf("the uninterrupted run printed %q", want.stdout)
	}
	t.Logf("an uninterrupted run takes %s", full)

	rng := rand.New(rand.NewPCG(14, 1))
	var killed, beforeJournal, finished, inFlight int
	for trial := range trials {
		store := filepath.Join(dir, "store", strconv.Itoa(trial))
		log := filepath.Join(dir, "log"+strconv.Itoa(trial))
		jdir := filepath.Join(dir, "j"+strconv.Itoa(trial))
		cmd, _, stderr := run(store, log, "run", "--quiet", "--journal", jdir, wf)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(full))))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		werr := cmd.Wait()
		m := runLine.FindStringSubmatch(stderr.String())
		if m == nil {
			beforeJournal++
			continue
		}
		id := m[1]
		if werr == nil || runState(t, jdir, id) == journal.Succeeded {
			// Finished (the kill may land after the end was recorded).
			finished++
			// A finished run is refused.
			cmd, _, stderr := run(store, log, "resume", id, "--journal", jdir)
			if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "already finished") {
				t.Fatalf("trial %d: resuming a finished run: %v\n%s", trial, err, stderr)
			}
			continue
		}
		killed++
		recorded := recordedSteps(t, jdir, id)
		// The steps a killed aml started may still run for a moment, and
		// the workspace is not taken over while a dead owner's processes
		// run: resume again once they are gone (the refused attempt runs
		// nothing).
		var stdout *bytes.Buffer
		for attempt := 0; ; attempt++ {
			var (
				cmd  *exec.Cmd
				rerr *bytes.Buffer
			)
			// What the log gets from here on is the resume's (a refused
			// attempt runs nothing; the killed run's steps started before).
			appendLine(t, log, resumeMark)
			cmd, stdout, rerr = run(store, log, "resume", id, "--journal", jdir, "--quiet")
			err := cmd.Run()
			if err == nil {
				break
			}
			if !strings.Contains(rerr.String(), "processes it started are still running") || attempt == 200 {
				t.Fatalf("trial %d: resume: %v\n%s", trial, err, rerr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		killedLog, resumedLog := readLogs(t, log)
		if stdout.String() != want.stdout {
			t.Fatalf("trial %d: the resumed run printed\n%s\nwant\n%s", trial, stdout, want.stdout)
		}
		if got := saved(store); !equalFiles(got, want.files) {
			t.Fatalf("trial %d: the resumed run saved\n%v\nwant\n%v", trial, got, want.files)
		}
		for step, n := range resumedLog {
			if n > 1 {
				t.Fatalf("trial %d: step %s ran %d times in the resumed run", trial, step, n)
			}
			if recorded[step] {
				t.Fatalf("trial %d: step %s was recorded before the kill and ran live again", trial, step)
			}
			if killedLog[step] > 0 {
				inFlight++ // started by the killed run, not recorded: it runs again
			}
		}
		for step, n := range killedLog {
			if n > 1 {
				t.Fatalf("trial %d: step %s ran %d times in the killed run", trial, step, n)
			}
		}
		for step := range recorded {
			if killedLog[step] == 0 {
				t.Fatalf("trial %d: step %s is recorded but the killed run never started it", trial, step)
			}
		}
		if len(killedLog)+len(resumedLog)-countBoth(killedLog, resumedLog) != 15 {
			t.Fatalf("trial %d: %d steps ran in all, want 15 (killed %v, resumed %v)", trial, len(killedLog)+len(resumedLog)-countBoth(killedLog, resumedLog), killedLog, resumedLog)
		}
	}
	t.Logf("%d trials: %d killed and resumed, %d killed before the journal existed, %d finished before the kill; %d steps were in flight at a kill and ran again", trials, killed, beforeJournal, finished, inFlight)
	if killed < trials/2 {
		t.Fatalf("only %d of %d kills landed inside a run", killed, trials)
	}
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

// recordedSteps returns the steps whose script results the journal of
// run id holds.
func recordedSteps(t *testing.T, jdir, id string) map[string]bool {
	t.Helper()
	effects, err := journal.ReadEffects(jdir, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range effects {
		if e.Kind != "script" {
			continue
		}
		var r struct{ Stdout string }
		if err := json.Unmarshal(e.Result, &r); err != nil {
			t.Fatal(err)
		}
		step, _, _ := strings.Cut(strings.TrimSpace(r.Stdout), ":")
		out[step] = true
	}
	return out
}

// resumeMark separates a trial's killed run from its resume in the log.
const resumeMark = "== resume"

// readLogs counts the "start STEP" lines of an effect log before and
// after its last resumeMark.
func readLogs(t *testing.T, path string) (killed, resumed map[string]int) {
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
	return countStarts(text[:i]), countStarts(text[i:])
}

func countStarts(text string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if step, ok := strings.CutPrefix(line, "start "); ok {
			out[step]++
		}
	}
	return out
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
