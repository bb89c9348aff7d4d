package glm_test

// End-to-end tests that drive the real glm-acp-agent adapter against the
// fake OpenAI-compatible model (internal/fakemodel), offline.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/glm"
)

// adapterTarball is the adapter .ci/run installs, from the shared peers
// directory beside the project (the npm registry does not serve it).
const adapterTarball = "glm-acp-agent-1.5.0.tgz"

// remote are the adapter's tools that reach Z.AI whatever the
// permissions (they never ask): the model must never call them here.
var remote = []string{"web_search", "web_reader", "image_analysis"}

// adapter returns the installed glm-acp-agent, or skips t saying what is
// missing and how to get it.
func adapter(t testing.TB) string {
	t.Helper()
	prefix := filepath.Join(peers.Dir(), "glm-acp-agent")
	bin := filepath.Join(prefix, "node_modules", ".bin", "glm-acp-agent")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("glm-acp-agent is not installed in %s: run `npm install --prefix %s ../shared/peers/%s` from the project root (.ci/run does this when ${AML_SHARED_DIR:-../shared}/peers/%s exists; the npm registry does not serve the package)", prefix, prefix, adapterTarball, adapterTarball)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: glm-acp-agent runs on Node.js (install Node.js 20 or newer)")
	}
	return bin
}

// setup starts a fake model that follows the default script but never
// calls a remote tool, and returns it with a GLM provider wired to it.
func setup(t *testing.T) (*fakemodel.Server, eval.AgentProvider, string) {
	t.Helper()
	bin := adapter(t)
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		reply := fakemodel.Script(r)
		for _, c := range reply.ToolCalls {
			if slices.Contains(remote, c.Name) {
				t.Errorf("the script asked for the remote tool %s", c.Name)
				return fakemodel.Reply{Text: "refused"}
			}
		}
		return reply
	})
	t.Cleanup(func() {
		model.Close()
		for i, r := range model.Requests() {
			for _, m := range r.Messages {
				for _, name := range m.ToolCalls {
					if slices.Contains(remote, name) {
						t.Errorf("request %d carries a call of the remote tool %s", i, name)
					}
				}
			}
		}
	})
	dir := t.TempDir()
	p, err := glm.New(glm.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: dir}, APIKey: "sk-fake", BaseURL: model.URL})
	if err != nil {
		t.Fatal(err)
	}
	return model, p, dir
}

// dump logs what the model received, for a failure's diagnosis.
func dump(t *testing.T, model *fakemodel.Server) {
	t.Helper()
	for i, r := range model.Requests() {
		t.Logf("request %d (%s, model %q): tools %v", i, r.API, r.Model, r.Tools)
		for _, m := range r.Messages {
			if m.Role != "system" {
				t.Logf("  %s %.300q %v", m.Role, m.Text, m.ToolCalls)
			}
		}
	}
}

// TestTurns: two turns of one real glm-acp-agent session, with the model
// and endpoint AML sets and the system text as a first-turn prelude; the
// remote tools are offered but never called.
func TestTurns(t *testing.T) {
	model, p, _ := setup(t)
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, System: "Answer tersely.", Children: []any{
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
	var sawSystem bool
	for _, r := range model.Requests() {
		if r.Model != "fake-model" {
			t.Errorf("request for model %q", r.Model)
		}
		if strings.Contains(string(r.Raw), "Answer tersely.") {
			sawSystem = true
		}
		for _, name := range remote {
			if !slices.Contains(r.Tools, name) {
				t.Errorf("the adapter did not offer %s (tools %v): has it changed?", name, r.Tools)
			}
		}
	}
	if !sawSystem {
		t.Error("the system text never reached the model")
	}
}

// TestBridgeTool: a host tool called by the adapter through the AML
// bridge runs exactly once.
func TestBridgeTool(t *testing.T) {
	model, p, _ := setup(t)
	var calls atomic.Int64
	in, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer"}}, "required": []any{"id"}})
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			return fmt.Sprintf("Record %v", input.(map[string]any)["id"]), nil
		}})
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Children: []any{&eval.ToolGrant{Tool: tool}, `CALL lookup {"id": 9}`}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if calls.Load() != 1 || out != "RESULT: Record 9" {
		dump(t, model)
		t.Fatalf("calls %d, result %q", calls.Load(), out)
	}
}

// TestStructuredResult: the adapter submits the typed result through the
// bridge's aml_submit_result tool.
func TestStructuredResult(t *testing.T) {
	model, p, _ := setup(t)
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Schema: s, Children: []any{
		`CALL aml_submit_result {"result": {"verdict": "pass"}}`,
	}}, rec)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if out != `{"verdict":"pass"}` {
		t.Fatalf("result = %q", out)
	}
	if n := rec.Count("agent.output", eval.PointEvent); n != 1 {
		t.Fatalf("agent.output events = %d", n)
	}
}

// TestReadOnlyRefusesWrites: the adapter asks permission for write_file
// and run_command, which a read-only, shell-less agent is refused: the
// file is not written and the command does not run.
func TestReadOnlyRefusesWrites(t *testing.T) {
	model, p, dir := setup(t)
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Permissions: &eval.Permissions{Filesystem: "read-only"}, Children: []any{
		"CALL write_file {\"path\": \"written.txt\", \"content\": \"x\"}\nCALL run_command {\"command\": \"touch ran.txt\"}",
	}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	for _, name := range []string{"written.txt", "ran.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s exists: the read-only, shell-less agent wrote it", name)
		}
	}
	var results []string
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results = append(results, m.Text)
			}
		}
	}
	if len(results) == 0 {
		dump(t, model)
		t.Fatalf("the model got no tool result; out %q", out)
	}
	t.Logf("tool results the model saw: %q", results)
}

// TestMCPGrants: mcp() grants of the MCP reference server, over stdio and
// over streamable HTTP, reach the adapter, which calls their tools.
func TestMCPGrants(t *testing.T) {
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			model, p, _ := setup(t)
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Children: []any{&eval.MCPGrant{Server: srv}, `CALL echo {"message": "via-` + tc.Name + `"}`}}, nil)
			if err != nil {
				dump(t, model)
				t.Fatal(err)
			}
			if !strings.Contains(out, "Echo: via-"+tc.Name) {
				dump(t, model)
				t.Fatalf("result %q", out)
			}
		})
	}
}

// TestCancelEndsTheProcessTree: cancelling a run mid-turn, while the
// model has not answered, ends the GLM adapter and every process it
// started.
func TestCancelEndsTheProcessTree(t *testing.T) {
	bin := adapter(t)
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		p, err := glm.New(glm.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: t.TempDir(), Env: env}, APIKey: "sk-fake", BaseURL: model.URL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
