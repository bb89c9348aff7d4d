package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// maxOf records the largest value it is given.
type maxOf struct{ n atomic.Int64 }

func (m *maxOf) add(n int64) {
	for {
		old := m.n.Load()
		if n <= old || m.n.CompareAndSwap(old, n) {
			return
		}
	}
}

// TestFanOutGoroutinesBounded: the goroutines of a fan-out of 5,000
// agents that each block in their provider are bounded by the agent
// limit and GOMAXPROCS, not by the number of branches; every branch runs
// and the text keeps authored order.
func TestFanOutGoroutinesBounded(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n, limit = 5000, 4
	var live, inProvider, all maxOf
	var now atomic.Int64
	eval.ObserveLiveForTest(live.add)
	defer eval.ObserveLiveForTest(nil)
	p, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		inProvider.add(now.Add(1))
		all.add(int64(runtime.NumGoroutine()))
		time.Sleep(20 * time.Microsecond) // the provider holds its goroutine a moment
		now.Add(-1)
		return &eval.AgentResponse{Text: req.Prompt}, nil
	}})
	branches := make([]any, n)
	var want strings.Builder
	for i := range branches {
		s := fmt.Sprintf("%d,", i)
		branches[i] = &eval.Agent{Children: []any{s}}
		want.WriteString(s)
	}
	l := eval.Limits{MaxAgentCalls: eval.Unlimited, MaxConcurrentAgents: limit}
	rt, _ := eval.New(eval.Options{AgentProvider: p, Limits: &l})
	got, err := rt.Evaluate(context.Background(), &eval.Parallel{Branches: branches})
	if err != nil || got != want.String() {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
	// The agent limit in providers and up to twice GOMAXPROCS runnable
	// (or waiting for a slot).
	bound := int64(limit + 2*runtime.GOMAXPROCS(0))
	t.Logf("%d branches, limit %d: at most %d goroutines did evaluator work (bound %d); at most %d agents at once", n, limit, live.n.Load(), bound, inProvider.n.Load())
	if live.n.Load() > bound {
		t.Fatalf("%d goroutines for %d branches under limit %d, want at most %d: queued branches must be data", live.n.Load(), n, limit, bound)
	}
	// Process-wide, with helpers that are ending and the test's own: a
	// goroutine per branch would be thousands.
	if g := all.n.Load(); g > 100 {
		t.Fatalf("%d goroutines in the process during a fan-out of %d branches", g, n)
	}
	if inProvider.n.Load() > limit {
		t.Fatalf("%d agents at once under limit %d", inProvider.n.Load(), limit)
	}
}

// barrierProvider answers only once all n agents are in their provider
// at the same time; it fails after a timeout, as it would if branches ran
// one after another.
func barrierProvider(t *testing.T, n int) *deterministic.Agent {
	var wg sync.WaitGroup
	wg.Add(n)
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	p, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		wg.Done()
		select {
		case <-all:
			return &eval.AgentResponse{Text: "."}, nil
		case <-time.After(20 * time.Second):
			return nil, errors.New("not every branch was running at once")
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}})
	return p
}

// TestFanOutBlockedBranchesRunAtOnce: without a limit, every branch of a
// fan-out whose agents block runs at the same time (blocked branches are
// replaced by helpers), for parallel() and for EvaluateAll.
func TestFanOutBlockedBranchesRunAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 200
	for _, shape := range []string{"parallel", "evaluate_all"} {
		t.Run(shape, func(t *testing.T) {
			p := barrierProvider(t, n)
			rt, _ := eval.New(eval.Options{AgentProvider: p, Limits: &noLimits})
			agents := siblingAgents(n)
			var tree any = &eval.Parallel{Branches: agents}
			if shape == "evaluate_all" {
				tree = &eval.Component{Name: "all", Fn: func(cc *eval.ComponentContext) (any, error) {
					texts, err := cc.EvaluateAll(agents, eval.Position{})
					return strings.Join(texts, ""), err
				}}
			}
			got, err := rt.Evaluate(context.Background(), tree)
			if err != nil || got != strings.Repeat(".", n) {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

// TestFanOutUnseenBlockingRunsAtOnce: branches that block where the
// evaluator cannot see it (a Go component body) still all run at once.
func TestFanOutUnseenBlockingRunsAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 30
	var wg sync.WaitGroup
	wg.Add(n)
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	branches := make([]any, n)
	for i := range branches {
		branches[i] = &eval.Component{Name: "waits", Fn: func(*eval.ComponentContext) (any, error) {
			wg.Done()
			select {
			case <-all:
				return ".", nil
			case <-time.After(20 * time.Second):
				return nil, errors.New("not every branch was running at once")
			}
		}}
	}
	rt, _ := eval.New(eval.Options{})
	got, err := rt.Evaluate(context.Background(), &eval.Parallel{Branches: branches})
	if err != nil || got != strings.Repeat(".", n) {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestFanOutScriptsIgnoreTheAgentLimit: the agent limit bounds agents
// only: ten host scripts under parallel() with limit 1 run at the same
// time (each waits until all ten have started).
func TestFanOutScriptsIgnoreTheAgentLimit(t *testing.T) {
	host, err := local.New(local.Options{})
	if err != nil {
		t.Skip(err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	const n = 10
	branches := make([]any, n)
	for i := range branches {
		src := fmt.Sprintf(`touch started.%d; i=0; while [ "$(ls started.* | wc -l)" -lt %d ]; do i=$((i+1)); [ $i -gt 2000 ] && exit 3; sleep 0.01; done; printf .`, i, n)
		branches[i] = &eval.Script{Shell: "sh", Children: []any{src}}
	}
	l := eval.Limits{MaxConcurrentAgents: 1}
	rt, _ := eval.New(eval.Options{Host: host, Cwd: dir, Limits: &l})
	got, err := rt.Evaluate(context.Background(), &eval.Parallel{Branches: branches})
	if err != nil || got != strings.Repeat(".", n) {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("got %q, %v (started: %d)", got, err, len(entries))
	}
}

// TestFanOutCancellation: cancelling a fan-out of a million branches
// returns promptly with the cause, starts no further branch, and leaves
// no goroutine behind.
func TestFanOutCancellation(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 1_000_000
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("operator stop")
	var calls atomic.Int64
	var cancelled atomic.Int64 // nanoseconds at the cancellation
	p, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if calls.Add(1) == 10_000 {
			cancelled.Store(time.Now().UnixNano())
			cancel(cause)
		}
		return &eval.AgentResponse{Text: "."}, nil
	}})
	rt, _ := eval.New(eval.Options{AgentProvider: p, Limits: &noLimits})
	_, err := rt.Evaluate(ctx, &eval.Parallel{Branches: siblingAgents(n)})
	took := time.Duration(time.Now().UnixNano() - cancelled.Load())
	if !errors.Is(err, cause) {
		t.Fatalf("error %v does not wrap the cause", err)
	}
	t.Logf("returned %v after the cancellation; %d of %d branches had called their provider", took, calls.Load(), n)
	if c := calls.Load(); c > 20_000 {
		t.Fatalf("%d provider calls: branches kept starting after the cancellation", c)
	}
}

// TestFanOutNoHelperStartsAfterTheWait: the monitor may still hold a
// fan-out whose caller has claimed its last branch; a helper it started
// then would join a wait that already returned (a WaitGroup Add racing
// its Wait, which go test -race reports). Many short fan-outs in a row
// give the monitor that window.
func TestFanOutNoHelperStartsAfterTheWait(t *testing.T) {
	p, err := deterministic.New(deterministic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := eval.New(eval.Options{AgentProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	tree := &eval.Parallel{Branches: []any{&eval.Agent{Children: []any{"a"}}, "|", &eval.Agent{Children: []any{"b"}}}}
	for i := range 2000 {
		got, err := rt.Evaluate(context.Background(), tree)
		if err != nil || got != "a|b" {
			t.Fatalf("evaluation %d = %q, %v", i, got, err)
		}
		p.Reset()
	}
}
