package copilot_test

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
	"github.com/aml-go/aml/providers/agent/copilot"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestInDockerSandbox: the real Copilot CLI (its native Linux build, from
// a read-only workspace mount of the npm peers) runs inside a container
// with no network, its package unpacked into the container's /tmp; it
// reaches the fake model (bring-your-own-model) through aml model-relay
// and the model gateway (metered), calls a Starlark tool that runs on the
// host through aml mcp-relay (which Copilot starts from its own MCP
// configuration, as it refuses stdio servers from session/new), and
// submits a structured result.
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "copilot", copilotPkg)
	cli := testdocker.Engine(t)
	img := testdocker.AgentImageFor(t, cli)
	native := filepath.Join(peers.Dir(), "node_modules", "@github", "copilot-linux-x64", "copilot")
	if _, err := os.Stat(native); err != nil {
		t.Skipf("the Copilot Linux build is not at %s (@github/copilot-linux-x64, which .ci/run installs with %s): %v", native, copilotPkg, err)
	}
	relay := filepath.Join(t.TempDir(), "aml")
	if b, err := exec.Command("go", "build", "-o", relay, "github.com/aml-go/aml/cmd/aml").CombinedOutput(); err != nil {
		t.Fatalf("go build aml: %v\n%s", err, b)
	}
	mark := uuid.NewString()
	box, err := docker.New(docker.Options{Client: cli, Image: img, Network: "none", Workspace: peers.Dir(), Relay: relay,
		Env:    map[string]string{"PATH": "/bin:/usr/bin"},
		Labels: map[string]string{"aml-test": mark}})
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	p, err := copilot.New(copilot.Options{Base: acp.Base{Command: "/workspace/node_modules/@github/copilot-linux-x64/copilot", Model: "fake-model",
		Env: map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": model.URL, "COPILOT_PROVIDER_API_KEY": "sk-fake"}},
		PackageCache: "/tmp/copilot-pkg"})
	if err != nil {
		t.Fatal(err)
	}
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
	var spent eval.Usage
	rt, _ := eval.New(eval.Options{OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	out, err := rt.Evaluate(context.Background(), &eval.Sandbox{Provider: box, Access: eval.ReadOnly, Children: []any{
		&eval.Agent{Provider: p, Children: []any{&eval.ToolGrant{Tool: tool}, `CALL lookup {"id": 9}`}},
		"|",
		&eval.Agent{Provider: p, Schema: schema, Children: []any{`CALL aml_submit_result {"result": {"verdict": "fail"}}`}},
	}})
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Errorf("the host tool ran %d times, want 1", calls.Load())
	}
	if prose, structured, _ := strings.Cut(out, "|"); prose != "RESULT: Record 9" || structured != `{"verdict":"fail"}` {
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
