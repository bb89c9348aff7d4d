package acp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

// An unmetered session's agent reports its cumulative cost in
// usage_update notifications: a cost budget it crosses stops the turn at
// once (the agent never reaches its last line), and the spend counted is
// the last cost reported.
func TestReportedCostStopsTheTurn(t *testing.T) {
	p := costly(t)
	script := "cost 0.10\nsay a\ncost 0.30\nsay b\ncost 0.60\nsleep 20000\nsay never\n"
	_, err, spent := acptest.SpendRun(t, &eval.Agent{Provider: p, Children: []any{script}}, &eval.Budget{CostUSD: 0.5})
	var be *eval.BudgetError
	if !errors.As(err, &be) || be.Budget != "cost_usd" {
		t.Fatalf("err = %v, want a cost_usd budget error", err)
	}
	if spent.CostUSD < 0.599 || spent.CostUSD > 0.601 {
		t.Fatalf("spent = %+v, want the last reported cost, $0.60", spent)
	}
	if strings.Contains(err.Error(), "never") {
		t.Fatalf("the turn ran on: %v", err)
	}
}

// The cost reported during a turn is the turn's cost, counted once: the
// turns' reports (tokens, no cost) add their tokens, and the journal's
// record of the session carries the cost so a resume counts it.
func TestReportedCostCountedOnce(t *testing.T) {
	p := costly(t)
	node := &eval.Agent{Provider: p, Children: []any{"cost 0.10\ncost 0.25\nusage\nsay one",
		&eval.FollowUp{Children: []any{"cost 0.40\nusage\nsay two"}}}}
	out, err, spent := acptest.SpendRun(t, node, &eval.Budget{CostUSD: 1})
	if err != nil {
		t.Fatal(err)
	}
	if out != "two" {
		t.Fatalf("out = %q", out)
	}
	if spent.CostUSD < 0.399 || spent.CostUSD > 0.401 || spent.Tokens() != 24 || spent.ModelCalls != 2 {
		t.Fatalf("spent = %+v, want $0.40, 24 tokens, 2 model calls", spent)
	}
}

// A reported cost in another currency, or one below an earlier report,
// charges nothing.
func TestReportedCostIgnoresWhatItCannotCount(t *testing.T) {
	p := costly(t)
	_, err, spent := acptest.SpendRun(t, &eval.Agent{Provider: p, Children: []any{"cost 0.30\ncost 0.20\nsay ok"}}, &eval.Budget{CostUSD: 1})
	if err != nil {
		t.Fatal(err)
	}
	if spent.CostUSD < 0.299 || spent.CostUSD > 0.301 {
		t.Fatalf("spent = %+v, want $0.30", spent)
	}
}

// costly is the fake agent as a provider that reports its cost.
func costly(t *testing.T) *acp.Provider {
	t.Helper()
	cmd, env := acptest.Command()
	p, err := acp.New(acp.Config{Name: "fake", Command: cmd, Env: env, ReportsCost: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An agent whose model's rate limit ends its turn fails as a rate limit
// (eval.RateLimitError, with the wait the agent's error asked for), and
// the evaluator runs the unmetered session again until it gets through.
func TestRateLimitedTurnIsRetried(t *testing.T) {
	tries := filepath.Join(t.TempDir(), "tries")
	p := fake(t, nil)
	rt, err := eval.New(eval.Options{RateLimitRetry: &eval.RateLimitRetry{Attempts: 5}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, &eval.Agent{Provider: p, Children: []any{"ratelimit " + tries + " 2\nsay through"}})
	b, _ := os.ReadFile(tries)
	if err != nil || out != "through" || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("%q, %v after %d sessions; want through after 3", out, err, strings.Count(string(b), "\n"))
	}
	// With retries off the rate limit is the session's error, and says
	// so.
	tries2 := filepath.Join(t.TempDir(), "tries")
	rt, _ = eval.New(eval.Options{RateLimitRetry: &eval.RateLimitRetry{Attempts: 1}})
	_, err = rt.Evaluate(ctx, &eval.Agent{Provider: p, Children: []any{"ratelimit " + tries2 + " 2\nsay through"}})
	var rl *eval.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 50*time.Millisecond {
		t.Fatalf("err = %v (%+v)", err, rl)
	}
}
