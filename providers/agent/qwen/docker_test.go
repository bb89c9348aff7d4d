package qwen_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/qwen"
)

// TestInDockerSandbox: the real Qwen Code runs inside a container with no
// network on Node 22 (agentdocker.Run).
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "qwen", qwenPkg)
	agentdocker.Run(t, agentdocker.Case{Path: agentdocker.Node22, Provider: func(model *fakemodel.Server) eval.AgentProvider {
		p, err := qwen.New(qwen.Options{Base: acp.Base{Command: "/workspace/node_modules/.bin/qwen", Model: "fake-model",
			Env: map[string]string{"OPENAI_API_KEY": "sk-fake"}}, BaseURL: model.URL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
}
