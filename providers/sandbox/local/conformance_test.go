package local_test

import (
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// TestConformance runs the exported sandbox conformance suite, with the
// file and staging exercise, against the local sandbox.
func TestConformance(t *testing.T) {
	p, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	providertest.RunSandbox(t, p, providertest.SandboxOptions{
		Workspace: &eval.WorkspaceMaterialization{WorkspaceID: "conformance", LeaseID: "conformance", Directory: dir, Cwd: ".", Provider: "test", WriteConcurrency: "serial"},
		Exercise:  true,
	})
}
