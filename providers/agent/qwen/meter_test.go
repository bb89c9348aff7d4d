package qwen_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/qwen"
)

// TestCostBudget: a cost_usd budget with a price table stops Qwen Code at
// the call that crosses it; without a price it never starts.
func TestCostBudget(t *testing.T) {
	model, provider := setup(t)
	grant, _ := acptest.Counter(t)
	acptest.CheckCostBudget(t, func() *eval.Agent {
		return &eval.Agent{Provider: provider(qwen.Options{}), Children: []any{grant, strings.Repeat("CALL count {}\n", 30)}}
	}, func() int { return len(model.Requests()) })
}

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return qwen.New(qwen.Options{Base: b}) },
		"qwen_agent found no API key: set OPENAI_API_KEY, or pass api_key = ...", "OPENAI_API_KEY")
}
