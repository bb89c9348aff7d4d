package qwen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/qwen"
)

// TestMeteredThroughTheGateway: Qwen Code's model calls go through AML's
// model gateway, which counts exactly the usage the fake model reported
// for every request it received, once (Qwen Code's own ACP report of the
// turn is not added).
func TestMeteredThroughTheGateway(t *testing.T) {
	model, provider := setup(t)
	grant, calls := acptest.Counter(t)
	out, err, spent := acptest.SpendRun(t, &eval.Agent{Provider: provider(qwen.Options{}), Children: []any{grant, strings.Repeat("CALL count {}\n", 3)}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	requests := int64(len(model.Requests()))
	if out != "RESULT: 3" || calls.Load() != 3 || requests != 4 {
		dump(t, model)
		t.Fatalf("result %q, %d tool calls, %d model requests", out, calls.Load(), requests)
	}
	if spent.InputTokens != 10*requests || spent.OutputTokens != 5*requests || spent.ModelCalls != requests {
		t.Fatalf("counted %+v for %d model requests of 10 and 5 tokens", spent, requests)
	}
}

// TestTokenBudgetStopsAToolLoop: a tool loop inside one turn stops at the
// call that reaches the run's token budget.
func TestTokenBudgetStopsAToolLoop(t *testing.T) {
	model, provider := setup(t)
	grant, _ := acptest.Counter(t)
	_, err, spent := acptest.SpendRun(t, &eval.Agent{Provider: provider(qwen.Options{}), Children: []any{grant, strings.Repeat("CALL count {}\n", 30)}}, &eval.Budget{Tokens: 100})
	var be *eval.BudgetError
	if !errors.As(err, &be) || be.Budget != "tokens" {
		t.Fatalf("want a tokens budget error, got %v", err)
	}
	// 15 tokens a request: the seventh reaches 105; none leaves after it.
	if requests := len(model.Requests()); requests != 7 || spent.Tokens() != 105 {
		t.Fatalf("%d model requests, %d tokens counted; want 7 and 105", requests, spent.Tokens())
	}
}

// TestCostBudget: a cost_usd budget with a price table stops Qwen Code at
// the call that crosses it; without a price it never starts.
func TestCostBudget(t *testing.T) {
	model, provider := setup(t)
	grant, _ := acptest.Counter(t)
	acptest.CheckCostBudget(t, func() *eval.Agent {
		return &eval.Agent{Provider: provider(qwen.Options{}), Children: []any{grant, strings.Repeat("CALL count {}\n", 30)}}
	}, func() int { return len(model.Requests()) })
}

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return qwen.New(qwen.Options{Base: b}) },
		"qwen_agent found no API key: set OPENAI_API_KEY, or pass api_key = ...", "OPENAI_API_KEY")
}
