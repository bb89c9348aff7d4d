package copilot_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/copilot"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		base.Env["GH_TOKEN"] = "gh-fake"
		return copilot.New(copilot.Options{Base: base})
	})
}

// BenchmarkStart: session start to the first model request of the real
// Copilot CLI, its unpacked package cache (COPILOT_PKG_CACHE_HOME) cold
// and warm.
func BenchmarkStart(b *testing.B) {
	bin := cli(b)
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		return providerFor(b, bin, model, "", map[string]string{"COPILOT_PKG_CACHE_HOME": cache})(copilot.Options{})
	})
}
