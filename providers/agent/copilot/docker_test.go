package copilot_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/copilot"
)

// TestInDockerSandbox: the real Copilot CLI (its native Linux build) runs
// inside a container with no network, its package unpacked into the
// container's /tmp (agentdocker.Run); the bridge reaches it as a stdio
// relay it starts from its own MCP configuration, since it refuses stdio
// servers from session/new.
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "copilot", copilotPkg)
	native := filepath.Join(peers.Dir(), "node_modules", "@github", "copilot-linux-x64", "copilot")
	if _, err := os.Stat(native); err != nil {
		t.Skipf("the Copilot Linux build is not at %s (@github/copilot-linux-x64, which .ci/run installs with %s): %v", native, copilotPkg, err)
	}
	agentdocker.Run(t, agentdocker.Case{Provider: func(model *fakemodel.Server) eval.AgentProvider {
		p, err := copilot.New(copilot.Options{Base: acp.Base{Command: "/workspace/node_modules/@github/copilot-linux-x64/copilot", Model: "fake-model",
			Env: map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": model.URL, "COPILOT_PROVIDER_API_KEY": "sk-fake"}},
			PackageCache: "/tmp/copilot-pkg"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
}
