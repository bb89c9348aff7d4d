package codex_test

import (
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/codex"
)

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return codex.New(codex.Options{Base: b}) },
		"codex_agent found no API key: set OPENAI_API_KEY (or CODEX_API_KEY)", "OPENAI_API_KEY", "CODEX_API_KEY")
}
