package workspace_test

import (
	"testing"

	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/workspace/filesystem"
	"github.com/aml-go/aml/providers/workspace/local"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// TestConformance runs the exported workspace conformance suite, with the
// restoration content check, against every workspace provider shipped.
func TestConformance(t *testing.T) {
	for _, format := range []string{"archive", "folder"} {
		t.Run("filesystem/"+format, func(t *testing.T) {
			p, err := filesystem.New(filesystem.Options{Directory: t.TempDir(), StoreOptions: persist.StoreOptions{Format: format}})
			if err != nil {
				t.Fatal(err)
			}
			providertest.RunWorkspace(t, p, providertest.WorkspaceOptions{CheckContent: true})
		})
	}
	t.Run("local", func(t *testing.T) {
		p, err := local.New(local.Options{Directory: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		providertest.RunWorkspace(t, p, providertest.WorkspaceOptions{CheckContent: true})
	})
}
