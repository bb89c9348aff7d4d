package copilot_test

import (
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/copilot"
)

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return copilot.New(copilot.Options{Base: b}) },
		"copilot_agent found no GitHub token: set COPILOT_GITHUB_TOKEN (or GH_TOKEN or GITHUB_TOKEN)",
		"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_BASE_URL")
}
