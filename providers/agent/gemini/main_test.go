package gemini_test

import (
	"os"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

// TestMain lets the test binary stand in for an agent (acptest.Command).
func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}
