package eval_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

type branchKey struct{}

// goExecutor is an Executor of its own: a goroutine per branch, each
// with a context that says which fan-out and branch it is; a FIFO
// semaphore that counts its holders; timeouts it records.
type goExecutor struct {
	fanOuts  atomic.Int64
	holders  atomic.Int64
	peak     maxOf
	timeouts []time.Duration
	mu       sync.Mutex
}

func (x *goExecutor) FanOut(ctx context.Context, n int, branch func(context.Context, int) error) []eval.BranchFailure {
	id := x.fanOuts.Add(1)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []eval.BranchFailure
	)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bctx := context.WithValue(ctx, branchKey{}, fmt.Sprintf("%d/%d", id, i))
			if err := branch(bctx, i); err != nil {
				mu.Lock()
				failures = append(failures, eval.BranchFailure{Index: i, Err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failures
}

type countedSemaphore struct {
	x   *goExecutor
	sem chan struct{}
}

func (s *countedSemaphore) Acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		s.x.peak.add(s.x.holders.Add(1))
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *countedSemaphore) Release() {
	s.x.holders.Add(-1)
	<-s.sem
}

func (x *goExecutor) NewSemaphore(_ context.Context, n int) eval.Semaphore {
	return &countedSemaphore{x: x, sem: make(chan struct{}, n)}
}

func (x *goExecutor) WithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	x.mu.Lock()
	x.timeouts = append(x.timeouts, d)
	x.mu.Unlock()
	return context.WithTimeoutCause(ctx, d, cause)
}

// TestExecutorRunsTheConcurrency: with Options.Executor, every fan-out
// (parallel() and evaluate_all()), the agent slots and an agent's timeout
// go through the executor, each branch runs under the context the
// executor gave it, and the text and errors keep authored order.
func TestExecutorRunsTheConcurrency(t *testing.T) {
	x := &goExecutor{}
	var seen sync.Map
	var slow atomic.Bool
	p, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		b, _ := ctx.Value(branchKey{}).(string)
		seen.Store(req.Prompt, b)
		if strings.HasPrefix(req.Prompt, "fail") {
			return nil, errors.New(req.Prompt)
		}
		if req.Prompt == "slow" && slow.Load() {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		time.Sleep(time.Millisecond) // the call takes a moment, so that branches overlap
		return &eval.AgentResponse{Text: req.Prompt + ","}, nil
	}})
	l := eval.Limits{MaxAgentCalls: eval.Unlimited, MaxConcurrentAgents: 3}
	rt, err := eval.New(eval.Options{AgentProvider: p, Limits: &l, Executor: x})
	if err != nil {
		t.Fatal(err)
	}
	var branches []any
	var want strings.Builder
	for i := range 20 {
		branches = append(branches, &eval.Agent{Children: []any{fmt.Sprint("p", i)}})
		fmt.Fprintf(&want, "p%d,", i)
	}
	all := &eval.Component{Name: "All", Fn: func(cc *eval.ComponentContext) (any, error) {
		texts, err := cc.EvaluateAll([]any{&eval.Agent{Children: []any{"a"}}, &eval.Agent{Children: []any{"b"}}}, eval.Position{})
		return strings.Join(texts, ""), err
	}}
	out, err := rt.Evaluate(context.Background(), []any{&eval.Parallel{Branches: branches}, all})
	if err != nil {
		t.Fatal(err)
	}
	if out != want.String()+"a,b," {
		t.Fatalf("text %q", out)
	}
	if got := x.fanOuts.Load(); got != 2 {
		t.Fatalf("%d fan-outs went through the executor, want 2", got)
	}
	if got := x.peak.n.Load(); got < 1 || got > 3 {
		t.Fatalf("%d agents held a slot at once, want 1..3", got)
	}
	for _, prompt := range []string{"p0", "p19", "a", "b"} {
		if b, _ := seen.Load(prompt); b == nil || b == "" {
			t.Fatalf("agent %q ran without its branch's context", prompt)
		}
	}

	// Failures come back in authored order whatever order they happened in.
	_, err = rt.Evaluate(context.Background(), &eval.Parallel{Branches: []any{
		&eval.Agent{Children: []any{"fail-0"}}, &eval.Agent{Children: []any{"ok"}}, &eval.Agent{Children: []any{"fail-2"}},
	}})
	var pe *eval.ParallelError
	if !errors.As(err, &pe) || len(pe.Failures) != 2 || pe.Failures[0].Index != 0 || pe.Failures[1].Index != 2 {
		t.Fatalf("failures: %v", err)
	}

	// An agent's timeout_ms is the executor's.
	slow.Store(true)
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Children: []any{"slow"}, TimeoutMS: 30})
	var te *eval.AgentTimeoutError
	if !errors.As(err, &te) || len(x.timeouts) != 1 || x.timeouts[0] != 30*time.Millisecond {
		t.Fatalf("timeout: %v, executor timeouts %v", err, x.timeouts)
	}
}
