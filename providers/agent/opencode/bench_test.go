package opencode_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/opencode"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		return opencode.New(opencode.Options{Base: base})
	})
}

// BenchmarkStart: session start to the first model request of the real
// OpenCode, its cache (XDG_CACHE_HOME) cold and warm.
func BenchmarkStart(b *testing.B) {
	bin := peers.Bin(b, "opencode", opencodePkg)
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		return providerFor(b, bin, model, map[string]string{"XDG_CACHE_HOME": cache})(opencode.Options{})
	})
}
