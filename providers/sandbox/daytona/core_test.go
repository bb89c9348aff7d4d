package daytona

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// TestConformance: the remote sandbox provider over the Daytona client
// passes the sandbox conformance suite against the double, every request
// and response checked against the published API.
func TestConformance(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, nil)
	p, err := remote.New(remote.Options{Service: s, GuestRoot: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	providertest.RunSandbox(t, p, providertest.SandboxOptions{Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}, Exercise: true})
	if errs := dbl.TakeErrors(); len(errs) > 0 {
		t.Errorf("requests or responses off the published API: %v", errs)
	}
}
