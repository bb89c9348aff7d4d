package eval_test

import (
	"context"
	"testing"

	"github.com/aml-go/aml/eval"
)

func TestTraceSpanParentsNestedWork(t *testing.T) {
	sink := &recordingSink{}
	rt, _ := eval.New(eval.Options{AgentProvider: echo(t, nil), Trace: []eval.TraceSink{sink}})
	var detached *eval.ComponentContext
	_, err := rt.Evaluate(context.Background(), &eval.Component{Name: "C", Fn: func(cc *eval.ComponentContext) (any, error) {
		detached = cc
		return nil, cc.TraceSpan("outer", pos(1), func() error {
			return cc.TraceSpan("inner", pos(2), func() error {
				_, err := cc.EvaluateAll([]any{&eval.Agent{Children: []any{"a"}}, &eval.Agent{Children: []any{"b"}}}, pos(3))
				return err
			})
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	parent := map[string]string{}
	for _, e := range sink.events {
		if e.Type == eval.SpanStart {
			ids[e.SpanID] = e.Name
			parent[e.SpanID] = e.ParentSpanID
		}
	}
	agents := 0
	for id, name := range ids {
		switch name {
		case "inner":
			if ids[parent[id]] != "outer" {
				t.Errorf("inner's parent is %q", ids[parent[id]])
			}
		case "Agent":
			agents++
			if ids[parent[id]] != "inner" {
				t.Errorf("agent's parent is %q, want inner", ids[parent[id]])
			}
		}
	}
	if agents != 2 {
		t.Fatalf("%d agent spans", agents)
	}
	if err := detached.TraceSpan("late", pos(4), func() error { return nil }); err == nil {
		t.Fatal("TraceSpan after the component returned must fail")
	}
}
