package acptest

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// CheckCredentialHint checks a profile's acp.Launch.CredentialHint with
// the fake agent, which here fails initialize: newProvider builds the
// profile over base (the fake's command and environment). While none of
// vars is set, the session's error must hold want; once any one of them
// is set in the host environment, it must not. It sets the process
// environment, so the calling test must not run in parallel.
func CheckCredentialHint(t *testing.T, newProvider func(base acp.Base) (*acp.Provider, error), want string, vars ...string) {
	t.Helper()
	for _, v := range vars {
		t.Setenv(v, "")
	}
	if err := FailedSession(t, newProvider); !strings.Contains(err.Error(), want) {
		t.Errorf("with no credential, the error does not say what to set (%q):\n%v", want, err)
	}
	for _, v := range vars {
		t.Setenv(v, "set")
		if err := FailedSession(t, newProvider); strings.Contains(err.Error(), want) {
			t.Errorf("with %s set, the error still asks for a credential:\n%v", v, err)
		}
		t.Setenv(v, "")
	}
}

// FailedSession runs one session of the profile newProvider builds over
// the fake agent in a mode that refuses initialize, and returns the
// session's error.
func FailedSession(t *testing.T, newProvider func(base acp.Base) (*acp.Provider, error)) error {
	t.Helper()
	cmd, env := Command()
	env["AML_FAKE_ACP_MODE"] = "exit-init"
	p, err := newProvider(acp.Base{Command: cmd, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), &eval.AgentRequest{Prompt: "x", Permissions: eval.DefaultPermissions()}, nil)
	if err == nil {
		t.Fatal("the fake agent that refuses to initialize did not fail the session")
	}
	return err
}
