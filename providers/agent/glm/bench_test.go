package glm_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/glm"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		base.Env["AML_FAKE_ACP_AUTH_METHOD"] = "z-ai-api-key"
		return glm.New(glm.Options{Base: base, APIKey: "sk-fake", BaseURL: "http://127.0.0.1:9"})
	})
}

// BenchmarkStart: session start to the first model request of the real
// GLM adapter, Node's compile cache cold and warm.
func BenchmarkStart(b *testing.B) {
	bin := adapter(b)
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		p, err := glm.New(glm.Options{Base: acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: b.TempDir(),
			Env: map[string]string{"NODE_COMPILE_CACHE": cache}}, APIKey: "sk-fake", BaseURL: model.URL})
		if err != nil {
			b.Fatal(err)
		}
		return p
	})
}
