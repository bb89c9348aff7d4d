package fsstar_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/fsstar"
)

// TestFilesystemWorkspaceFactory: filesystem_workspace() from the
// extension publishes a revision that a second run restores.
func TestFilesystemWorkspaceFactory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	write := []byte(`
store = filesystem_workspace(directory = env("STORE"))

def main():
    return workspace(file("saved", path = "note.txt"), id = "notes", provider = store, save = True)
`)
	read := []byte(`
store = filesystem_workspace(directory = env("STORE"))

def main():
    return workspace(include(path = "note.txt", title = False), id = "notes", provider = store)
`)
	env := func(k string) (string, bool) { return store, k == "STORE" }
	exts := []*starlib.Extension{fsstar.Extension}
	if _, err := starlib.Run(context.Background(), "write.star", "", starlib.LoadOptions{Source: write, Extensions: exts, Env: env}, eval.Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := starlib.Run(context.Background(), "read.star", "", starlib.LoadOptions{Source: read, Extensions: exts, Env: env}, eval.Options{})
	if err != nil || got != "saved" {
		t.Fatalf("restored %q, %v; want the published file", got, err)
	}
	matches, _ := filepath.Glob(filepath.Join(store, "*", "workspace.json"))
	if len(matches) != 1 {
		t.Fatalf("index files %v, want one published workspace", matches)
	}
}
