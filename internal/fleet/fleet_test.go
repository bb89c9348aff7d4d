// Package fleet_test is the distributed tier's end-to-end test: real aml
// worker processes and aml run --temporal against a real Temporal server.
// It is a package of its own so that its minutes count apart from the
// CLI's other tests.
package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/internal/testbin"
	"github.com/aml-go/aml/temporal"
)

// fleetWorkflow: 40 sessions of a real ACP agent process (the fake agent)
// in parallel(); each logs its start and end, takes 400 ms, says its id
// and the worker that ran it (the WORKER variable of the worker's own
// environment, which the worker's load of the bundle reads) and reports
// 12 tokens spent, under a run budget.
const fleetWorkflow = `fake = acp_agent(
    command = env("FAKE_AGENT", "fake-acp-agent"),
    env = {"WORKER": env("WORKER", "none"), "LOG": env("SESSION_LOG", "/dev/null")},
    name = "fake",
)
configure(max_concurrent_agents = 16, max_agent_calls = 100, budget = {"tokens": 100000})

def _lookup(input):
    return "order %d is %s" % (input["id"], "even" if input["id"] % 2 == 0 else "odd")

lookup = define_tool(name = "lookup", description = "Reads an order.", input = schema.object(id = schema.integer()), execute = _lookup)

def main():
    return parallel([
        agent("append $LOG start s%d\nsleep 400\ncall lookup {\"id\": %d}\nsay s%d@\nenv WORKER\nsay ;\nusage\nappend $LOG end s%d" % (i, i, i, i), tool(lookup), provider = fake)
        for i in range(40)
    ])
`

var sessionText = regexp.MustCompile(`s(\d+)@([a-z]+);`)

// TestTemporalFleet: aml run --temporal spreads one run's sessions over
// two aml worker processes and prints what they said; with one worker
// SIGKILLed mid-run, the run still ends with every session's text, and
// no session that had finished runs again.
func TestTemporalFleet(t *testing.T) {
	srv, bin, dir, fake := setUp(t)
	blobs := filepath.Join(dir, "blobs")
	wf := filepath.Join(dir, "fleet.star")
	if err := os.WriteFile(wf, []byte(fleetWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "sessions.log")
	workers := startWorkers(t, bin, srv.Address, []string{"--max-concurrent-agents", "10"}, func(name string) []string {
		return []string{"WORKER=" + name, "FAKE_AGENT=" + fake, "SESSION_LOG=" + logFile}
	})

	check := func(text string) map[string]int {
		t.Helper()
		perWorker := map[string]int{}
		seen := map[int]bool{}
		for _, m := range sessionText.FindAllStringSubmatch(text, -1) {
			i, _ := strconv.Atoi(m[1])
			if seen[i] {
				t.Fatalf("session s%d said twice in %q", i, text)
			}
			seen[i] = true
			perWorker[m[2]]++
		}
		if len(seen) != 40 {
			t.Fatalf("%d of 40 sessions in the result %q", len(seen), text)
		}
		// Each session called the Starlark tool on its worker.
		if n := strings.Count(text, "result: order "); n != 40 || !strings.Contains(text, "result: order 7 is odd") {
			t.Fatalf("%d tool results in %q, want 40", n, text)
		}
		return perWorker
	}

	// An uninterrupted run, followed by aml run itself.
	traceFile := filepath.Join(dir, "trace.jsonl")
	cmd := exec.Command(bin, "run", "--quiet", "--temporal", srv.Address, "--trace-file", traceFile, wf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("aml run --temporal: %v\n%s", err, stderr.String())
	}
	per := check(stdout.String())
	if per["a"] == 0 || per["b"] == 0 {
		t.Fatalf("sessions per worker %v: want both workers to run some", per)
	}
	t.Logf("40 sessions of 400 ms in %s, per worker %v", time.Since(started).Round(time.Millisecond), per)
	// The run's trace reached the submitter (workflow code's events,
	// through the trace query): every agent's span, started and ended.
	trace, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	var agentStarts, agentEnds, seq int
	for line := range strings.Lines(string(trace)) {
		var ev struct {
			Type     string `json:"type"`
			Kind     string `json:"kind"`
			Status   string `json:"status"`
			Sequence int    `json:"sequence"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		if ev.Sequence <= seq && seq > 0 {
			t.Fatalf("trace sequence %d after %d", ev.Sequence, seq)
		}
		seq = ev.Sequence
		if ev.Kind == "agent" && ev.Type == "span.start" {
			agentStarts++
		}
		if ev.Kind == "agent" && ev.Type == "span.end" && ev.Status == "ok" {
			agentEnds++
		}
	}
	if agentStarts < 40 || agentEnds != agentStarts {
		t.Fatalf("the trace file has %d agent span starts and %d ok ends, want 40 or more of each", agentStarts, agentEnds)
	}

	// A detached run, and worker a killed once sessions are in flight.
	if err := os.Remove(logFile); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "--detach", "--temporal", srv.Address, wf).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	runID := strings.TrimSpace(string(out))
	if !strings.HasPrefix(runID, "aml-") || strings.ContainsAny(runID, " \n") {
		t.Fatalf("--detach printed %q, want the run id alone", out)
	}
	deadline := time.Now().Add(time.Minute)
	for countLines(t, logFile, "start ") < 24 {
		if time.Now().After(deadline) {
			t.Fatal("sessions did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The worker to kill is the one driving the run: the one that took
	// its latest workflow task (both run sessions too).
	c := srv.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	driver := ""
	iter := c.GetWorkflowHistory(ctx, runID, "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			driver = a.Identity
		}
	}
	victim := ""
	for name, w := range workers {
		if strings.HasSuffix(driver, fmt.Sprintf(":%d", w.Process.Pid)) {
			victim = name
		}
	}
	if victim == "" {
		t.Fatalf("no worker is %q", driver)
	}
	atKill := countLines(t, logFile, "start ")
	killed := time.Now()
	_ = workers[victim].Process.Signal(syscall.SIGKILL)
	var res temporal.RunResult
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &res); err != nil {
		t.Fatalf("the run after a worker was killed: %v", err)
	}
	per = check(res.Text)
	killedText := res.Text
	// What the run spent survived the death of the worker that drove it:
	// each session counted once, the ones that ran again included.
	if res.Usage == nil || res.Usage.Tokens() != 40*12 || res.Usage.ModelCalls != 40 {
		t.Fatalf("the run after the kill counted %+v, want 480 tokens in 40 model calls", res.Usage)
	}

	// No session that had ended well before the kill started again; the
	// ones in flight on the killed worker ran again once at most.
	starts, ends := sessionTimes(t, logFile)
	again := 0
	for id, ts := range starts {
		if len(ts) > 2 {
			t.Fatalf("session %s started %d times", id, len(ts))
		}
		if len(ts) == 2 {
			again++
			if e := ends[id]; len(e) > 0 && e[0].Before(killed.Add(-500*time.Millisecond)) {
				t.Fatalf("session %s ended at %s, before the kill at %s, and ran again", id, e[0], killed)
			}
		}
	}
	t.Logf("worker %s, which drove the run, killed when %d sessions had started; the run ended %s after the kill, per worker %v; %d sessions ran again", victim, atKill, time.Since(killed).Round(time.Millisecond), per, again)

	// The server restarted mid-run: the run goes on once it is back.
	os.Remove(logFile)
	out, err = exec.Command(bin, "run", "--detach", "--temporal", srv.Address, wf).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	restartID := strings.TrimSpace(string(out))
	for countLines(t, logFile, "start ") < 8 {
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatal("sessions did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	restarted := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	c = srv.Dial(t)
	if err := c.GetWorkflow(ctx, restartID, "").Get(ctx, &res); err != nil {
		t.Fatalf("the run across a server restart: %v", err)
	}
	check(res.Text)
	// Sessions in flight on live workers are not run again.
	starts, _ = sessionTimes(t, logFile)
	for id, ts := range starts {
		if len(ts) != 1 {
			t.Fatalf("across the server restart, session %s started %d times", id, len(ts))
		}
	}
	t.Logf("the server restarted mid-run; the run ended %s later, each session run once", time.Since(restarted).Round(time.Millisecond))

	// A prompt and a result of 3 MB, above Temporal's 2 MB per payload,
	// travel through the blob store.
	big := filepath.Join(dir, "big.star")
	bigSrc := "fake = acp_agent(command = env(\"FAKE_AGENT\", \"fake-acp-agent\"), name = \"fake\")\n\ndef main():\n    return agent(\"say start\\n\" + (\"y\" * 1000 + \"\\n\") * 3000 + \"say end\", provider = fake)\n"
	if err := os.WriteFile(big, []byte(bigSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "run", "--quiet", "--temporal", srv.Address, big).Output()
	if err != nil {
		t.Fatalf("aml run --temporal of a 3 MB prompt: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "start"+strings.Repeat("y", 3000000)+"end" {
		t.Fatalf("the 3 MB result came back as %d bytes starting %.40q", len(got), got)
	}
	if entries, _ := os.ReadDir(filepath.Join(blobs, temporal.BlobNamespace, "blobs")); len(entries) < 2 {
		t.Fatalf("%d blobs stored for a 3 MB prompt and result", len(entries))
	}

	// A run that fails: aml run --temporal reports it as aml run does,
	// exit 1 and the error with its position (naming the file as it was
	// given), or the --json envelope.
	fail := filepath.Join(dir, "fail.star")
	failSrc := "fake = acp_agent(command = env(\"FAKE_AGENT\", \"fake-acp-agent\"), name = \"fake\")\n\ndef main():\n    return parallel(agent(\"say fine\", provider = fake), agent(\"exit 3\", provider = fake))\n"
	if err := os.WriteFile(fail, []byte(failSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(bin, "run", "--quiet", "--temporal", srv.Address, fail)
	var failOut, failErr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &failOut, &failErr
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(failErr.String(), "aml: error: "+fail+":4:20") || !strings.Contains(failErr.String(), "branch 1") || failOut.Len() != 0 {
		t.Fatalf("a failing run: exit %d\nstdout %q\nstderr %s", code, failOut.String(), failErr.String())
	}
	out, _ = exec.Command(bin, "run", "--json", "--temporal", srv.Address, fail).Output()
	var envelope struct {
		RunID   string `json:"runId"`
		Success bool   `json:"success"`
		Error   any    `json:"error"`
	}
	if err := json.Unmarshal(out, &envelope); err != nil || envelope.Success || !strings.HasPrefix(envelope.RunID, "aml-") || envelope.Error == nil {
		t.Fatalf("--json of a failing run: %s (%v)", out, err)
	}

	// aml runs and aml runs show.
	out, err = exec.Command(bin, "runs", "--temporal", srv.Address).Output()
	if err != nil {
		t.Fatalf("aml runs --temporal: %v", err)
	}
	if !regexp.MustCompile(runID+`\s+succeeded\s+fleet.star`).Match(out) || strings.Count(string(out), " succeeded ") != 4 {
		t.Fatalf("aml runs --temporal:\n%s", out)
	}
	out, err = exec.Command(bin, "runs", "show", runID, "--temporal", srv.Address).Output()
	if err != nil {
		t.Fatalf("aml runs show --temporal: %v", err)
	}
	show := string(out)
	if !strings.Contains(show, "state:    succeeded") || len(regexp.MustCompile(`agent fake at \S*/fleet.star:15:14 \[c#0/[^\]]*\]: finished`).FindAllString(show, -1)) != 40 || !strings.Contains(show, killedText) {
		t.Fatalf("aml runs show --temporal:\n%s", show)
	}

	// aml cancel ends a run whose sessions hang, and their agent processes
	// with it, on the worker left.
	hang := filepath.Join(dir, "hang.star")
	src := strings.Replace(fleetWorkflow, "sleep 400", "sleep 600000", 1)
	if err := os.WriteFile(hang, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(logFile)
	out, err = exec.Command(bin, "run", "--detach", "--temporal", srv.Address, hang).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	hangID := strings.TrimSpace(string(out))
	for countLines(t, logFile, "start ") < 10 {
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatal("the hanging sessions did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(processesOf(t, fake)); n == 0 {
		t.Fatal("no agent process runs before the cancel")
	}
	cancelled := time.Now()
	out, err = exec.Command(bin, "cancel", hangID, "--temporal", srv.Address).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "cancelled "+hangID {
		t.Fatalf("aml cancel: %v\n%s", err, out)
	}
	if left := processesOf(t, fake); len(left) > 0 {
		t.Fatalf("agent processes %v outlive the cancelled run", left)
	}
	t.Logf("aml cancel returned in %s, with every agent process ended", time.Since(cancelled).Round(time.Millisecond))

	// ask(): the run waits, aml runs and aml runs show say for what, and
	// aml answer checks each answer against its schema.
	askFile := filepath.Join(dir, "ask.star")
	askSrc := "def main():\n    who = ask(\"Who reviews?\", id = \"reviewer\")\n    ok = ask(\"Ship it?\", schema.boolean())\n    return \"%s %s\" % (who, ok)\n"
	if err := os.WriteFile(askFile, []byte(askSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "run", "--detach", "--temporal", srv.Address, askFile).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	askID := strings.TrimSpace(string(out))
	waitFor := func(want string) string {
		t.Helper()
		for end := time.Now().Add(time.Minute); ; {
			out, _ := exec.Command(bin, "runs", "show", askID, "--temporal", srv.Address).Output()
			if strings.Contains(string(out), want) {
				return string(out)
			}
			if time.Now().After(end) {
				t.Fatalf("aml runs show never said %q:\n%s", want, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// aml runs show and aml runs agree on the state of a run that waits.
	if show := waitFor("reviewer: Who reviews? (asked at " + askFile + ":2:14)"); !strings.Contains(show, "state:    waiting for an answer (1 question(s))") {
		t.Fatalf("aml runs show of a run that waits:\n%s", show)
	}
	out, _ = exec.Command(bin, "runs", "--temporal", srv.Address).Output()
	if !regexp.MustCompile(askID + `\s+waiting for an answer \(1 question\(s\)\)`).Match(out) {
		t.Fatalf("aml runs --temporal while the run waits:\n%s", out)
	}
	answer := func(want int, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"answer", askID}, append(args, "--temporal", srv.Address)...)...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != want {
			t.Fatalf("aml answer %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return string(out)
	}
	if out := answer(2, "nobody=x"); !strings.Contains(out, "it waits for: reviewer") {
		t.Fatalf("an id the run does not wait for: %s", out)
	}
	answer(0, "reviewer=ana")
	waitFor(`c#0/ask#1: Ship it? {"type":"boolean"}`)
	if out := answer(2, "c#0/ask#1=maybe"); !strings.Contains(out, "not JSON") {
		t.Fatalf("an answer that is not a boolean: %s", out)
	}
	answer(0, "c#0/ask#1=true")
	if err := c.GetWorkflow(ctx, askID, "").Get(ctx, &res); err != nil || res.Text != "ana True" {
		t.Fatalf("the answered run: %q, %v", res.Text, err)
	}
}

// setUp starts the Temporal server and builds aml and the fake ACP agent;
// every worker and client of the test keeps payloads above 256 KiB in
// dir/blobs and shares the key that seals env() values, as a fleet must.
func setUp(t *testing.T) (srv *temporaltest.Server, bin, dir, fake string) {
	t.Helper()
	srv = temporaltest.Start(t)
	bin = buildAML(t)
	dir = t.TempDir()
	blobs := filepath.Join(dir, "blobs")
	if err := os.Mkdir(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AML_TEMPORAL_BLOB_STORE", blobs)
	t.Setenv("AML_JOURNAL_KEY_FILE", filepath.Join(dir, "journal.key"))
	fake = testbin.Build(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", testbin.Options{})
	return srv, bin, dir, fake
}

// startWorkers starts an aml worker process named a, then b, with flags
// and the variables env gives it; they are stopped (SIGTERM) when the test
// ends, and their stderr shown if it failed.
func startWorkers(t *testing.T, bin, address string, flags []string, env func(name string) []string) map[string]*exec.Cmd {
	t.Helper()
	workers := map[string]*exec.Cmd{}
	for _, name := range []string{"a", "b"} {
		cmd := exec.Command(bin, append([]string{"worker", "--temporal", address}, flags...)...)
		cmd.Env = append(os.Environ(), env(name)...)
		stderr := &lockedWriter{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		workerStderr.Store(cmd, stderr)
		workers[name] = cmd
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("worker %s:\n%s", name, stderr.tail(8000))
			}
		})
	}
	return workers
}

// workerStderr holds what each worker startWorkers started wrote on its
// standard error (*lockedWriter by *exec.Cmd).
var workerStderr sync.Map

// workerLogs returns what the workers wrote on their standard error.
func workerLogs(workers map[string]*exec.Cmd) string {
	var b strings.Builder
	for name, w := range workers {
		if v, ok := workerStderr.Load(w); ok {
			fmt.Fprintf(&b, "worker %s:\n%s\n", name, v.(*lockedWriter).tail(1<<20))
		}
	}
	return b.String()
}

// processesOf returns the pids of the processes running the executable
// exe.
func processesOf(t *testing.T, exe string) []int {
	t.Helper()
	return processes(t, func(cmdline []byte) bool {
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		return argv0 == exe
	})
}

// processes returns the pids of the processes whose command line
// (NUL-separated, from /proc) match accepts.
func processes(t *testing.T, match func(cmdline []byte) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && match(cmdline) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func countLines(t *testing.T, file, prefix string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// sessionTimes reads the session log: the start and end times of each
// session id.
func sessionTimes(t *testing.T, file string) (starts, ends map[string][]time.Time) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	starts, ends = map[string][]time.Time{}, map[string][]time.Time{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kind, id string
		var ns int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %d", &kind, &id, &ns); err != nil {
			t.Fatalf("session log line %q: %v", sc.Text(), err)
		}
		m := starts
		if kind == "end" {
			m = ends
		}
		m[id] = append(m[id], time.Unix(0, ns))
	}
	return starts, ends
}

// buildAML builds the aml command (see testbin).
func buildAML(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "github.com/aml-go/aml/cmd/aml", testbin.Options{})
}
