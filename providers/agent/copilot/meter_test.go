package copilot_test

import (
	"errors"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/copilot"
)

// threeTurns is an agent of three turns: three model requests.
func threeTurns(p eval.AgentProvider) *eval.Agent {
	return &eval.Agent{Provider: p, Children: []any{"one", &eval.FollowUp{Children: []any{"two"}}, &eval.FollowUp{Children: []any{"three"}}}}
}

// TestMeteredThroughTheGateway: Copilot's calls to a model endpoint
// of the user's own go through AML's model gateway, which counts exactly the
// usage the fake model reported for every request it received, once.
func TestMeteredThroughTheGateway(t *testing.T) {
	model, provider := setup(t, nil, "")
	p := provider(copilot.Options{})
	out, err, spent := acptest.SpendRun(t, threeTurns(p), nil)
	if err != nil {
		t.Fatal(err)
	}
	requests := int64(len(model.Requests()))
	if out != "FAKE-REPLY: three" || requests < 3 {
		t.Fatalf("result %q, %d model requests", out, requests)
	}
	if spent.InputTokens != 10*requests || spent.OutputTokens != 5*requests || spent.ModelCalls != requests {
		t.Fatalf("counted %+v for %d model requests of 10 and 5 tokens", spent, requests)
	}
}

// TestTokenBudgetStopsTheSession: the second turn's call crosses a budget
// of 20 tokens and the third turn never starts.
func TestTokenBudgetStopsTheSession(t *testing.T) {
	model, provider := setup(t, nil, "")
	p := provider(copilot.Options{})
	_, err, spent := acptest.SpendRun(t, threeTurns(p), &eval.Budget{Tokens: 20})
	var be *eval.BudgetError
	if !errors.As(err, &be) || be.Budget != "tokens" {
		t.Fatalf("want a tokens budget error, got %v", err)
	}
	if requests := len(model.Requests()); requests != 2 || spent.Tokens() != 30 {
		t.Fatalf("%d model requests, %d tokens counted; want 2 and 30", requests, spent.Tokens())
	}
}

// TestCostBudget: a cost_usd budget with a price table stops Copilot at
// the call that crosses it (the third turn's); without a price it never
// starts.
func TestCostBudget(t *testing.T) {
	model, provider := setup(t, nil, "")
	p := provider(copilot.Options{})
	acptest.CheckCostBudget(t, func() *eval.Agent { return threeTurns(p) }, func() int { return len(model.Requests()) })
}
