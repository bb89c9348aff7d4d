package gemini_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/gemini"
)

// TestInDockerSandbox: the real Gemini CLI runs inside a container with no
// network on Node 22 (agentdocker.Run).
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "gemini", geminiPkg)
	agentdocker.Run(t, agentdocker.Case{Path: agentdocker.Node22, Provider: func(model *fakemodel.Server) eval.AgentProvider {
		p, err := gemini.New(gemini.Options{Base: acp.Base{Command: "/workspace/node_modules/.bin/gemini", Model: "fake-model",
			Env: map[string]string{"GEMINI_API_KEY": "g-fake"}}, BaseURL: model.GeminiURL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
}
