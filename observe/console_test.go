package observe_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/observe"
)

func TestConsoleTracerTree(t *testing.T) {
	var b strings.Builder
	ct := observe.NewConsoleTracer(&b, false)
	ct.NoDurations = true
	rt, _ := eval.New(eval.Options{AgentProvider: echo(t), Trace: []eval.TraceSink{ct}})
	if _, err := rt.Evaluate(context.Background(), &eval.Component{Name: "Review", Position: pos(2), Fn: func(cc *eval.ComponentContext) (any, error) {
		return &eval.Agent{Model: "m1", Position: pos(3), Children: []any{"hi"}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	want := `▶ evaluation run
  ▶ component Review aml.source="t.star:2:1"
    ▶ agent Agent aml.source="t.star:3:1" model="m1" provider="deterministic"
      ▶ agent.session aml.source="t.star:3:1" model="m1" provider="deterministic"
      ✓ agent.session
    ✓ agent Agent
  ✓ component Review
✓ evaluation run
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
