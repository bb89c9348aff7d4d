package claude_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
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
// Claude Code, Node's compile cache cold and warm (the suite's provider).
func BenchmarkStart(b *testing.B) {
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		return agent.Provider(b, model, map[string]string{"NODE_COMPILE_CACHE": cache})
	})
}
