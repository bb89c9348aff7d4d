package pi_test

import (
	"os"
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/pi"
)

func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}

func TestCredentialHint(t *testing.T) {
	const want = "pi_agent found no model credential: set the key variable of the model's provider"
	acptest.CheckCredentialHint(t, func(b acp.Base) (*acp.Provider, error) { return pi.New(pi.Options{Base: b}) },
		want, acp.ModelKeyVars...)
	// Models of the user's own (models.json) carry their keys.
	err := acptest.FailedSession(t, func(b acp.Base) (*acp.Provider, error) {
		return pi.New(pi.Options{Base: b, Models: map[string]any{"providers": map[string]any{}}})
	})
	if strings.Contains(err.Error(), want) {
		t.Errorf("with models given, the error asks for a credential:\n%v", err)
	}
}
