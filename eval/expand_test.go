package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// TestExpand checks that Expand returns the tree a body builds, marks
// its context as a dry run, and refuses every effect with a
// *StaticError naming the call, the component and the position.
func TestExpand(t *testing.T) {
	tree := &eval.Agent{Children: []any{"hi"}}
	var dry bool
	got, err := eval.Expand(context.Background(), &eval.Component{Name: "main", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		dry = eval.DryRun(cc.Context())
		if cc.RunID() != "" {
			t.Errorf("RunID in Expand = %q, want none", cc.RunID())
		}
		if err := cc.Read(eval.RecordedRead{Kind: "env", Name: "X", Digest: eval.Fingerprint("v")}); err != nil {
			t.Errorf("Read in Expand: %v", err)
		}
		return tree, nil
	}})
	if err != nil || got != tree || !dry {
		t.Fatalf("Expand = %v, %v (dry run %v); want the tree", got, err, dry)
	}

	tool, err := eval.NewTool(eval.ToolOptions{Name: "t", Description: "A tool.", Execute: func(context.Context, any) (any, error) { return "x", nil }, Position: pos(9)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op   string
		call func(cc *eval.ComponentContext) error
	}{
		{"evaluate()", func(cc *eval.ComponentContext) error { _, err := cc.Evaluate(tree); return err }},
		{"evaluate(schema=...)", func(cc *eval.ComponentContext) error { _, err := cc.EvaluateStructured(tree, nil, pos(3)); return err }},
		{"evaluate_all()", func(cc *eval.ComponentContext) error { _, err := cc.EvaluateAll([]any{tree}, pos(3)); return err }},
		{"evaluate_all(schema=...)", func(cc *eval.ComponentContext) error {
			_, err := cc.EvaluateAllStructured([]any{tree}, nil, pos(3))
			return err
		}},
		{"ask()", func(cc *eval.ComponentContext) error { _, err := cc.Ask("ok?", "", nil, pos(3)); return err }},
		{"calling tool t", func(cc *eval.ComponentContext) error { _, err := cc.CallTool(tool, map[string]any{}); return err }},
		{"with_trace_span()", func(cc *eval.ComponentContext) error {
			return cc.TraceSpan("s", pos(3), func() error { t.Error("the span's body ran"); return nil })
		}},
	} {
		_, err := eval.Expand(context.Background(), &eval.Component{Name: "body", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
			return nil, c.call(cc)
		}})
		var se *eval.StaticError
		if !errors.As(err, &se) || se.Op != c.op || se.Component != "body" || !se.Pos.IsValid() {
			t.Errorf("%s in Expand: %v (%#v)", c.op, err, se)
			continue
		}
		if !strings.Contains(err.Error(), c.op+" in component body needs a run") {
			t.Errorf("%s: message %q", c.op, err)
		}
	}
	if _, err := eval.Expand(context.Background(), &eval.Component{Name: "x"}); err == nil {
		t.Error("Expand of a component without a body did not fail")
	}
}
