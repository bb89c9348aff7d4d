package eval_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// TestCycleGoTree: a tree built in Go that contains its own node fails
// with a cycle error before any provider runs, even with max_depth off.
func TestCycleGoTree(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree func() any
	}{
		{"agent in itself", func() any {
			a := &eval.Agent{Position: pos(1)}
			a.Children = []any{"x", a}
			return a
		}},
		{"through a block and a list", func() any {
			a := &eval.Agent{Position: pos(2)}
			b := &eval.Block{Position: pos(3)}
			a.Children = []any{[]any{b}}
			b.Children = []any{a}
			return []any{"head", a}
		}},
		{"deep below the root", func() any {
			a := &eval.Agent{Position: pos(4)}
			a.Children = []any{&eval.Fragment{Children: []any{&eval.Block{Children: []any{a}}}}}
			var root any = a
			for i := 0; i < 100; i++ {
				root = &eval.Block{Children: []any{root}}
			}
			return root
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := echo(t, nil)
			_, err := run(t, p, &eval.Limits{MaxDepth: eval.Unlimited}, tc.tree())
			if err == nil || !strings.Contains(err.Error(), "cycle: ") || !strings.Contains(err.Error(), "contains itself") {
				t.Fatalf("got %v, want a cycle error", err)
			}
			if len(p.Calls()) != 0 {
				t.Fatal("a provider ran before the cycle error")
			}
		})
	}
}

// TestCycleComponent: a component whose value contains its own node fails
// with an error that names the cycle, through returned values and through
// nested evaluate(); the same node evaluated side by side is no cycle.
func TestCycleComponent(t *testing.T) {
	var self *eval.Component
	self = &eval.Component{Name: "Self", Position: pos(5), Fn: func(*eval.ComponentContext) (any, error) {
		return []any{"again ", self}, nil
	}}
	_, err := run(t, echo(t, nil), &eval.Limits{MaxDepth: eval.Unlimited}, &eval.Agent{Children: []any{self}})
	if err == nil || !strings.Contains(err.Error(), "t.star:5:1: cycle: component Self is evaluated inside itself (Self at t.star:5:1 → Self at t.star:5:1)") {
		t.Fatalf("returned value: %v", err)
	}

	var a, b *eval.Component
	a = &eval.Component{Name: "A", Position: pos(6), Fn: func(cc *eval.ComponentContext) (any, error) {
		return cc.Evaluate(b)
	}}
	b = &eval.Component{Name: "B", Position: pos(7), Fn: func(cc *eval.ComponentContext) (any, error) {
		return cc.EvaluateAll([]any{"x", a}, pos(7))
	}}
	_, err = run(t, echo(t, nil), &eval.Limits{MaxDepth: eval.Unlimited}, a)
	if err == nil || !strings.Contains(err.Error(), "cycle: component A is evaluated inside itself (A at t.star:6:1 → B at t.star:7:1 → A at t.star:6:1)") {
		t.Fatalf("through evaluate: %v", err)
	}

	// With the depth limit on, the cycle is still reported as a cycle.
	_, err = run(t, echo(t, nil), nil, &eval.Agent{Children: []any{self}})
	if err == nil || !strings.Contains(err.Error(), "cycle: component Self") {
		t.Fatalf("with max_depth 16: %v", err)
	}

	leaf := &eval.Component{Name: "Leaf", Fn: func(cc *eval.ComponentContext) (any, error) {
		return &eval.Agent{Children: []any{"leaf"}}, nil
	}}
	got, err := run(t, echo(t, nil), nil, []any{leaf, "|", &eval.Parallel{Branches: []any{leaf, leaf, leaf}}, "|", leaf})
	if err != nil || got != "leaf|leafleafleaf|leaf" {
		t.Fatalf("shared node: %q, %v", got, err)
	}
}
