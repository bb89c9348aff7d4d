package gemini_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/gemini"
)

// geminiPkg is the version .ci/run installs.
const geminiPkg = "@google/gemini-cli@0.61.0"

// setup starts the fake model and returns it with a function that makes
// a Gemini CLI provider reaching it.
func setup(t *testing.T) (*fakemodel.Server, func(gemini.Options) eval.AgentProvider) {
	t.Helper()
	bin := peers.Bin(t, "gemini", geminiPkg)
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	return model, func(o gemini.Options) eval.AgentProvider {
		t.Helper()
		o.Command = bin
		o.WorkingDirectory = dir
		if o.Model == "" {
			o.Model = "fake-model"
		}
		o.BaseURL = model.GeminiURL
		if o.Env == nil {
			o.Env = map[string]string{"GEMINI_API_KEY": "g-fake"}
		}
		p, err := gemini.New(o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func evaluate(t *testing.T, node any, rec *tracetest.Recorder) (string, error) {
	t.Helper()
	opts := eval.Options{}
	if rec != nil {
		opts.Trace = []eval.TraceSink{rec}
	}
	rt, _ := eval.New(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return rt.Evaluate(ctx, node)
}

// dump logs what the fake model received.
func dump(t *testing.T, model *fakemodel.Server) {
	t.Helper()
	for i, r := range model.Requests() {
		t.Logf("request %d: %s tools=%v", i, r.API, r.Tools)
		for _, m := range r.Messages {
			text := m.Text
			if len(text) > 200 {
				text = text[:200] + "…"
			}
			t.Logf("  %s: %q %v", m.Role, text, m.ToolCalls)
		}
	}
}

// TestTurns: two turns of one Gemini CLI session, the system text in the
// system prompt (not in the prompt), no model call of Gemini CLI's own
// (memory extraction, follow-up suggestions) besides the two turns, and
// every tool offered under the default permissions.
func TestTurns(t *testing.T) {
	model, provider := setup(t)
	out, err := evaluate(t, &eval.Agent{Provider: provider(gemini.Options{}), System: "Answer like a pirate.", Children: []any{
		"first question", &eval.FollowUp{Children: []any{"second question"}},
	}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if out != "FAKE-REPLY: second question" {
		dump(t, model)
		t.Fatalf("result = %q", out)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		dump(t, model)
		t.Fatalf("%d model requests, want the two turns' only", len(reqs))
	}
	// With the default permissions (every one) the model is offered the
	// writing, shell and fetch tools that TestReadOnly withholds.
	for _, name := range []string{"write_file", "replace", "run_shell_command", "web_fetch", "read_file"} {
		if !slices.Contains(reqs[0].Tools, name) {
			t.Errorf("default permissions: %s not offered (%v)", name, reqs[0].Tools)
		}
	}
	for _, r := range reqs {
		if r.Messages[0].Role != "system" || !strings.Contains(r.Messages[0].Text, "Answer like a pirate.") {
			t.Fatalf("the system text is not in the system prompt")
		}
		for _, m := range r.Messages[1:] {
			if m.Role == "user" && strings.Contains(m.Text, "Answer like a pirate.") {
				t.Fatalf("the system text is in a user message too")
			}
		}
	}
}

// lookupTool is a bridge tool that counts its calls.
func lookupTool(calls *atomic.Int64) *eval.Tool {
	tool, err := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Looks a record up.",
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			m, _ := input.(map[string]any)
			return fmt.Sprintf("Record %v", m["id"]), nil
		}})
	if err != nil {
		panic(err)
	}
	return tool
}

// TestBridgeTool: a Starlark tool reaches Gemini CLI through the bridge,
// offered from the first model request; each call asks AML, which allows
// the granted tool, and runs once; and the model gateway counts exactly
// the usage the fake model reported for every request, once (Gemini CLI's
// own ACP report of the turn is not added).
func TestBridgeTool(t *testing.T) {
	model, provider := setup(t)
	var calls atomic.Int64
	rec := &tracetest.Recorder{}
	var spent eval.Usage
	rt, _ := eval.New(eval.Options{Trace: []eval.TraceSink{rec}, OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, &eval.Agent{Provider: provider(gemini.Options{}),
		Children: []any{&eval.ToolGrant{Tool: lookupTool(&calls)}, "CALL lookup {\"id\": 9}\nCALL lookup {\"id\": 4}"}})
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	requests := int64(len(model.Requests()))
	if calls.Load() != 2 || out != "RESULT: Record 4" || requests != 3 {
		dump(t, model)
		t.Fatalf("calls %d, result %q, %d model requests", calls.Load(), out, requests)
	}
	if first := model.Requests()[0]; !slices.Contains(first.Tools, "mcp_aml_lookup") {
		t.Fatalf("the first model request offers %v, without the bridge's tool", first.Tools)
	}
	var granted int
	for _, e := range rec.Named("acp.session.permission") {
		if e.Attributes["granted"] == true && e.Attributes["decision"] == "allow_once" {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("granted permission requests = %d, want 2", granted)
	}
	if spent.InputTokens != 10*requests || spent.OutputTokens != 5*requests || spent.ModelCalls != requests {
		t.Fatalf("counted %+v for %d model requests of 10 and 5 tokens", spent, requests)
	}
}

// TestStructuredResult: Gemini CLI submits the typed result through the
// bridge's aml_submit_result tool.
func TestStructuredResult(t *testing.T) {
	model, provider := setup(t)
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	out, err := evaluate(t, &eval.Agent{Provider: provider(gemini.Options{}), Schema: s, Children: []any{
		`CALL aml_submit_result {"result": {"verdict": "fail"}}`,
	}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if out != `{"verdict":"fail"}` {
		t.Fatalf("result = %q", out)
	}
}

// TestMCPGrants: granted MCP servers, over stdio and over streamable
// HTTP, reach Gemini CLI, which calls their tools.
func TestMCPGrants(t *testing.T) {
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			model, provider := setup(t)
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := evaluate(t, &eval.Agent{Provider: provider(gemini.Options{}), Children: []any{
				&eval.MCPGrant{Server: srv}, `CALL echo {"message": "via-` + tc.Name + `"}`,
			}}, nil)
			if err != nil {
				dump(t, model)
				t.Fatal(err)
			}
			if out != "RESULT: Echo: via-"+tc.Name {
				dump(t, model)
				t.Fatalf("result = %q", out)
			}
		})
	}
}

// TestReadOnly: under filesystem "read-only", shell=False and
// network=False the model is offered none of the tools that write files,
// run commands or fetch (TestTurns shows them offered otherwise); reading
// stays.
func TestReadOnly(t *testing.T) {
	model, provider := setup(t)
	if _, err := evaluate(t, &eval.Agent{Provider: provider(gemini.Options{}), Permissions: &eval.Permissions{Filesystem: eval.ReadOnly},
		Children: []any{"which tools?"}}, nil); err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	strict := model.Requests()[0].Tools
	for _, name := range slices.Concat(gemini.ReadOnlyExcluded, gemini.ShellExcluded, gemini.NetworkExcluded) {
		if slices.Contains(strict, name) {
			t.Errorf("read-only, no shell, no network: %s offered (%v)", name, strict)
		}
	}
	if !slices.Contains(strict, "read_file") || !slices.Contains(strict, "grep_search") {
		t.Errorf("read-only: the reading tools are not offered (%v)", strict)
	}
}

// TestCancelEndsTheProcessTree: cancelling a run mid-turn, while the
// model has not answered, ends the agent and every process it started.
func TestCancelEndsTheProcessTree(t *testing.T) {
	bin := peers.Bin(t, "gemini", geminiPkg)
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		env["GEMINI_API_KEY"] = "g-fake"
		p, err := gemini.New(gemini.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: t.TempDir(), Env: env}, BaseURL: model.GeminiURL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// TestThinkingBudget: thinking_budget reaches the model's requests as the
// generation config's thinking budget; without it none is set.
func TestThinkingBudget(t *testing.T) {
	model, provider := setup(t)
	for _, budget := range []int{512, 0} {
		if _, err := evaluate(t, &eval.Agent{Provider: provider(gemini.Options{ThinkingBudget: budget}), Children: []any{"think"}}, nil); err != nil {
			dump(t, model)
			t.Fatal(err)
		}
		reqs := model.Requests()
		var body struct {
			GenerationConfig struct {
				ThinkingConfig struct {
					ThinkingBudget *int `json:"thinkingBudget"`
				} `json:"thinkingConfig"`
			} `json:"generationConfig"`
		}
		if err := json.Unmarshal(reqs[len(reqs)-1].Raw, &body); err != nil {
			t.Fatal(err)
		}
		got := body.GenerationConfig.ThinkingConfig.ThinkingBudget
		if budget == 0 && got != nil || budget != 0 && (got == nil || *got != budget) {
			t.Fatalf("thinking_budget %d: the request carries %v (%s)", budget, got, reqs[len(reqs)-1].Raw[:min(len(reqs[len(reqs)-1].Raw), 300)])
		}
	}
}
