package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal"
)

// echoAgent is a Go agent provider of a worker: it answers with its
// prompt, counts its sessions and the most that ran at once, and fails a
// prompt that starts with "fail".
type echoAgent struct {
	calls, now atomic.Int64
	peak       maxOf
	mu         sync.Mutex
	prompts    []string
}

type maxOf struct{ n atomic.Int64 }

func (m *maxOf) add(n int64) {
	for {
		old := m.n.Load()
		if n <= old || m.n.CompareAndSwap(old, n) {
			return
		}
	}
}

func (a *echoAgent) Name() string { return "echo" }

func (a *echoAgent) Run(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	a.calls.Add(1)
	a.peak.add(a.now.Add(1))
	defer a.now.Add(-1)
	a.mu.Lock()
	a.prompts = append(a.prompts, req.Prompt)
	a.mu.Unlock()
	if strings.HasPrefix(req.Prompt, "fail") {
		return nil, errors.New("the model refused: " + req.Prompt)
	}
	time.Sleep(2 * time.Millisecond) // the model takes a moment, so that calls overlap
	return &eval.AgentResponse{Text: "<" + req.Prompt + "|" + strings.Join(req.FollowUps, "+") + ">"}, nil
}

const fanOutFlow = `configure(max_concurrent_agents = 2)

def Pair(a, b):
    return [agent(a), " & ", agent(b)]

def main():
    first = evaluate(agent("first"))
    texts = evaluate_all([agent("e%d" % i) for i in range(3)])
    return [
        parallel([block(agent("p%d" % i, follow_up("again"))) for i in range(6)]),
        "|", Pair(first, "y"),
        "|", ",".join(texts),
    ]
`

// inProcess runs the workflow file at path as aml run does, with agent as
// the default provider and env() unset.
func inProcess(t *testing.T, path string, agent eval.AgentProvider) (string, error) {
	t.Helper()
	return starlib.Run(context.Background(), path, "", starlib.LoadOptions{Env: func(string) (string, bool) { return "", false }}, eval.Options{AgentProvider: agent})
}

// onTemporal runs the bundle of the workflow file at path as workflow
// code in the SDK's test environment, with agent as the worker's default
// provider.
func onTemporal(t *testing.T, path string, agent eval.AgentProvider) (string, error) {
	t.Helper()
	b, err := temporal.Pack(path)
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv(temporal.Options{DefaultAgent: agent})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return "", err
	}
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res.Text, nil
}

// TestWorkflowMatchesInProcess: the same workflow gives the same text on
// Temporal as in process: deterministic agents (evaluate, evaluate_all,
// follow_up) in workflow code, and Go agents of the worker as activities,
// in parallel() under max_concurrent_agents.
func TestWorkflowMatchesInProcess(t *testing.T) {
	collect := filepath.Join("..", "examples", "collect.star")
	want, err := inProcess(t, collect, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := onTemporal(t, collect, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("examples/collect.star on Temporal:\n%s\nin process:\n%s", got, want)
	}

	path := filepath.Join(t.TempDir(), "fan.star")
	if err := os.WriteFile(path, []byte(fanOutFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	local := &echoAgent{}
	want, err = inProcess(t, path, local)
	if err != nil {
		t.Fatal(err)
	}
	remote := &echoAgent{}
	got, err = onTemporal(t, path, remote)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("on Temporal:\n%s\nin process:\n%s", got, want)
	}
	if n := remote.calls.Load(); n != 12 {
		t.Fatalf("%d sessions ran as activities, want 12", n)
	}
	if p := remote.peak.n.Load(); p > 2 {
		t.Fatalf("%d sessions ran at once under max_concurrent_agents = 2", p)
	}
	t.Logf("%d sessions, at most %d at once: %s", remote.calls.Load(), remote.peak.n.Load(), got)
}

// TestWorkflowFailure: a provider's failure in a parallel() branch fails
// the run with the message aml run gives.
func TestWorkflowFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fail.star")
	src := "def main():\n    return parallel(agent(\"ok\"), agent(\"fail now\"))\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want := inProcess(t, path, &echoAgent{})
	_, got := onTemporal(t, path, &echoAgent{})
	if want == nil || got == nil {
		t.Fatalf("in process %v, on Temporal %v: want both to fail", want, got)
	}
	for _, part := range []string{"fail.star:2:20", "branch 1", "the model refused: fail now"} {
		if !strings.Contains(want.Error(), part) {
			t.Fatalf("in process: %v lacks %q", want, part)
		}
		if !strings.Contains(got.Error(), part) {
			t.Fatalf("on Temporal: %v lacks %q (in process: %v)", got, part, want)
		}
	}
}

// packSource writes src as file name in dir and packs it.
func packSource(tb testing.TB, dir, name, src string) *temporal.Bundle {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	b, err := temporal.Pack(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// testEnv is the SDK's test environment, quiet, with AML registered.
func testEnv(opts temporal.Options) *testsuite.TestWorkflowEnvironment {
	env, _ := testEnvLeases(opts)
	return env
}

// testEnvLeases is testEnv, a session worker, with the leases it holds.
func testEnvLeases(opts temporal.Options) (*testsuite.TestWorkflowEnvironment, *temporal.WorkerLeases) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quiet{})
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{EnableSessionWorker: true})
	// The environment fails a run whose activities take longer than
	// its test timeout (three seconds by default) in real time: a
	// sandbox's creation on a loaded machine, or a pod's, takes longer.
	env.SetTestTimeout(3 * time.Minute)
	return env, temporal.Register(env, opts)
}

// quiet drops the SDK's logs: the tests report what they check.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

const askFlow = `def main():
    who = ask("Who reviews?", id = "reviewer")
    ok = ask("Ship it?", schema.boolean())
    return "%s %s" % (who, ok)
`

// TestWorkflowAsk: ask() makes the run wait without an activity; the
// state query lists the waiting question with its id and schema, and the
// answer signal lets the run go on with the value.
func TestWorkflowAsk(t *testing.T) {
	b := packSource(t, t.TempDir(), "ask.star", askFlow)
	env := testEnv(temporal.Options{})
	state := func() temporal.RunState {
		v, err := env.QueryWorkflow(temporal.StateQuery)
		if err != nil {
			t.Fatal(err)
		}
		var st temporal.RunState
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	var seen []string
	env.RegisterDelayedCallback(func() {
		st := state()
		if len(st.Questions) != 1 || st.Questions[0].ID != "reviewer" || st.Questions[0].Text != "Who reviews?" {
			t.Errorf("first state %+v", st)
		}
		seen = append(seen, st.Questions[0].ID)
		env.SignalWorkflow(temporal.AnswerSignal, temporal.Answer{ID: "reviewer", Value: "ana"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		st := state()
		if len(st.Questions) != 1 || st.Questions[0].ID != "c#0/ask#1" || st.Questions[0].Schema["type"] != "boolean" {
			t.Errorf("second state %+v", st)
		}
		seen = append(seen, st.Questions[0].ID)
		env.SignalWorkflow(temporal.AnswerSignal, temporal.Answer{ID: st.Questions[0].ID, Value: true})
	}, 48*time.Hour)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Text != "ana True" || len(seen) != 2 {
		t.Fatalf("text %q after answering %v", res.Text, seen)
	}
}

// TestWorkflowLimits: RunInput.Limits replace the workflow's own, as aml
// run's limit flags do.
func TestWorkflowLimits(t *testing.T) {
	b := packSource(t, t.TempDir(), "fan.star", fanOutFlow)
	env := testEnv(temporal.Options{DefaultAgent: &echoAgent{}})
	l := eval.Limits{MaxAgentCalls: 3, MaxConcurrentAgents: 2, MaxDepth: 16, MaxTurnsPerAgent: 16}
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b, Limits: &l})
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "exceeded max_agent_calls 3") {
		t.Fatalf("a run of 12 agents under max_agent_calls 3: %v", err)
	}
}

// TestPrintsComeWithTheOutcome: a run's outcome carries its last print()
// lines, in order and bounded, where the follower finds those it did not
// read while the run went on.
func TestPrintsComeWithTheOutcome(t *testing.T) {
	src := "def main():\n    for i in range(3000):\n        print(\"line \" + str(10000 + i)[1:] + \" \" + \"x\" * 90)\n    return \"done\"\n"
	b := packSource(t, t.TempDir(), "prints.star", src)
	env := testEnv(temporal.Options{})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
	var res temporal.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	p := res.Prints
	if p == nil || p.Next != 3000 || len(p.Lines) == 0 || len(p.Lines) == 3000 {
		t.Fatalf("the outcome carries %+v lines", p)
	}
	size := 0
	for i, l := range p.Lines {
		size += len(l)
		if want := fmt.Sprintf("line %04d ", 3000-len(p.Lines)+i); !strings.HasPrefix(l, want) {
			t.Fatalf("line %d of the tail is %.20q, want it to start %q", i, l, want)
		}
	}
	if size > 64<<10 {
		t.Fatalf("the tail holds %d bytes", size)
	}
}
