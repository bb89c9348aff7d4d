package opencode_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/opencode"
)

// TestInDockerSandbox: the real OpenCode (its native Linux build, from
// the mounted npm peers) runs inside a container with no network
// (agentdocker.Run): its model through aml model-relay and the gateway,
// metered, a host tool through aml mcp-relay, and a structured result.
func TestInDockerSandbox(t *testing.T) {
	wrapper := peers.Bin(t, "opencode", opencodePkg)
	native := filepath.Join(filepath.Dir(filepath.Dir(wrapper)), "opencode-linux-x64", "bin", "opencode")
	if _, err := os.Stat(native); err != nil {
		t.Skipf("the OpenCode Linux binary is not at %s: %v", native, err)
	}
	rel, err := filepath.Rel(peers.Dir(), native)
	if err != nil {
		t.Fatal(err)
	}
	agentdocker.Run(t, agentdocker.Case{Provider: func(model *fakemodel.Server) eval.AgentProvider {
		var o opencode.Options
		o.Command = filepath.Join("/workspace", rel)
		return providerFor(t, wrapper, model, nil)(o)
	}})
}
