package remotetest

import (
	"context"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/starlib"
)

// MeteredAgent is an extension with one builtin, metered_fake(): the fake
// ACP agent under a metering profile, its model the one at modelURL as
// the run's model gateway routes it (OPENAI_BASE_URL is the gateway's
// route, which aml model-relay carries out of a sandbox). The sandbox
// must hold the fake agent as fake-acp-agent, and as aml for the relays.
func MeteredAgent(t testing.TB, modelURL string) *starlib.Extension {
	t.Helper()
	p, err := acp.New(acp.Config{Name: "metered", Command: "fake-acp-agent", Meter: true, Relay: []string{"aml", "mcp-relay"},
		Profile: func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
			base, err := lc.Route(modelURL)
			if err != nil {
				return nil, err
			}
			return &acp.Launch{Command: "fake-acp-agent", Env: map[string]string{"OPENAI_BASE_URL": base, "AML_FAKE_ACP_MODE": "no-http"}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return &starlib.Extension{Name: "metered-test", Builtins: []*starlib.Builtin{{
		Name: "metered_fake", Group: "providers", Doc: "The metered fake agent.", Returns: "an agent provider",
		Impl: func(*starlib.Call) (starlark.Value, error) {
			return &starlib.AgentProviderValue{Provider: p}, nil
		},
	}}}
}
