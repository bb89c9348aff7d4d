package opencode_test

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
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/testdocker"
	"github.com/aml-go/aml/providers/agent/opencode"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestInDockerSandbox: the real OpenCode runs inside a container, against
// the fake model on the host's loopback (network "host", for the model
// only), calls a Starlark tool that runs on the host through aml
// mcp-relay over the sandbox's socket, and submits a structured result.
func TestInDockerSandbox(t *testing.T) {
	cli := testdocker.Engine(t)
	img := testdocker.AgentImageFor(t, cli)
	wrapper := peers.Bin(t, "opencode", opencodePkg)
	native := filepath.Join(filepath.Dir(filepath.Dir(wrapper)), "opencode-linux-x64", "bin", "opencode")
	if _, err := os.Stat(native); err != nil {
		t.Skipf("the OpenCode Linux binary is not at %s: %v", native, err)
	}
	dir := t.TempDir()
	if err := os.Link(native, filepath.Join(dir, "opencode")); err != nil {
		data, err := os.ReadFile(native)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "opencode"), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	relay := filepath.Join(t.TempDir(), "aml")
	if b, err := exec.Command("go", "build", "-o", relay, "github.com/aml-go/aml/cmd/aml").CombinedOutput(); err != nil {
		t.Fatalf("go build aml: %v\n%s", err, b)
	}
	mark := uuid.NewString()
	box, err := docker.New(docker.Options{Client: cli, Image: img, Network: "host", Workspace: dir, Relay: relay, Labels: map[string]string{"aml-test": mark}})
	if err != nil {
		t.Fatal(err)
	}
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
	schema, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	var o opencode.Options
	o.Command = "/workspace/opencode" // the binary the workspace mount brings in
	agent := provider(o)
	out, err := evaluate(t, &eval.Sandbox{Provider: box, Access: eval.ReadWrite, Children: []any{
		&eval.Agent{Provider: agent, Children: []any{&eval.ToolGrant{Tool: tool}, `CALL lookup {"id": 7}`}},
		"|",
		&eval.Agent{Provider: agent, Schema: schema, Children: []any{`CALL aml_submit_result {"result": {"verdict": "pass"}}`}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Errorf("the host tool ran %d times, want 1", calls.Load())
	}
	var sawResult bool
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			sawResult = sawResult || m.Role == "tool" && strings.Contains(m.Text, "Record 7")
		}
	}
	if !sawResult {
		t.Error("the model never received the tool result")
	}
	if _, structured, _ := strings.Cut(out, "|"); structured != `{"verdict":"pass"}` {
		t.Errorf("result %q, want the structured result after |", out)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+mark))})
	if err != nil || len(list) != 0 {
		t.Errorf("containers left: %d (%v)", len(list), err)
	}
}
