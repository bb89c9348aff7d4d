package opencode_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/opencode"
)

func TestCredentialHint(t *testing.T) {
	const want = "opencode_agent found no model credential: set the key variable of the model's provider"
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return opencode.New(opencode.Options{Base: b}) },
		want, acp.ModelKeyVars...)
	// A configured provider (a local server without a key) needs none.
	err := acptest.FailedSession(t, func(b acp.Base) (*acp.Provider, error) {
		return opencode.New(opencode.Options{Base: b, Config: map[string]any{"provider": map[string]any{}}})
	})
	if strings.Contains(err.Error(), want) {
		t.Errorf("with a provider configured, the error asks for a credential:\n%v", err)
	}
}
