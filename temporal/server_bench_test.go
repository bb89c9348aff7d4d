package temporal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/temporal"
)

// stampAgent records when each session starts and sleeps d.
type stampAgent struct {
	d     time.Duration
	mu    sync.Mutex
	times []time.Time
}

func (a *stampAgent) Name() string { return "stamp" }
func (a *stampAgent) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	a.mu.Lock()
	a.times = append(a.times, time.Now())
	a.mu.Unlock()
	if a.d > 0 {
		select {
		case <-time.After(a.d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &eval.AgentResponse{Text: "."}, nil
}

// runOnServer runs the workflow src on a fresh server with the given
// workers, each running at most slots sessions at once, and returns how
// long the run took.
func runOnServer(b *testing.B, src string, agent eval.AgentProvider, workers, slots int) time.Duration {
	b.Helper()
	srv := temporaltest.Start(b)
	c := srv.Dial(b)
	for i := range workers {
		w := worker.New(c, "bench", worker.Options{MaxConcurrentActivityExecutionSize: slots, Identity: fmt.Sprint("bench-", i)})
		temporal.Register(w, temporal.Options{DefaultAgent: agent})
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(w.Stop)
	}
	bundle := packSource(b, b.TempDir(), "bench.star", src)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "bench"}, temporal.WorkflowName, temporal.RunInput{Bundle: bundle})
	if err != nil {
		b.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		b.Fatal(err)
	}
	return time.Since(started)
}

// BenchmarkEffectOverhead: 100 agent sessions one after the other, each
// answering at once: the time from one session's start to the next is
// what an effect costs on Temporal (schedule, dispatch, completion, the
// workflow task that schedules the next). Reports its p50 and p95.
func BenchmarkEffectOverhead(b *testing.B) {
	const n = 100
	src := fmt.Sprintf("configure(max_agent_calls = 1000, max_concurrent_agents = 0)\n\ndef main():\n    out = []\n    for i in range(%d):\n        out.append(evaluate(agent(\"q%%d\" %% i)))\n    return \"\".join(out)\n", n)
	for range b.N {
		a := &stampAgent{}
		runOnServer(b, src, a, 1, 10)
		var gaps []time.Duration
		for i := 1; i < len(a.times); i++ {
			gaps = append(gaps, a.times[i].Sub(a.times[i-1]))
		}
		slices.Sort(gaps)
		b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(gaps[len(gaps)*95/100].Microseconds())/1000, "p95-ms")
	}
}

// BenchmarkFleet1000: 1,000 sessions of 100 ms in parallel() on two
// workers of 100 slots each: the ideal is 0.5 s. Reports the run's time
// and its ratio to the ideal.
func BenchmarkFleet1000(b *testing.B) {
	const n, per = 1000, 100 * time.Millisecond
	src := fmt.Sprintf("configure(max_concurrent_agents = 200, max_agent_calls = 2000)\n\ndef main():\n    return parallel([agent(\"q%%d\" %% i) for i in range(%d)])\n", n)
	for range b.N {
		a := &stampAgent{d: per}
		took := runOnServer(b, src, a, 2, 100)
		if len(a.times) != n {
			b.Fatalf("%d sessions ran, want %d", len(a.times), n)
		}
		ideal := time.Duration(n/200) * per
		b.ReportMetric(took.Seconds(), "run-s")
		b.ReportMetric(took.Seconds()/ideal.Seconds(), "x-ideal")
	}
}

func sleepActivity(ctx context.Context) error {
	time.Sleep(100 * time.Millisecond) // the activity's work
	return nil
}

func plainFleet(ctx workflow.Context, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	fs := make([]workflow.Future, n)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity(ctx, sleepActivity)
	}
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkFleet1000Plain is BenchmarkFleet1000's floor: the same 1,000
// activities of 100 ms on two workers of 100 slots, from a workflow
// written against the SDK directly, with no AML in it.
func BenchmarkFleet1000Plain(b *testing.B) {
	for range b.N {
		srv := temporaltest.Start(b)
		c := srv.Dial(b)
		for i := range 2 {
			w := worker.New(c, "plain", worker.Options{MaxConcurrentActivityExecutionSize: 100, Identity: fmt.Sprint("plain-", i)})
			w.RegisterWorkflow(plainFleet)
			w.RegisterActivity(sleepActivity)
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(w.Stop)
		}
		started := time.Now()
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: "plain"}, plainFleet, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if err := run.Get(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		took := time.Since(started)
		b.ReportMetric(took.Seconds(), "run-s")
		b.ReportMetric(took.Seconds()/0.5, "x-ideal")
	}
}
