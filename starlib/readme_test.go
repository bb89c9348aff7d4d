package starlib_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go.temporal.io/sdk/client"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/opencode"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal"
)

// The functions between "// readme:begin" and "// readme:end" are the Go
// snippets of README.md and docs/*.md, character for character (TestREADMESnippets
// checks both directions), and the Examples below run them, so the
// README cannot drift from code that compiles and behaves as it says.

// readme:begin
func runWorkflow(ctx context.Context, file string, provider eval.AgentProvider) (string, error) {
	w, err := starlib.LoadFile(file, starlib.LoadOptions{})
	if err != nil {
		return "", err // *starlib.LoadError: syntax, resolve or top-level failure
	}
	limits := eval.Limits{MaxAgentCalls: 8} // zero fields keep their defaults
	return w.Evaluate(ctx, "main", eval.Options{AgentProvider: provider, Limits: &limits})
}

// readme:end

// readme:begin
func report(ctx context.Context, text string, err error) {
	var (
		le *starlib.LoadError    // the file did not load: syntax, resolve or top-level failure
		pe *eval.ParallelError   // every failed branch: Failures[i].Index and .Err
		ee *eval.EvaluationError // placement, limits, provider failures: Pos names the node
	)
	switch {
	case err == nil:
		fmt.Println(text)
	// Cancellation first: it arrives wrapped in an *eval.EvaluationError (or
	// a *eval.ParallelError around one), which the cases below would match.
	case ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		fmt.Println("cancelled:", context.Cause(ctx))
	case errors.As(err, &le):
		fmt.Println("cannot load:", le)
	case errors.As(err, &pe):
		for _, f := range pe.Failures {
			fmt.Printf("branch %d failed: %v\n", f.Index, f.Err)
		}
	case errors.As(err, &ee):
		fmt.Printf("%s: %s\n", ee.Pos, ee.Msg)
	default:
		fmt.Println("failed:", err)
	}
}

// readme:end

// readme:begin
func goNodes(ctx context.Context, provider eval.AgentProvider, diff string) (string, error) {
	rt, err := eval.New(eval.Options{AgentProvider: provider})
	if err != nil {
		return "", err
	}
	return rt.Evaluate(ctx, &eval.Agent{Children: []any{"Review this change:", &eval.Block{Tag: "diff", Children: []any{diff}}}})
}

// readme:end

// readme:begin
func realAgents(key string) (coder, generic *acp.Provider, err error) {
	// Agents without HTTP MCP reach the tool bridge through a stdio relay.
	relay := []string{"/usr/local/bin/aml", "mcp-relay"}
	coder, err = opencode.New(opencode.Options{Base: acp.Base{Model: "openai/gpt-5", Env: map[string]string{"OPENAI_API_KEY": key}, Relay: relay}})
	if err != nil {
		return nil, nil, err
	}
	generic, err = acp.New(acp.Config{Command: "my-acp-agent", Args: []string{"--stdio"}, Relay: relay})
	return coder, generic, err
}

// readme:end

// readme:begin
func submit(ctx context.Context, c client.Client) (string, error) {
	ac := temporal.NewClient(c, "aml") // the task queue of the aml workers
	b, err := temporal.Pack("review.star")
	if err != nil {
		return "", err
	}
	id, err := ac.Start(ctx, b, temporal.StartOptions{})
	if err != nil {
		return "", err
	}
	return ac.Result(ctx, id) // a *temporal.RunError says how the run failed
}

// readme:end

// submit needs a Temporal server: it is compiled, to keep the docs'
// example true, and never called.
var _ = submit

// Example_readme runs the README's embedding snippets: a result, a
// cancellation that reaches its own branch although it arrives inside a
// ParallelError, a failed branch, a placement error and a load error.
func Example_readme() {
	const review = "testdata/readme/review.star"
	echo, _ := deterministic.New(deterministic.Options{})

	ctx := context.Background()
	text, err := runWorkflow(ctx, review, echo)
	report(ctx, text, err)

	// An operator stops the run while the agents work.
	ctx, cancel := context.WithCancelCause(context.Background())
	stopping, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		cancel(errors.New("operator stop"))
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	text, err = runWorkflow(ctx, review, stopping)
	report(ctx, text, err)

	ctx = context.Background()
	picky, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if req.Prompt == "Check style." {
			return nil, errors.New("style guide unavailable")
		}
		return &eval.AgentResponse{Text: "no risks. "}, nil
	}})
	text, err = runWorkflow(ctx, review, picky)
	report(ctx, text, err)

	text, err = runWorkflow(ctx, "testdata/readme/misplaced.star", echo)
	report(ctx, text, err)

	text, err = runWorkflow(ctx, "testdata/readme/broken.star", echo)
	report(ctx, text, err)

	text, err = goNodes(ctx, echo, "+ retry()")
	report(ctx, text, err)
	// Output:
	// Find risks.Check style.
	// cancelled: operator stop
	// branch 1 failed: testdata/readme/review.star:3:48: agent() provider "deterministic" failed: style guide unavailable
	// testdata/readme/misplaced.star:3:30: follow_up() is only valid inside agent(); move it into the agent whose session it continues
	// cannot load: testdata/readme/broken.star:3:12: undefined: agnet (did you mean agent?)
	// Review this change:
	//
	// <diff>
	// + retry()
	// </diff>
}

// Example_readmeProviders builds the README's real agent providers; they
// start no process until an agent runs.
func Example_readmeProviders() {
	coder, generic, err := realAgents("sk-test")
	fmt.Println(coder.Name(), generic.Name(), err)
	// Output: opencode acp <nil>
}

// TestREADMESnippets checks that every Go block of README.md and of the
// pages in docs/ is one of the readme:begin/end regions of this file and
// the other way round.
func TestREADMESnippets(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, p := range append([]string{filepath.Join("..", "README.md")}, pages...) {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(text, -1) {
			blocks = append(blocks, string(m[1]))
		}
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var regions []string
	for _, m := range regexp.MustCompile("(?s)// readme:begin\n(.*?)\n// readme:end").FindAllSubmatch(src, -1) {
		regions = append(regions, string(bytes.TrimRight(m[1], "\n"))+"\n")
	}
	if len(regions) == 0 {
		t.Fatal("no readme regions")
	}
	for _, b := range missing(blocks, regions) {
		t.Errorf("a Go block of README.md or docs/ is not a readme region of readme_test.go (update one to match the other):\n%s", b)
	}
	for _, r := range missing(regions, blocks) {
		t.Errorf("readme region of readme_test.go is missing from README.md and docs/:\n%s", r)
	}
}

// missing returns the elements of want that are not in have.
func missing(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}
