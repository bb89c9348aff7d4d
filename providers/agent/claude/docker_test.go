package claude_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/claude"
)

// TestInDockerSandbox: the real Claude Code runs inside a container with
// no network on Node 22 (agentdocker.Run).
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "claude-agent-acp", claudePkg)
	agentdocker.Run(t, agentdocker.Case{Path: agentdocker.Node22, Provider: func(model *fakemodel.Server) eval.AgentProvider {
		p, err := claude.New(claude.Options{Base: acp.Base{Command: "/workspace/node_modules/.bin/claude-agent-acp", Model: "fake-model",
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-fake"}}, BaseURL: model.AnthropicURL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
}
