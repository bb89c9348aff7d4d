package observe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/observe"
	"github.com/aml-go/aml/providers/deterministic"
)

func TestSummaryCollector(t *testing.T) {
	col := observe.NewSummaryCollector()
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "t", Description: "T.", Execute: func(context.Context, any) (any, error) { return "x", nil }})
	rt, _ := eval.New(eval.Options{AgentProvider: echo(t), Trace: []eval.TraceSink{col}})
	comp := &eval.Component{Name: "C", Fn: func(cc *eval.ComponentContext) (any, error) {
		if _, err := cc.CallTool(tool, eval.NoInput); err != nil {
			return nil, err
		}
		err := cc.TraceSpan("phase", pos(1), func() error {
			_, err := cc.Evaluate(&eval.Agent{Children: []any{"a"}})
			return err
		})
		if err != nil {
			return nil, err
		}
		_ = cc.TraceSpan("phase", pos(1), func() error { return errors.New("phase failed") })
		return &eval.Agent{Children: []any{"b"}}, nil
	}}
	if _, err := rt.Evaluate(context.Background(), comp, eval.EvaluateOptions{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	s, ok := col.ForRun("r1")
	if !ok {
		t.Fatal("no summary for a completed run")
	}
	if s.Status != "ok" || s.AgentSessions.Count != 2 || s.Tools.Count != 1 || s.Applications["phase"].Count != 2 {
		t.Fatalf("summary %+v", s)
	}
	if s.DurationMS < s.AgentSessions.SlowestMS {
		t.Fatalf("run duration %v shorter than a session %v", s.DurationMS, s.AgentSessions.SlowestMS)
	}
	if _, ok := col.ForRun("unknown"); ok {
		t.Fatal("summary for an unknown run")
	}
	col.DeleteRun("r1")
	if _, ok := col.ForRun("r1"); ok {
		t.Fatal("summary kept after DeleteRun")
	}
	if _, err := rt.Evaluate(context.Background(), &eval.FollowUp{}, eval.EvaluateOptions{RunID: "r2"}); err == nil {
		t.Fatal("want an error")
	}
	if s, ok := col.ForRun("r2"); !ok || s.Status != "error" {
		t.Fatalf("failed run summary %+v %v", s, ok)
	}
}

func pos(line int) eval.Position { return eval.Position{File: "t.star", Line: int32(line), Col: 1} }

func echo(t testing.TB) *deterministic.Agent {
	t.Helper()
	a, err := deterministic.New(deterministic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
