package opencode_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/opencode"
)

// opencodePkg is the version .ci/run installs.
const opencodePkg = "opencode-ai@1.18.33"

// setup starts the fake model and returns an OpenCode provider wired to it
// with isolated state.
func setup(t *testing.T) (*fakemodel.Server, func(opts opencode.Options) eval.AgentProvider) {
	t.Helper()
	bin := peers.Bin(t, "opencode", opencodePkg)
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	return model, providerFor(t, bin, model, nil)
}

// providerFor returns a function that makes OpenCode providers against
// model, with extra added to their environment.
func providerFor(t testing.TB, bin string, model *fakemodel.Server, extra map[string]string) func(opts opencode.Options) eval.AgentProvider {
	home := t.TempDir()
	cfg := map[string]any{
		"autoupdate": false,
		"share":      "disabled",
		"provider": map[string]any{"fake": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "Fake",
			"options": map[string]any{"baseURL": model.URL, "apiKey": "sk-fake"},
			"models":  map[string]any{"fake-model": map[string]any{"name": "Fake Model", "tool_call": true}},
		}},
		"small_model": "fake/fake-model",
	}
	return func(o opencode.Options) eval.AgentProvider {
		if o.Command == "" {
			o.Command = bin
		}
		o.Config = cfg
		o.Model = "fake/fake-model"
		o.WorkingDirectory = t.TempDir()
		o.Env = map[string]string{
			"HOME":                                home,
			"OPENCODE_DISABLE_AUTOUPDATE":         "1",
			"OPENCODE_DISABLE_MODELS_FETCH":       "1",
			"OPENCODE_DISABLE_SHARE":              "1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD":       "1",
			"OPENCODE_DISABLE_CLAUDE_CODE_PROMPT": "1",
		}
		maps.Copy(o.Env, extra)
		p, err := opencode.New(o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// TestToolAndFollowUp: a Starlark tool called by the real agent through
// the AML bridge exactly once, its result reaching the model, then a
// follow-up turn in the same session; the system text reaches the model
// as the first turn's prelude.
func TestToolAndFollowUp(t *testing.T) {
	model, provider := setup(t)
	var calls atomic.Int64
	in, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer"}}, "required": []any{"id"}})
	tool, err := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			return map[string]any{"title": fmt.Sprintf("Record %v", input.(map[string]any)["id"])}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(opencode.Options{}), System: "Answer tersely.", Children: []any{
		&eval.ToolGrant{Tool: tool},
		`CALL lookup {"id": 7}`,
		&eval.FollowUp{Children: []any{"Thanks, now say goodbye."}},
	}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Fatalf("the tool ran %d times", calls.Load())
	}
	// The tool result reached the model in the first turn, and the
	// system text with the first prompt.
	var sawResult, sawSystem bool
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && strings.Contains(m.Text, "Record 7") {
				sawResult = true
			}
			if m.Role == "user" && strings.Contains(m.Text, "Answer tersely.") && strings.Contains(m.Text, "CALL lookup") {
				sawSystem = true
			}
		}
	}
	if !sawResult || !sawSystem {
		t.Fatalf("the model received the tool result: %v; the system text with the first prompt: %v", sawResult, sawSystem)
	}
	if !strings.Contains(out, "FAKE-REPLY: Thanks, now say goodbye.") {
		t.Fatalf("follow-up result = %q", out)
	}
	ends := 0
	var ids []string
	for _, e := range rec.Named("agent.turn") {
		if e.Type == eval.SpanEnd {
			ends++
			ids = append(ids, fmt.Sprint(e.Attributes["sessionId"]))
		}
	}
	if ends != 2 || ids[0] != ids[1] {
		t.Fatalf("turns %d, session ids %v: want two turns of one session", ends, ids)
	}
}

// TestMCPGrant: explicit mcp() grants of the MCP reference server, over
// stdio and over streamable HTTP, used by the agent.
func TestMCPGrant(t *testing.T) {
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			_, provider := setup(t)
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(opencode.Options{}), Children: []any{
				&eval.MCPGrant{Server: srv},
				`CALL echo {"message": "via-` + tc.Name + `"}`,
			}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "Echo: via-"+tc.Name) {
				t.Fatalf("result = %q", out)
			}
		})
	}
}

// TestStructuredResult: the agent submits its result through the bridge.
func TestStructuredResult(t *testing.T) {
	_, provider := setup(t)
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(opencode.Options{}), Schema: s, Children: []any{
		`CALL aml_submit_result {"result": {"verdict": "pass"}}`,
	}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out != `{"verdict":"pass"}` {
		t.Fatalf("result = %q", out)
	}
	if n := len(rec.Named("agent.output")); n != 1 {
		t.Fatalf("agent.output events = %d", n)
	}
}

// TestReadOnlyConfig checks the permission overlay the session receives.
func TestReadOnlyConfig(t *testing.T) {
	model, provider := setup(t)
	p := provider(opencode.Options{})
	_, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Permissions: &eval.Permissions{Filesystem: "read-only"}, Children: []any{"hello"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The model was offered no write, edit or bash tool.
	var offered []string
	for _, r := range model.Requests() {
		if len(r.Tools) > len(offered) {
			offered = r.Tools
		}
	}
	for _, name := range offered {
		if name == "write" || name == "edit" || name == "bash" {
			t.Fatalf("read-only, shell-less session offered %q: %v", name, offered)
		}
	}
	if len(offered) == 0 {
		t.Fatal("no tools offered at all")
	}
}

// TestCancelEndsTheProcessTree: cancelling a run mid-turn, while the
// model has not answered, ends OpenCode and every process it started.
func TestCancelEndsTheProcessTree(t *testing.T) {
	bin := peers.Bin(t, "opencode", opencodePkg)
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return providerFor(t, bin, model, env)(opencode.Options{})
	})
}
