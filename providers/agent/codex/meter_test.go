package codex_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// spendRun evaluates node under budget and returns the result, the
// error and what the run counted.
func spendRun(t *testing.T, node any, budget *eval.Budget) (string, error, eval.Usage) {
	t.Helper()
	var spent eval.Usage
	rt, err := eval.New(eval.Options{Budget: budget, OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, node)
	return out, err, spent
}

func counter(t *testing.T) (*eval.ToolGrant, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	tool, err := eval.NewTool(eval.ToolOptions{Name: "count", Description: "Counts.", Execute: func(context.Context, any) (any, error) {
		return calls.Add(1), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &eval.ToolGrant{Tool: tool}, &calls
}

// TestMeteredThroughTheGateway: Codex's Responses API calls go through
// AML's model gateway, which counts exactly the usage the fake model
// reported for every request it received, once.
func TestMeteredThroughTheGateway(t *testing.T) {
	model, p := setup(t, nil)
	grant, calls := counter(t)
	out, err, spent := spendRun(t, &eval.Agent{Provider: p, Children: []any{grant, strings.Repeat("CALL count {}\n", 3)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	requests := int64(len(model.Requests()))
	if !strings.Contains(out, "RESULT: ") || calls.Load() != 3 || requests < 4 {
		t.Fatalf("result %q, %d tool calls, %d model requests", out, calls.Load(), requests)
	}
	if spent.InputTokens != 10*requests || spent.OutputTokens != 5*requests || spent.ModelCalls != requests {
		t.Fatalf("counted %+v for %d model requests of 10 and 5 tokens", spent, requests)
	}
}

// TestTokenBudgetStopsAToolLoop: a tool loop inside one turn stops at the
// call that reaches the run's token budget.
func TestTokenBudgetStopsAToolLoop(t *testing.T) {
	model, p := setup(t, nil)
	grant, _ := counter(t)
	_, err, spent := spendRun(t, &eval.Agent{Provider: p, Children: []any{grant, strings.Repeat("CALL count {}\n", 30)}}, &eval.Budget{Tokens: 100})
	var be *eval.BudgetError
	if !errors.As(err, &be) || be.Budget != "tokens" {
		t.Fatalf("want a tokens budget error, got %v", err)
	}
	if requests := len(model.Requests()); requests != 7 || spent.Tokens() != 105 {
		t.Fatalf("%d model requests, %d tokens counted; want 7 and 105", requests, spent.Tokens())
	}
}
