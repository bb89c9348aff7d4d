package codex_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/codex"
)

// The versions .ci/run installs.
const (
	codexPkg    = "@openai/codex@0.171.0"
	codexACPPkg = "@agentclientprotocol/codex-acp@2.6.0"
)

func setup(t *testing.T, respond func(*fakemodel.Request) fakemodel.Reply) (*fakemodel.Server, eval.AgentProvider) {
	t.Helper()
	adapter := peers.Bin(t, "codex-acp", codexACPPkg)
	codexBin := peers.Bin(t, "codex", codexPkg)
	model := fakemodel.Start(respond)
	t.Cleanup(model.Close)
	return model, providerFor(t, adapter, codexBin, model, nil)
}

// providerFor makes a Codex provider against model, with extra added to
// its environment.
func providerFor(t testing.TB, adapter, codexBin string, model *fakemodel.Server, extra map[string]string) eval.AgentProvider {
	dir := t.TempDir()
	env := map[string]string{"FAKE_API_KEY": "sk-fake", "HOME": dir}
	maps.Copy(env, extra)
	p, err := codex.New(codex.Options{
		Base:      acp.Base{Command: adapter, Model: "fake-model", WorkingDirectory: dir, Env: env},
		CodexPath: codexBin,
		Config: map[string]any{
			"model_provider":              "fake",
			"approval_policy":             "never",
			"check_for_update_on_startup": false,
			"model_providers": map[string]any{"fake": map[string]any{
				"name": "Fake", "base_url": model.URL, "env_key": "FAKE_API_KEY", "wire_api": "responses",
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTurnsAndSystem: two turns of one real Codex session over the
// Responses API, with the system text delivered as developer
// instructions rather than as prompt text.
func TestTurnsAndSystem(t *testing.T) {
	model, p := setup(t, nil)
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, System: "Answer tersely.", Children: []any{
		"first question", &eval.FollowUp{Children: []any{"second question"}},
	}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "FAKE-REPLY: second question") {
		t.Fatalf("result = %q", out)
	}
	if n := rec.Count("agent.turn", eval.SpanEnd); n != 2 {
		t.Fatalf("turns = %d", n)
	}
	var sawInstructions, prelude bool
	for _, r := range model.Requests() {
		if strings.Contains(string(r.Raw), "Answer tersely.") {
			sawInstructions = true
		}
		if strings.Contains(string(r.Raw), "<SYSTEM>") {
			prelude = true
		}
	}
	if !sawInstructions || prelude {
		t.Fatalf("system text reached the model: %v; as a prelude: %v", sawInstructions, prelude)
	}
}

// TestBridgeTool: a Starlark tool called by Codex through the AML bridge.
func TestBridgeTool(t *testing.T) {
	model, p := setup(t, nil)
	var calls atomic.Int64
	in, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer"}}, "required": []any{"id"}})
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			return fmt.Sprintf("Record %v", input.(map[string]any)["id"]), nil
		}})
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Children: []any{&eval.ToolGrant{Tool: tool}, `CALL lookup {"id": 9}`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || !strings.Contains(out, "Record 9") {
		var tools [][]string
		for _, r := range model.Requests() {
			tools = append(tools, r.Tools)
		}
		t.Fatalf("calls %d, out %q; tools offered per request: %v", calls.Load(), out, tools)
	}
}

// TestStructuredResult: Codex submits the typed result through the bridge.
func TestStructuredResult(t *testing.T) {
	_, p := setup(t, nil)
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Schema: s, Children: []any{`CALL aml_submit_result {"result": {"verdict": "fail"}}`}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out != `{"verdict":"fail"}` {
		t.Fatalf("result = %q", out)
	}
	if n := rec.Count("agent.output", eval.PointEvent); n != 1 {
		t.Fatalf("agent.output events = %d", n)
	}
}

// TestMCPGrants: mcp() grants of the MCP reference server, over stdio and
// over streamable HTTP, reach Codex, which calls their tools.
func TestMCPGrants(t *testing.T) {
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			model, p := setup(t, nil)
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Children: []any{&eval.MCPGrant{Server: srv}, `CALL echo {"message": "via-` + tc.Name + `"}`}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "Echo: via-"+tc.Name) {
				var tools [][]string
				for _, r := range model.Requests() {
					tools = append(tools, r.Tools)
				}
				t.Fatalf("out %q; tools offered per request: %v", out, tools)
			}
		})
	}
}

// TestReadOnlyRefusesWrites: Codex offers the model the same tools under
// every permission (exec_command runs commands; there is no file-writing
// tool of its own), and filesystem "read-only" starts it in its read-only
// sandbox: a command that writes a file fails there, and succeeds with
// "read-write".
func TestReadOnlyRefusesWrites(t *testing.T) {
	for _, tc := range []struct {
		fs    eval.Access
		wants string
	}{
		{eval.ReadOnly, "made.txt: Read-only file system"},
		{eval.ReadWrite, "wrote made.txt"},
	} {
		model, p := setup(t, nil)
		out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Permissions: &eval.Permissions{Filesystem: tc.fs, Shell: true},
			Children: []any{`CALL exec_command {"cmd": "echo hi > made.txt && echo wrote made.txt"}`}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, tc.wants) {
			t.Fatalf("%s: the command said %q, want %q", tc.fs, out, tc.wants)
		}
		if tools := model.Requests()[0].Tools; !slices.Contains(tools, "exec_command") {
			t.Fatalf("%s: tools offered %v, without exec_command", tc.fs, tools)
		}
	}
}

// TestCancelEndsTheProcessTree: cancelling a run mid-turn, while the
// model has not answered, ends the adapter, Codex and every process they
// started.
func TestCancelEndsTheProcessTree(t *testing.T) {
	adapter := peers.Bin(t, "codex-acp", codexACPPkg)
	codexBin := peers.Bin(t, "codex", codexPkg)
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return providerFor(t, adapter, codexBin, model, env)
	})
}
