package glm_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

// spendRun evaluates node with opts' budget and returns the error and
// what the run counted.
//
//lint:ignore ST1008 result, error, then what the run spent: the spend is reported whatever the error
func spendRun(t *testing.T, node any, budget *eval.Budget, rec *tracetest.Recorder) (string, error, eval.Usage) {
	t.Helper()
	var spent eval.Usage
	opts := eval.Options{Budget: budget, OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }}
	if rec != nil {
		opts.Trace = []eval.TraceSink{rec}
	}
	rt, err := eval.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, node)
	return out, err, spent
}

// loopTool is a bridge tool and a prompt that makes the agent call it n
// times, one model request per call, then answer: n+1 model calls.
func loopTool(t *testing.T, n int) (*eval.ToolGrant, string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	tool, err := eval.NewTool(eval.ToolOptions{Name: "count", Description: "Counts.", Execute: func(context.Context, any) (any, error) {
		return calls.Add(1), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &eval.ToolGrant{Tool: tool}, strings.Repeat("CALL count {}\n", n), &calls
}

// TestMeteredThroughTheGateway: the real adapter's model calls go through
// AML's model gateway, which counts exactly the usage the fake model
// reported (10 input and 5 output tokens a call), once: the adapter's own
// ACP report is not added.
func TestMeteredThroughTheGateway(t *testing.T) {
	model, p, _ := setup(t)
	grant, prompt, calls := loopTool(t, 4)
	rec := &tracetest.Recorder{}
	out, err, spent := spendRun(t, &eval.Agent{Provider: p, Children: []any{grant, prompt}}, nil, rec)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	requests := int64(len(model.Requests()))
	if out != "RESULT: 4" || calls.Load() != 4 || requests != 5 {
		dump(t, model)
		t.Fatalf("result %q, %d tool calls, %d model requests", out, calls.Load(), requests)
	}
	if want := (eval.Usage{InputTokens: 10 * requests, OutputTokens: 5 * requests, ModelCalls: requests, ToolCalls: 4}); spent != want {
		t.Fatalf("counted %+v, want %+v", spent, want)
	}
	// Each call is a model.call span under the turn that made it, with
	// the GenAI attributes of what it spent.
	var metered int
	turns := map[string]bool{}
	for _, e := range rec.Events() {
		if e.Name == "agent.turn" && e.Type == eval.SpanStart {
			turns[e.SpanID] = true
		}
		if e.Name == "model.call" && e.Type == eval.SpanStart {
			if !turns[e.ParentSpanID] || e.Attributes["gen_ai.usage.input_tokens"] != int64(10) || e.Attributes["gen_ai.operation.name"] != "chat" {
				t.Errorf("model.call span %v under %s", e.Attributes, e.ParentSpanID)
			}
		}
		if e.Name == "model.call" && e.Type == eval.SpanEnd && e.Kind == "model" {
			metered++
		}
	}
	if metered != int(requests) {
		t.Errorf("%d model.call spans for %d requests", metered, requests)
	}
}

// TestTokenBudgetStopsAToolLoop: an agent looping on a tool inside one
// turn is stopped by the run's token budget at the call that reaches it:
// no model request leaves after that.
func TestTokenBudgetStopsAToolLoop(t *testing.T) {
	model, p, _ := setup(t)
	grant, prompt, _ := loopTool(t, 20)
	_, err, spent := spendRun(t, &eval.Agent{Provider: p, Children: []any{grant, prompt}}, &eval.Budget{Tokens: 40}, nil)
	var be *eval.BudgetError
	if !errors.As(err, &be) || be.Budget != "tokens" {
		dump(t, model)
		t.Fatalf("want a tokens budget error, got %v", err)
	}
	// 15 tokens a call: the third reaches 45 and stops the turn; a
	// fourth would be refused before it leaves.
	if requests := len(model.Requests()); requests != 3 || spent.Tokens() != 45 {
		dump(t, model)
		t.Fatalf("%d model requests, %d tokens counted; want 3 and 45", requests, spent.Tokens())
	}
}

// TestCostBudget: a cost_usd budget with a price table stops the adapter
// at the call that crosses it; without a price it never starts.
func TestCostBudget(t *testing.T) {
	model, p, _ := setup(t)
	grant, prompt, _ := loopTool(t, 20)
	acptest.CheckCostBudget(t, func() *eval.Agent {
		return &eval.Agent{Provider: p, Children: []any{grant, prompt}}
	}, func() int { return len(model.Requests()) })
}
