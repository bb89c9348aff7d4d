package eval_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// TestSaveRequestGlobs: the glob rule of the workspace contract, as
// providers apply it to the requests they receive.
func TestSaveRequestGlobs(t *testing.T) {
	if err := (eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Include: []string{"**/*", "src/**", "*.go", ".github/**", "a/{b,c}/*.md", "file[0-9].txt"}}}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "/a", "!a", "../a", "a/..", "src/../x", "a//b", "./a", `a\b`, "[", "a/", "a\x00"} {
		if err := (eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Exclude: []string{bad}}}).Validate(); err == nil {
			t.Errorf("Validate accepted the glob %q", bad)
		}
	}
	if err := (eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: -1}}).Validate(); err == nil {
		t.Error("Validate accepted a negative retention")
	}
	if (eval.WorkspaceSaveRequest{}).RetentionOrDefault() != 1 || (eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 3}}).RetentionOrDefault() != 3 {
		t.Error("RetentionOrDefault")
	}
	if err := (&eval.WorkspaceAcquireRequest{ID: " x"}).Validate(); err == nil {
		t.Error("Validate accepted an untrimmed id")
	}
}

// TestWorkspaceValidatedBeforeChildren: a Go-built workspace node with a
// malformed policy fails in the static check, before its provider is
// acquired and before any child runs.
func TestWorkspaceValidatedBeforeChildren(t *testing.T) {
	for _, c := range []struct {
		name string
		ws   *eval.Workspace
		want string
	}{
		{"save glob", &eval.Workspace{Save: &eval.SavePolicy{On: "success", Include: []string{"src/../x"}}}, `workspace(): save["include"]: invalid workspace glob "src/../x"`},
		{"restore glob", &eval.Workspace{Load: &eval.WorkspaceLoad{Revision: "current", Exclude: []string{"/abs"}}}, `workspace(): restore["exclude"]: invalid workspace glob "/abs"`},
		{"save on", &eval.Workspace{Save: &eval.SavePolicy{On: "later"}}, `save["on"] must be "success" or "always"`},
		{"retention", &eval.Workspace{Save: &eval.SavePolicy{On: "always", Retention: -1}}, `save["retention"] must be a positive integer`},
		{"id", &eval.Workspace{ID: " review"}, `workspace id " review" must be a non-empty trimmed UTF-8 string`},
		{"write concurrency", &eval.Workspace{WriteConcurrency: "paralel"}, `write_concurrency must be "serial" or "parallel", got "paralel"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := echo(t, nil)
			c.ws.Position = pos(3)
			c.ws.Children = []any{&eval.Agent{Provider: p, Children: []any{"child"}}}
			rt, err := eval.New(eval.Options{WorkspaceProvider: panicWorkspace{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = rt.Evaluate(t.Context(), c.ws)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "t.star:3:1: ") {
				t.Fatalf("error = %v, want %q at t.star:3:1", err, c.want)
			}
			if len(p.Calls()) != 0 {
				t.Fatal("a child agent ran before the workspace was validated")
			}
		})
	}
}

// panicWorkspace fails the test by panicking if it is ever acquired.
type panicWorkspace struct{}

func (panicWorkspace) Name() string { return "panic" }
func (panicWorkspace) Acquire(_ context.Context, _ *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	panic("the workspace provider was acquired")
}
