package glm_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/glm"
)

// TestInDockerSandbox: the real glm-acp-agent runs inside a container with
// no network on Node 22 (agentdocker.Run); its remote tools, which reach
// Z.AI whatever the permissions say, reach nothing there.
func TestInDockerSandbox(t *testing.T) {
	adapter(t)
	agentdocker.Run(t, agentdocker.Case{Path: agentdocker.Node22, Provider: func(model *fakemodel.Server) eval.AgentProvider {
		p, err := glm.New(glm.Options{Base: acp.Base{Command: "/workspace/glm-acp-agent/node_modules/.bin/glm-acp-agent", Model: "fake-model"},
			APIKey: "sk-fake", BaseURL: model.URL})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
}
