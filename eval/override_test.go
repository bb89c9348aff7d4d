package eval_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

func named(t testing.TB, name string, f func(req *eval.AgentRequest) string) *deterministic.Agent {
	t.Helper()
	a, err := deterministic.New(deterministic.Options{Name: name, Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		return &eval.AgentResponse{Text: f(req)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestProviderOverride checks that Options.ProviderOverride sees the
// provider selected for each agent (the node's own, else the default, else
// nil), that the provider it returns is the one called, and that it runs
// concurrently for parallel branches.
func TestProviderOverride(t *testing.T) {
	def := named(t, "default", func(*eval.AgentRequest) string { return "real default" })
	prop := named(t, "prop", func(*eval.AgentRequest) string { return "real prop" })
	twins := map[eval.AgentProvider]*deterministic.Agent{}
	for _, p := range []*deterministic.Agent{def, prop} {
		name := p.Name()
		twins[p] = named(t, name, func(req *eval.AgentRequest) string { return name + " twin: " + req.Prompt })
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	rt, err := eval.New(eval.Options{
		AgentProvider: def,
		ProviderOverride: func(p eval.AgentProvider) eval.AgentProvider {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, p.Name())
			return twins[p]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Evaluate(context.Background(), &eval.Parallel{Branches: []any{
		&eval.Agent{Children: []any{"a"}},
		" | ",
		&eval.Agent{Provider: prop, Children: []any{"b"}},
		" | ",
		&eval.Agent{Children: []any{"c"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "default twin: a | prop twin: b | default twin: c"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for _, n := range seen {
		counts[n]++
	}
	if counts["default"] != 2 || counts["prop"] != 1 || len(seen) != 3 {
		t.Errorf("override saw %q, want default twice and prop once", seen)
	}
	if len(def.Calls()) != 0 || len(prop.Calls()) != 0 {
		t.Error("a replaced provider was called")
	}
	if len(twins[def].Calls()) != 2 || len(twins[prop].Calls()) != 1 {
		t.Errorf("twins called %d and %d times, want 2 and 1", len(twins[def].Calls()), len(twins[prop].Calls()))
	}
}

// TestProviderOverrideNoProvider checks that the override receives nil
// when no provider is selected, may supply one, and that returning nil
// fails the agent as a missing provider does.
func TestProviderOverrideNoProvider(t *testing.T) {
	supplied := named(t, "supplied", func(req *eval.AgentRequest) string { return "supplied: " + req.Prompt })
	var gotNil bool
	rt, err := eval.New(eval.Options{ProviderOverride: func(p eval.AgentProvider) eval.AgentProvider {
		gotNil = p == nil
		return supplied
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Evaluate(context.Background(), &eval.Agent{Children: []any{"x"}})
	if err != nil || got != "supplied: x" || !gotNil {
		t.Fatalf("got %q, %v (override saw nil: %v)", got, err, gotNil)
	}

	dropped := echo(t, nil)
	rt, err = eval.New(eval.Options{AgentProvider: dropped, ProviderOverride: func(eval.AgentProvider) eval.AgentProvider { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Position: pos(4), Children: []any{"x"}})
	if err == nil || !strings.Contains(err.Error(), "t.star:4:1: agent() has no provider") {
		t.Fatalf("error %v, want the no-provider error", err)
	}
	if len(dropped.Calls()) != 0 {
		t.Fatal("the dropped provider ran")
	}
}

// TestProviderOverrideCapabilities checks that capability checks apply to
// the replacement, not to the provider it replaced.
func TestProviderOverrideCapabilities(t *testing.T) {
	tool, err := eval.NewTool(eval.ToolOptions{Name: "s", Description: "String input.", Input: mustSchema(t, map[string]any{"type": "string"}),
		Execute: func(context.Context, any) (any, error) { return "x", nil }})
	if err != nil {
		t.Fatal(err)
	}
	strict := objectProvider{echo(t, nil)}
	rt, err := eval.New(eval.Options{AgentProvider: echo(t, nil), ProviderOverride: func(eval.AgentProvider) eval.AgentProvider { return strict }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Position: pos(2), Children: []any{&eval.ToolGrant{Tool: tool, Position: pos(3)}, "x"}})
	if err == nil || !strings.Contains(err.Error(), `t.star:3:1: tool "s" cannot be granted to provider`) {
		t.Fatalf("error %v, want the replacement's capability check", err)
	}
}
