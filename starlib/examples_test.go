package starlib_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/starlib"
)

// TestExamples runs every workflow under examples/ credential-free and
// checks its result.
func TestExamples(t *testing.T) {
	cases := []struct {
		file    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{file: "hello.star", want: "Resolved: Explain what AML evaluates."},
		{file: "review.star", want: "Verdict: approve (3 lanes)\n" +
			"- [correctness] no blocking finding in \"add a retry loop around the upload client\"\n" +
			"- [maintainability] no blocking finding in \"add a retry loop around the upload client\"\n" +
			"- [security] no blocking finding in \"add a retry loop around the upload client\""},
		{file: "review.star", env: map[string]string{"CHANGE": "drop the cache"}, want: "Verdict: approve (3 lanes)\n" +
			"- [correctness] no blocking finding in \"drop the cache\"\n" +
			"- [maintainability] no blocking finding in \"drop the cache\"\n" +
			"- [security] no blocking finding in \"drop the cache\""},
		{file: "collect.star", want: "Plan in 2 turns from a 125-character prompt; last turn: Tighten the plan to five steps."},
		{file: "collect.star", env: map[string]string{"RISK": "low"}, want: "Risk is low: no plan needed."},
		{file: "context.star", want: "[Cite the changelog.] Summarize the release for engineers.\n\n\n<costs>\n" +
			"[Cite the changelog.] Summarize the costs for executives.\n</costs>\n\n\n\n<risks>\n" +
			"[Cite the changelog.] Summarize the risks for executives.\n</risks>\n\n"},
		{file: "skill/review.star", want: "skills=evidence-review; system names evidence-review; prompt has no skill body: True"},
		{file: "script.star", want: "many example workflows\nliteral $HOME|no globbing *\nlane: correctness\nlane: security\n"},
		{file: "sandbox.star", want: "main.go\nreviewed: Check the size: 3main.go\n"},
		// Provider directories resolve from the process's working
		// directory, which is starlib/ under go test.
		{file: "workspace_local.star", env: map[string]string{"NOTES_DIR": "../examples/notes"}, want: "summary of 5 lines"},
		{file: "tools.star", want: "direct: 120\nmodel saw lookup_order, list_orders: 120 + 45"},
		{file: "structured.star", want: "synthesized: Explain this high finding: authorization is checked after mutation\n\n" +
			"<raw-finding>\n{\"severity\":\"high\",\"summary\":\"authorization is checked after mutation\"}\n</raw-finding>"},
		{file: "structured.star", env: map[string]string{"SEVERITY": "low"}, want: "No publishable finding."},
		{file: "structured.star", env: map[string]string{"SEVERITY": "medium"}, wantErr: "structured result schema validation failed: /properties/severity: enum: medium"},
		// Without a journal or a terminal nobody can answer approve().
		{file: "release.star", wantErr: "release.star:23:19: ask() has no way to reach a person"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			lo := starlib.LoadOptions{Extensions: allExtensions, Env: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }}
			// Skill and include sources resolve from the repository root, as
			// when the examples run from there.
			root, _ := filepath.Abs("..")
			got, err := starlib.Run(context.Background(), filepath.Join("..", "examples", c.file), "", lo, eval.Options{Cwd: root})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// TestReviewRequests checks the requests the review example sends: system
// text in runtime, prop, child order, and the lanes in authored order.
func TestReviewRequests(t *testing.T) {
	w, err := starlib.LoadFile(filepath.Join("..", "examples", "review.star"), starlib.LoadOptions{Env: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Evaluate(context.Background(), "main", eval.Options{}); err != nil {
		t.Fatal(err)
	}
	p := w.Config.AgentProvider.(*deterministic.Agent)
	calls := p.Calls()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4", len(calls))
	}
	last := calls[3].Request
	if last.System != "Cite evidence from the change for every claim.\nSynthesize only the findings supplied below." {
		t.Fatalf("system %q", last.System)
	}
	i := strings.Index(last.Prompt, "<correctness-review>")
	j := strings.Index(last.Prompt, "<maintainability-review>")
	k := strings.Index(last.Prompt, "<security-review>")
	if i < 0 || !(i < j && j < k) {
		t.Fatalf("lanes not in authored order:\n%s", last.Prompt)
	}
	if !strings.HasPrefix(last.Prompt, "Write the final review of one change from the specialist findings.") {
		t.Fatalf("prompt not dedented and trimmed:\n%q", last.Prompt)
	}
}

// Example_embed loads a workflow, supplies a provider and limits from Go,
// and evaluates it under a context.
func Example_embed() {
	src := []byte(`
def main():
    return agent("Summarize the repository.", system("Be brief."))
`)
	w, err := starlib.LoadFile("inline.star", starlib.LoadOptions{Source: src})
	if err != nil {
		fmt.Println(err)
		return
	}
	provider, _ := deterministic.New(deterministic.Options{
		Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
			return &eval.AgentResponse{Text: "[" + req.System + "] " + req.Prompt}, nil
		},
	})
	limits := eval.Limits{MaxAgentCalls: 4, MaxConcurrentAgents: 2, MaxDepth: 8, MaxTurnsPerAgent: 4}
	text, err := w.Evaluate(context.Background(), "main", eval.Options{AgentProvider: provider, Limits: &limits})
	fmt.Println(text, err)
	// Output: [Be brief.] Summarize the repository. <nil>
}

// Example_typedErrors shows how an embedder inspects a failure.
func Example_typedErrors() {
	src := []byte(`
def main():
    return ["text", follow_up("outside any agent")]
`)
	_, err := starlib.Run(context.Background(), "inline.star", "", starlib.LoadOptions{Source: src}, eval.Options{})
	var ee *eval.EvaluationError
	if errors.As(err, &ee) {
		fmt.Println(ee.Pos)
		fmt.Println(ee.Msg)
	}
	// Output:
	// inline.star:3:30
	// follow_up() is only valid inside agent(); move it into the agent whose session it continues
}

// TestWorkspaceRevisionsExample runs the revisions example twice against
// one store: the second run restores the first run's published files.
func TestWorkspaceRevisionsExample(t *testing.T) {
	store := t.TempDir()
	root, _ := filepath.Abs("..")
	lo := starlib.LoadOptions{Extensions: allExtensions, Env: func(k string) (string, bool) {
		if k == "AML_STORE" {
			return store, true
		}
		return "", false
	}}
	for _, want := range []string{"run 1", "run 2"} {
		got, err := starlib.Run(context.Background(), filepath.Join("..", "examples", "workspace_revisions.star"), "", lo, eval.Options{Cwd: root})
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
}
