package acptest

import (
	"context"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// BenchProfileSession measures AML's own time in one whole one-turn
// session of a profile: newProvider builds the profile over the fake
// agent (the base's command and environment), so that the agent's and
// the model's time is all but nil and what is measured is the engine and
// the profile (its state directory and files, its gateway route, its
// environment). Subtract BenchmarkSession of package acp, the engine
// alone, for the profile's share. The calling package's TestMain must
// call MaybeServe.
func BenchProfileSession(b *testing.B, newProvider func(base acp.Base) (*acp.Provider, error)) {
	b.Helper()
	cmd, env := Command()
	p, err := newProvider(acp.Base{Command: cmd, Env: env, WorkingDirectory: b.TempDir(), Model: "fake-model"})
	if err != nil {
		b.Fatal(err)
	}
	req := &eval.AgentRequest{Prompt: "say ok", Permissions: eval.DefaultPermissions()}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Run(ctx, req, nil)
		if err != nil || resp.Text != "ok" {
			b.Fatal(resp, err)
		}
	}
}
