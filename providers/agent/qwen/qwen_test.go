package qwen_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentsuite"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/qwen"
)

// qwenPkg is the version .ci/run installs.
const qwenPkg = "@qwen-code/qwen-code@0.24.4"

// agent describes the Qwen Code profile to the shared suite
// (agentsuite).
var agent = agentsuite.Agent{
	Provider: func(t testing.TB, model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return newProvider(t, model, env, qwen.Options{})
	},
	Withheld: slices.Concat(qwen.ReadOnlyExcluded, qwen.ShellExcluded, qwen.NetworkExcluded),
	Shown:    []string{"write_file", "edit", "run_shell_command", "web_fetch"},
	Reading:  []string{"read_file", "grep_search"},
	Bridged:  "mcp__aml__lookup",
	Own:      0,
}

// newProvider makes a Qwen Code provider against model with env added
// to its environment and o's own options.
func newProvider(t testing.TB, model *fakemodel.Server, env map[string]string, o qwen.Options) eval.AgentProvider {
	t.Helper()
	bin := peers.Bin(t, "qwen", qwenPkg)
	e := map[string]string{"OPENAI_API_KEY": "sk-fake"}
	for k, v := range env {
		e[k] = v
	}
	o.Base = acp.Base{Command: bin, Model: "fake-model", WorkingDirectory: t.TempDir(), Env: e}
	o.BaseURL = model.URL
	p, err := qwen.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setup starts the fake model and returns it with a function that makes
// Qwen Code providers reaching it.
func setup(t *testing.T) (*fakemodel.Server, func(qwen.Options) eval.AgentProvider) {
	t.Helper()
	peers.Bin(t, "qwen", qwenPkg)
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	return model, func(o qwen.Options) eval.AgentProvider { return newProvider(t, model, nil, o) }
}

func dump(t *testing.T, model *fakemodel.Server) { agentsuite.Dump(t, model) }

func TestTurns(t *testing.T)                    { agentsuite.Turns(t, agent) }
func TestBridgeTool(t *testing.T)               { agentsuite.BridgeTool(t, agent) }
func TestStructuredResult(t *testing.T)         { agentsuite.StructuredResult(t, agent) }
func TestMCPGrants(t *testing.T)                { agentsuite.MCPGrants(t, agent) }
func TestReadOnly(t *testing.T)                 { agentsuite.ReadOnly(t, agent) }
func TestCancelEndsTheProcessTree(t *testing.T) { agentsuite.Cancel(t, agent) }

// TestReasoningEffort: reasoning_effort reaches the model's requests as
// Qwen Code sends it (reasoning.effort); without it none is sent.
func TestReasoningEffort(t *testing.T) {
	model, provider := setup(t)
	for _, effort := range []string{"high", ""} {
		if _, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(qwen.Options{ReasoningEffort: effort}), Children: []any{"think"}}, nil); err != nil {
			dump(t, model)
			t.Fatal(err)
		}
		reqs := model.Requests()
		var body struct {
			Reasoning *struct {
				Effort string `json:"effort"`
			} `json:"reasoning"`
		}
		if err := json.Unmarshal(reqs[len(reqs)-1].Raw, &body); err != nil {
			t.Fatal(err)
		}
		if effort == "" && body.Reasoning != nil || effort != "" && (body.Reasoning == nil || body.Reasoning.Effort != effort) {
			t.Fatalf("reasoning_effort %q: the request carries %+v", effort, body.Reasoning)
		}
	}
	if _, err := qwen.New(qwen.Options{ReasoningEffort: "extreme"}); err == nil || !strings.Contains(err.Error(), `reasoning_effort "extreme" is not one of`) {
		t.Fatalf("a bad effort: %v", err)
	}
}
