package codex_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/codex"
)

// TestInDockerSandbox: the real Codex (its Node ACP adapter and the native
// codex) runs inside a container with no network on Node 22
// (agentdocker.Run), with read-only access.
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "codex-acp", codexACPPkg)
	peers.Bin(t, "codex", codexPkg)
	agentdocker.Run(t, agentdocker.Case{Path: agentdocker.Node22, Provider: func(model *fakemodel.Server) eval.AgentProvider {
		p, err := codex.New(codex.Options{
			Base:      acp.Base{Command: "/workspace/node_modules/.bin/codex-acp", Model: "fake-model", Env: map[string]string{"FAKE_API_KEY": "sk-fake", "HOME": "/tmp"}},
			CodexPath: "/workspace/node_modules/.bin/codex",
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
	}})
}
