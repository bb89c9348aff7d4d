package pi_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentdocker"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/pi"
)

// TestInDockerSandbox: the real pi-acp and pi run inside a container with
// no network on Node 22 (agentdocker.Run); the tool and the structured
// result go through pi-mcp-adapter's mcp proxy tool, whose bridge is the
// sandbox's stdio relay.
func TestInDockerSandbox(t *testing.T) {
	peers.Bin(t, "pi-acp", piACPPkg)
	peers.Bin(t, "pi", piPkg)
	peers.Bin(t, "pi-mcp-adapter", mcpAdapterPkg)
	respond := func(r *fakemodel.Request) fakemodel.Reply {
		var results []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results = append(results, m.Text)
			}
		}
		structured := false
		for _, m := range r.Messages {
			structured = structured || (m.Role == "user" && strings.Contains(m.Text, "verdict"))
		}
		switch {
		case len(results) == 0 && structured:
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"tool":"aml_submit_result","args":{"result":{"verdict":"fail"}}}`}}}
		case len(results) == 0:
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "mcp", Arguments: `{"tool":"lookup","args":{"id":9}}`}}}
		case structured:
			return fakemodel.Reply{Text: "submitted"}
		default:
			return fakemodel.Reply{Text: "RESULT: " + results[0]}
		}
	}
	agentdocker.Run(t, agentdocker.Case{Path: agentdocker.Node22, Respond: respond, SubmitPrompt: "Submit the verdict fail.",
		Provider: func(model *fakemodel.Server) eval.AgentProvider {
			p, err := pi.New(pi.Options{
				Base:           acp.Base{Command: "/workspace/node_modules/.bin/pi-acp", Model: "fake/fake-model", Env: map[string]string{"PI_OFFLINE": "1"}},
				PiCommand:      "/workspace/node_modules/.bin/pi",
				MCPAdapterPath: "/workspace/node_modules/pi-mcp-adapter/index.ts",
				Models: map[string]any{"providers": map[string]any{"fake": map[string]any{
					"name": "Fake", "baseUrl": model.URL, "apiKey": "sk-fake", "api": "openai-completions",
					"models": []any{map[string]any{"id": "fake-model", "name": "Fake Model"}},
				}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}})
}
