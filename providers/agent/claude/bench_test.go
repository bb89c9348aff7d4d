package claude_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/claude"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the Claude Code profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		base.Env["ANTHROPIC_API_KEY"] = "sk-ant-fake"
		return claude.New(claude.Options{Base: base, BaseURL: "http://127.0.0.1:9"})
	})
}

// BenchmarkStart: session start to the first model request of the real
// Claude Code adapter and CLI, Node's compile cache cold and warm.
func BenchmarkStart(b *testing.B) {
	bin := peers.Bin(b, "claude-agent-acp", claudePkg)
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		p, err := claude.New(claude.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: b.TempDir(),
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-fake", "NODE_COMPILE_CACHE": cache}}, BaseURL: model.AnthropicURL})
		if err != nil {
			b.Fatal(err)
		}
		return p
	})
}
