package gemini_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/gemini"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		base.Env["GEMINI_API_KEY"] = "g-fake"
		return gemini.New(gemini.Options{Base: base, BaseURL: "http://127.0.0.1:9"})
	})
}

// BenchmarkStart: session start to the first model request of the real
// Gemini CLI, Node's compile cache cold and warm.
func BenchmarkStart(b *testing.B) {
	bin := peers.Bin(b, "gemini", geminiPkg)
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		p, err := gemini.New(gemini.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: b.TempDir(),
			Env: map[string]string{"GEMINI_API_KEY": "g-fake", "NODE_COMPILE_CACHE": cache}}, BaseURL: model.GeminiURL})
		if err != nil {
			b.Fatal(err)
		}
		return p
	})
}
