package acptest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// CheckCredentialHint checks a profile's acp.Launch.CredentialHint with
// the fake agent, which here fails initialize: newProvider builds the
// profile over base (the fake's command and environment). While none of
// vars is set, the session's error must hold want; once any one of them
// is set in the host environment, it must not. It sets the process
// environment, so the calling test must not run in parallel.
func CheckCredentialHint(t *testing.T, newProvider func(base acp.Base) (*acp.Provider, error), want string, vars ...string) {
	t.Helper()
	for _, v := range vars {
		t.Setenv(v, "")
	}
	if err := FailedSession(t, newProvider); !strings.Contains(err.Error(), want) {
		t.Errorf("with no credential, the error does not say what to set (%q):\n%v", want, err)
	}
	for _, v := range vars {
		t.Setenv(v, "set")
		if err := FailedSession(t, newProvider); strings.Contains(err.Error(), want) {
			t.Errorf("with %s set, the error still asks for a credential:\n%v", v, err)
		}
		t.Setenv(v, "")
	}
}

// FailedSession runs one session of the profile newProvider builds over
// the fake agent in a mode that refuses initialize, and returns the
// session's error.
func FailedSession(t *testing.T, newProvider func(base acp.Base) (*acp.Provider, error)) error {
	t.Helper()
	cmd, env := Command()
	env["AML_FAKE_ACP_MODE"] = "exit-init"
	p, err := newProvider(acp.Base{Command: cmd, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), &eval.AgentRequest{Prompt: "x", Permissions: eval.DefaultPermissions()}, nil)
	if err == nil {
		t.Fatal("the fake agent that refuses to initialize did not fail the session")
	}
	return err
}

// SpendRun evaluates node under budget (nil for none), as a run does,
// and returns its result, its error and what it counted spent.
//
//lint:ignore ST1008 result, error, then what the run spent: the spend is reported whatever the error
func SpendRun(t *testing.T, node any, budget *eval.Budget) (string, error, eval.Usage) {
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

// Counter is a tool grant "count" that returns how many times it ran,
// and that count, for tests that make an agent loop on a tool.
func Counter(t *testing.T) (*eval.ToolGrant, *atomic.Int64) {
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

// CheckCostBudget runs the agent node makes (of a metered profile whose
// model is "fake-model", or PROVIDER/fake-model, and which makes at least
// three model requests of 10 input and 5 output tokens each) twice. Under
// a cost_usd budget of $0.05 with a price of $0.02 a request, it stops at
// the third request, and the cost counted is what the metered tokens
// cost. Under the same budget with no price for its model, it is refused
// before any request reaches the model. requests counts the requests the
// fake model received so far.
func CheckCostBudget(t *testing.T, node func() *eval.Agent, requests func() int) {
	t.Helper()
	before := requests()
	prices := map[string]eval.Price{"fake-model": {Input: 1000, Output: 2000}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var spent eval.Usage
	rt, err := eval.New(eval.Options{Budget: &eval.Budget{CostUSD: 0.05}, Prices: prices, OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(ctx, node())
	var be *eval.BudgetError
	made := requests() - before
	if !errors.As(err, &be) || be.Budget != "cost_usd" || made != 3 || math.Abs(spent.CostUSD-0.06) > 1e-9 || spent.Tokens() != 45 {
		t.Fatalf("under a $0.05 budget: %v after %d requests, %+v counted; want the cost_usd budget crossed at the third, $0.06", err, made, spent)
	}
	before = requests()
	rt, _ = eval.New(eval.Options{Budget: &eval.Budget{CostUSD: 0.05}})
	_, err = rt.Evaluate(ctx, node())
	if err == nil || !strings.Contains(err.Error(), "has no price") || requests() != before {
		t.Fatalf("without a price: %v after %d requests; want a refusal before any", err, requests()-before)
	}
}
