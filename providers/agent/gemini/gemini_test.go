package gemini_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentsuite"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/gemini"
)

// geminiPkg is the version .ci/run installs.
const geminiPkg = "@google/gemini-cli@0.61.0"

// agent describes the Gemini CLI profile to the shared suite
// (agentsuite).
var agent = agentsuite.Agent{
	Provider: func(t testing.TB, model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return newProvider(t, model, env, gemini.Options{})
	},
	Withheld: slices.Concat(gemini.ReadOnlyExcluded, gemini.ShellExcluded, gemini.NetworkExcluded),
	Shown:    []string{"write_file", "replace", "run_shell_command", "web_fetch"},
	Reading:  []string{"read_file", "grep_search"},
	Bridged:  "mcp_aml_lookup",
	Own:      0,
}

// newProvider makes a Gemini CLI provider against model with env added
// to its environment and o's own options.
func newProvider(t testing.TB, model *fakemodel.Server, env map[string]string, o gemini.Options) eval.AgentProvider {
	t.Helper()
	bin := peers.Bin(t, "gemini", geminiPkg)
	e := map[string]string{"GEMINI_API_KEY": "g-fake"}
	for k, v := range env {
		e[k] = v
	}
	o.Base = acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: t.TempDir(), Env: e}
	o.BaseURL = model.GeminiURL
	p, err := gemini.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setup starts the fake model and returns it with a function that makes
// Gemini CLI providers reaching it.
func setup(t *testing.T) (*fakemodel.Server, func(gemini.Options) eval.AgentProvider) {
	t.Helper()
	peers.Bin(t, "gemini", geminiPkg)
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	return model, func(o gemini.Options) eval.AgentProvider { return newProvider(t, model, nil, o) }
}

func dump(t *testing.T, model *fakemodel.Server) { agentsuite.Dump(t, model) }

func TestTurns(t *testing.T)                    { agentsuite.Turns(t, agent) }
func TestBridgeTool(t *testing.T)               { agentsuite.BridgeTool(t, agent) }
func TestStructuredResult(t *testing.T)         { agentsuite.StructuredResult(t, agent) }
func TestMCPGrants(t *testing.T)                { agentsuite.MCPGrants(t, agent) }
func TestReadOnly(t *testing.T)                 { agentsuite.ReadOnly(t, agent) }
func TestCancelEndsTheProcessTree(t *testing.T) { agentsuite.Cancel(t, agent) }

// TestThinkingBudget: thinking_budget reaches the model's requests as the
// generation config's thinking budget; without it none is set.
func TestThinkingBudget(t *testing.T) {
	model, provider := setup(t)
	for _, budget := range []int{512, 0} {
		if _, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(gemini.Options{ThinkingBudget: budget}), Children: []any{"think"}}, nil); err != nil {
			dump(t, model)
			t.Fatal(err)
		}
		reqs := model.Requests()
		var body struct {
			GenerationConfig struct {
				ThinkingConfig struct {
					ThinkingBudget *int `json:"thinkingBudget"`
				} `json:"thinkingConfig"`
			} `json:"generationConfig"`
		}
		if err := json.Unmarshal(reqs[len(reqs)-1].Raw, &body); err != nil {
			t.Fatal(err)
		}
		got := body.GenerationConfig.ThinkingConfig.ThinkingBudget
		if budget == 0 && got != nil || budget != 0 && (got == nil || *got != budget) {
			t.Fatalf("thinking_budget %d: the request carries %v (%s)", budget, got, reqs[len(reqs)-1].Raw[:min(len(reqs[len(reqs)-1].Raw), 300)])
		}
	}
}
