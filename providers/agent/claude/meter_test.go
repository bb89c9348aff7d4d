package claude_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/claude"
)

// TestCostBudget: a cost_usd budget with a price table stops Claude Code
// at the call that crosses it; without a price it never starts.
func TestCostBudget(t *testing.T) {
	model, provider := setup(t)
	grant, _ := acptest.Counter(t)
	acptest.CheckCostBudget(t, func() *eval.Agent {
		return &eval.Agent{Provider: provider(claude.Options{}), Children: []any{grant, strings.Repeat("CALL count {}\n", 30)}}
	}, func() int { return len(model.Requests()) })
}

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return claude.New(claude.Options{Base: b}) },
		"claude_agent found no API key: set ANTHROPIC_API_KEY, or pass api_key = ...", "ANTHROPIC_API_KEY")
}

// TestOptionsRefused: an effort Claude Code does not know, and settings
// that are not a dict where AML sets keys, are refused when the provider
// is made.
func TestOptionsRefused(t *testing.T) {
	if _, err := claude.New(claude.Options{Effort: "extreme"}); err == nil || !strings.Contains(err.Error(), `effort "extreme" is not one of`) {
		t.Fatalf("effort: %v", err)
	}
	if _, err := claude.New(claude.Options{Settings: map[string]any{"permissions": "all"}}); err == nil ||
		!strings.Contains(err.Error(), `claude_agent: settings["permissions"] must be a dict`) {
		t.Fatalf("settings: %v", err)
	}
}
