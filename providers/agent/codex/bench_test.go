package codex_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/codex"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		base.Env["AML_FAKE_ACP_AUTH_METHOD"] = "api-key"
		base.Env["CODEX_API_KEY"] = "sk-fake"
		return codex.New(codex.Options{Base: base})
	})
}

// BenchmarkStart: session start to the first model request of the real
// codex-acp and Codex (native programs: no cache of their own).
func BenchmarkStart(b *testing.B) {
	adapter := peers.Bin(b, "codex-acp", codexACPPkg)
	codexBin := peers.Bin(b, "codex", codexPkg)
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		return providerFor(b, adapter, codexBin, model, nil)
	})
}
