package qwen_test

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
	"github.com/aml-go/aml/providers/agent/qwen"
)

// qwenPkg is the version .ci/run installs.
const qwenPkg = "@qwen-code/qwen-code@0.24.4"

// setup starts the fake model and returns it with a function that makes
// a Qwen Code provider reaching it.
func setup(t *testing.T) (*fakemodel.Server, func(qwen.Options) eval.AgentProvider) {
	t.Helper()
	bin := peers.Bin(t, "qwen", qwenPkg)
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	return model, func(o qwen.Options) eval.AgentProvider {
		t.Helper()
		o.Command = bin
		o.WorkingDirectory = dir
		if o.Model == "" {
			o.Model = "fake-model"
		}
		o.BaseURL = model.URL
		if o.Env == nil {
			o.Env = map[string]string{"OPENAI_API_KEY": "sk-fake"}
		}
		p, err := qwen.New(o)
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

// TestTurns: two turns of one Qwen Code session, the system text in the
// system prompt (not in the prompt), no model call of Qwen Code's own
// (memory extraction, follow-up suggestions) besides the two turns, and
// every tool offered under the default permissions.
func TestTurns(t *testing.T) {
	model, provider := setup(t)
	out, err := evaluate(t, &eval.Agent{Provider: provider(qwen.Options{}), System: "Answer like a pirate.", Children: []any{
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
	for _, name := range []string{"write_file", "edit", "run_shell_command", "web_fetch", "read_file"} {
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

// TestBridgeTool: a Starlark tool reaches Qwen Code through the bridge,
// offered from the first model request; each call asks AML, which allows
// the granted tool, and runs once; and the model gateway counts exactly
// the usage the fake model reported for every request, once (Qwen Code's
// own ACP report of the turn is not added).
func TestBridgeTool(t *testing.T) {
	model, provider := setup(t)
	var calls atomic.Int64
	rec := &tracetest.Recorder{}
	var spent eval.Usage
	rt, _ := eval.New(eval.Options{Trace: []eval.TraceSink{rec}, OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, &eval.Agent{Provider: provider(qwen.Options{}),
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
	if first := model.Requests()[0]; !slices.Contains(first.Tools, "mcp__aml__lookup") {
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

// TestStructuredResult: Qwen Code submits the typed result through the
// bridge's aml_submit_result tool.
func TestStructuredResult(t *testing.T) {
	model, provider := setup(t)
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	out, err := evaluate(t, &eval.Agent{Provider: provider(qwen.Options{}), Schema: s, Children: []any{
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
// HTTP, reach Qwen Code, which calls their tools.
func TestMCPGrants(t *testing.T) {
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			model, provider := setup(t)
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := evaluate(t, &eval.Agent{Provider: provider(qwen.Options{}), Children: []any{
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
	if _, err := evaluate(t, &eval.Agent{Provider: provider(qwen.Options{}), Permissions: &eval.Permissions{Filesystem: eval.ReadOnly},
		Children: []any{"which tools?"}}, nil); err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	strict := model.Requests()[0].Tools
	for _, name := range slices.Concat(qwen.ReadOnlyExcluded, qwen.ShellExcluded, qwen.NetworkExcluded) {
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
	bin := peers.Bin(t, "qwen", qwenPkg)
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		env["OPENAI_API_KEY"] = "sk-fake"
		p, err := qwen.New(qwen.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: t.TempDir(), Env: env}, BaseURL: model.URL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// TestReasoningEffort: reasoning_effort reaches the model's requests as
// Qwen Code sends it (reasoning.effort); without it none is sent.
func TestReasoningEffort(t *testing.T) {
	model, provider := setup(t)
	for _, effort := range []string{"high", ""} {
		if _, err := evaluate(t, &eval.Agent{Provider: provider(qwen.Options{ReasoningEffort: effort}), Children: []any{"think"}}, nil); err != nil {
			dump(t, model)
			t.Fatal(err)
		}
		reqs := model.Requests()
		var body struct {
			Reasoning *struct {
				Effort string `json:"effort"`
			} `json:"reasoning"`
		}
		if err := json.Unmarshal(reqs[len(reqs)-1].Raw, &body); err != nil {
			t.Fatal(err)
		}
		if effort == "" && body.Reasoning != nil || effort != "" && (body.Reasoning == nil || body.Reasoning.Effort != effort) {
			t.Fatalf("reasoning_effort %q: the request carries %+v", effort, body.Reasoning)
		}
	}
	if _, err := qwen.New(qwen.Options{ReasoningEffort: "extreme"}); err == nil || !strings.Contains(err.Error(), `reasoning_effort "extreme" is not one of`) {
		t.Fatalf("a bad effort: %v", err)
	}
}
