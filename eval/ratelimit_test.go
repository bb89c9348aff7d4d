package eval_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// limited fails its first `fail` sessions (all with fail < 0) with a
// rate limit that asks to come back after retryAfter, then answers.
type limited struct {
	fail       int64
	retryAfter time.Duration
	calls      atomic.Int64
}

func (p *limited) Name() string { return "limited" }
func (p *limited) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	n := p.calls.Add(1)
	if p.fail < 0 || n <= p.fail {
		return nil, &eval.RateLimitError{RetryAfter: p.retryAfter, Err: errors.New("429 Too Many Requests")}
	}
	return &eval.AgentResponse{Text: "ok"}, nil
}

func TestRateLimitedSessionRunsAgain(t *testing.T) {
	fast := &eval.RateLimitRetry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	p := &limited{fail: 2}
	out, err, _ := evaluate(t, eval.Options{AgentProvider: p, RateLimitRetry: fast}, &eval.Agent{Position: pos(1), Children: []any{"x"}})
	if err != nil || out != "ok" || p.calls.Load() != 3 {
		t.Fatalf("%q, %v after %d sessions; want ok after 3", out, err, p.calls.Load())
	}
	// The tries are bounded: a third rate limit is the session's end.
	p = &limited{fail: -1}
	_, err, _ = evaluate(t, eval.Options{AgentProvider: p, RateLimitRetry: fast}, &eval.Agent{Position: pos(1), Children: []any{"x"}})
	var rl *eval.RateLimitError
	if !errors.As(err, &rl) || p.calls.Load() != 3 || !strings.Contains(err.Error(), "a rate limit ended it 3 times") {
		t.Fatalf("%v after %d sessions", err, p.calls.Load())
	}
	// So is the waiting: a limit that asks for an hour is not waited for.
	p = &limited{fail: -1, retryAfter: time.Hour}
	_, err, _ = evaluate(t, eval.Options{AgentProvider: p}, &eval.Agent{Position: pos(1), Children: []any{"x"}})
	if p.calls.Load() != 1 || !strings.Contains(err.Error(), "would pass the 2m0s") {
		t.Fatalf("%v after %d sessions", err, p.calls.Load())
	}
	// An error that is not a rate limit is not tried again.
	_, err, _ = evaluate(t, eval.Options{AgentProvider: &failing{}, RateLimitRetry: fast}, &eval.Agent{Position: pos(1), Children: []any{"x"}})
	if err == nil || strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("err = %v", err)
	}
}

// failing fails every session with an ordinary error.
type failing struct{}

func (failing) Name() string { return "failing" }
func (failing) Run(context.Context, *eval.AgentRequest, *eval.AgentExecution) (*eval.AgentResponse, error) {
	return nil, errors.New("the agent crashed")
}

// TestRateLimitRetriesAreJournaled: a journaled run records each retry,
// so a resume goes on counting from where the run stopped instead of
// trying from zero.
func TestRateLimitRetriesAreJournaled(t *testing.T) {
	fast := &eval.RateLimitRetry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	j := eval.NewMemoryJournal()
	p := &limited{fail: -1}
	opts := eval.Options{AgentProvider: p, RateLimitRetry: fast}
	_, err, _ := evaluate(t, opts, loop(1), eval.EvaluateOptions{RunID: "rl", Journal: j})
	if err == nil || p.calls.Load() != 3 {
		t.Fatalf("%v after %d sessions", err, p.calls.Load())
	}
	rt, _ := eval.New(opts)
	_, err = rt.Resume(context.Background(), loop(1), eval.ResumeOptions{RunID: "rl", Journal: j})
	if err == nil || p.calls.Load() != 4 || !strings.Contains(err.Error(), "a rate limit ended it 3 times") {
		t.Fatalf("resume: %v after %d more sessions; want 1", err, p.calls.Load()-3)
	}
	// The retry records are not effects: a resume of a run that then
	// succeeds reports no change.
	j = eval.NewMemoryJournal()
	p = &limited{fail: 1}
	opts.AgentProvider = p
	if _, err, _ := evaluate(t, opts, loop(2), eval.EvaluateOptions{RunID: "ok", Journal: j}); err != nil {
		t.Fatal(err)
	}
	rt, _ = eval.New(opts)
	if _, err := rt.Resume(context.Background(), loop(2), eval.ResumeOptions{RunID: "ok", Journal: j}); err != nil || p.calls.Load() != 3 {
		t.Fatalf("resume: %v, %d sessions in all", err, p.calls.Load())
	}
}
