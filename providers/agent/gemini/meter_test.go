package gemini_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/gemini"
)

// TestCostBudget: a cost_usd budget with a price table stops Gemini CLI at
// the call that crosses it; without a price it never starts.
func TestCostBudget(t *testing.T) {
	model, provider := setup(t)
	grant, _ := acptest.Counter(t)
	acptest.CheckCostBudget(t, func() *eval.Agent {
		return &eval.Agent{Provider: provider(gemini.Options{}), Children: []any{grant, strings.Repeat("CALL count {}\n", 30)}}
	}, func() int { return len(model.Requests()) })
}

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return gemini.New(gemini.Options{Base: b}) },
		"gemini_agent found no API key: set GEMINI_API_KEY, or pass api_key = ...", "GEMINI_API_KEY")
}
