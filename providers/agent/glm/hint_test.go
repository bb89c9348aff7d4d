package glm_test

import (
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/glm"
)

func TestCredentialHint(t *testing.T) {
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return glm.New(glm.Options{Base: b}) },
		"glm_agent found no API key: set Z_AI_API_KEY", "Z_AI_API_KEY")
}
