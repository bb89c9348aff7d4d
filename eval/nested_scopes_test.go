package eval_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// TestNestedEvaluateSeesScopes checks that a component's evaluate()
// runs inside the workspace() and sandbox() around the component, as
// the same nodes returned in the tree do: file() writes there (through
// a real local sandbox, written back into the workspace when the sandbox
// is released) and include(path=) reads it back.
func TestNestedEvaluateSeesScopes(t *testing.T) {
	ws, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := eval.New(eval.Options{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	write := &eval.Component{Name: "write", Position: pos(3), Fn: func(cc *eval.ComponentContext) (any, error) {
		if _, err := cc.Evaluate(&eval.File{Path: "notes/a.txt", Children: []any{"from the sandbox"}, Position: pos(4)}); err != nil {
			return nil, err
		}
		return cc.Evaluate(&eval.Include{Path: "notes/a.txt", NoTitle: true, Position: pos(5)})
	}}
	read := &eval.Component{Name: "read", Position: pos(6), Fn: func(cc *eval.ComponentContext) (any, error) {
		if _, err := cc.Evaluate(&eval.File{Path: "notes/b.txt", Children: []any{"from the workspace"}, Position: pos(7)}); err != nil {
			return nil, err
		}
		texts, err := cc.EvaluateAll([]any{
			&eval.Include{Path: "notes/a.txt", NoTitle: true, Position: pos(8)},
			&eval.Include{Path: "notes/b.txt", NoTitle: true, Position: pos(9)},
		}, pos(8))
		return strings.Join(texts, "+"), err
	}}
	got, err := rt.Evaluate(context.Background(), &eval.Workspace{Provider: ws, Position: pos(1), Children: []any{
		&eval.Sandbox{Provider: sb, Access: eval.ReadWrite, Position: pos(2), Children: []any{write}},
		"|",
		read,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "from the sandbox|from the sandbox+from the workspace"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
}
