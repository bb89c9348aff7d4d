package claude_test

import (
	"slices"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentsuite"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/claude"
)

// claudePkg is the version .ci/run installs.
const claudePkg = "@agentclientprotocol/claude-agent-acp@0.101.0"

// agent describes the Claude Code profile to the shared suite
// (agentsuite).
var agent = agentsuite.Agent{
	Provider: func(t testing.TB, model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return newProvider(t, model, env, claude.Options{})
	},
	Withheld: slices.Concat(claude.ReadOnlyDisallowed, claude.ShellDisallowed, claude.NetworkDisallowed),
	Shown:    []string{"Write", "Edit", "Bash", "WebFetch"},
	Reading:  []string{"Read"},
	Bridged:  "mcp__aml__lookup",
	Own:      1,
}

// newProvider makes a Claude Code provider against model with env added
// to its environment and o's own options.
func newProvider(t testing.TB, model *fakemodel.Server, env map[string]string, o claude.Options) eval.AgentProvider {
	t.Helper()
	bin := peers.Bin(t, "claude-agent-acp", claudePkg)
	e := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-fake"}
	for k, v := range env {
		e[k] = v
	}
	o.Base = acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: t.TempDir(), Env: e}
	o.BaseURL = model.AnthropicURL
	p, err := claude.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setup starts the fake model and returns it with a function that makes
// Claude Code providers reaching it.
func setup(t *testing.T) (*fakemodel.Server, func(claude.Options) eval.AgentProvider) {
	t.Helper()
	peers.Bin(t, "claude-agent-acp", claudePkg)
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	return model, func(o claude.Options) eval.AgentProvider { return newProvider(t, model, nil, o) }
}

func TestTurns(t *testing.T)                    { agentsuite.Turns(t, agent) }
func TestBridgeTool(t *testing.T)               { agentsuite.BridgeTool(t, agent) }
func TestStructuredResult(t *testing.T)         { agentsuite.StructuredResult(t, agent) }
func TestMCPGrants(t *testing.T)                { agentsuite.MCPGrants(t, agent) }
func TestReadOnly(t *testing.T)                 { agentsuite.ReadOnly(t, agent) }
func TestCancelEndsTheProcessTree(t *testing.T) { agentsuite.Cancel(t, agent) }
