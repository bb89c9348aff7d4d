package opencode_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/testdocker"
	"github.com/aml-go/aml/providers/agent/opencode"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestMeteredInDockerWithoutNetwork: OpenCode in a Docker sandbox with
// network "none" reaches its model through AML's model gateway (aml
// model-relay on the sandbox's loopback, carried to the gateway's socket
// in the sandbox's shared directory), the gateway counts exactly the
// fake model's usage, and nothing else on the host is reachable from the
// sandbox: the model's own address is not.
func TestMeteredInDockerWithoutNetwork(t *testing.T) {
	cli := testdocker.Engine(t)
	img := testdocker.AgentImageFor(t, cli)
	wrapper := peers.Bin(t, "opencode", opencodePkg)
	native := filepath.Join(filepath.Dir(filepath.Dir(wrapper)), "opencode-linux-x64", "bin", "opencode")
	if _, err := os.Stat(native); err != nil {
		t.Skipf("the OpenCode Linux binary is not at %s: %v", native, err)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(native)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "opencode"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	relay := filepath.Join(t.TempDir(), "aml")
	if b, err := exec.Command("go", "build", "-o", relay, "github.com/aml-go/aml/cmd/aml").CombinedOutput(); err != nil {
		t.Fatalf("go build aml: %v\n%s", err, b)
	}
	box, err := docker.New(docker.Options{Client: cli, Image: img, Network: "none", Workspace: dir, Relay: relay})
	if err != nil {
		t.Fatal(err)
	}
	model, provider := setup(t)
	var o opencode.Options
	o.Command = "/workspace/opencode"
	agent := provider(o)
	var spent eval.Usage
	rt, err := eval.New(eval.Options{OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	if err != nil {
		t.Fatal(err)
	}
	// The model's address, as the host sees it: unreachable from the
	// sandbox (busybox wget).
	host := strings.TrimPrefix(strings.TrimSuffix(model.URL, "/v1"), "http://")
	addr, port, _ := strings.Cut(host, ":")
	probe := &eval.Script{Shell: "sh", Children: []any{"if ! command -v nc >/dev/null; then echo no nc; elif nc -w 3 " + addr + " " + port + " </dev/null; then echo reached; else echo unreachable; fi"}}
	out, err := rt.Evaluate(context.Background(), &eval.Sandbox{Provider: box, Access: eval.ReadWrite, Children: []any{
		&eval.Agent{Provider: agent, Children: []any{"hello from the sandbox"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out != "FAKE-REPLY: hello from the sandbox" {
		t.Fatalf("result %q", out)
	}
	requests := int64(len(model.Requests()))
	if requests == 0 || spent.InputTokens != 10*requests || spent.OutputTokens != 5*requests || spent.ModelCalls != requests {
		t.Fatalf("counted %+v for %d model requests of 10 and 5 tokens", spent, requests)
	}
	got, err := rt.Evaluate(context.Background(), &eval.Sandbox{Provider: box, Access: eval.ReadWrite, Children: []any{probe}})
	if err != nil || strings.TrimSpace(got) != "unreachable" {
		t.Fatalf("the probe of the model's address from the sandbox: %q, %v; want unreachable", got, err)
	}
}
