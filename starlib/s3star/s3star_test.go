package s3star_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/s3test"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/s3star"
)

// TestS3WorkspaceFactory: s3_workspace() with credentials from the
// environment (the AWS chain) publishes a revision to an S3 endpoint
// that the next run restores; a bad literal fails at the call.
func TestS3WorkspaceFactory(t *testing.T) {
	url, _ := s3test.Server(t, "work")
	s3test.SetEnv(t)
	env := func(k string) (string, bool) { return url, k == "S3_ENDPOINT" }
	exts := []*starlib.Extension{s3star.Extension}
	run := func(src string) (string, error) {
		return starlib.Run(context.Background(), filepath.Join(t.TempDir(), "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: exts, Env: env}, eval.Options{})
	}
	store := `store = s3_workspace(bucket = "work", endpoint = env("S3_ENDPOINT"), force_path_style = True, format = "folder")
`
	if _, err := run(store + `
def main():
    return workspace(file("saved in S3", path = "note.txt"), id = "notes", provider = store, save = True)
`); err != nil {
		t.Fatal(err)
	}
	got, err := run(store + `
def main():
    return workspace(include(path = "note.txt", title = False), id = "notes", provider = store)
`)
	if err != nil || got != "saved in S3" {
		t.Fatalf("restored %q, %v", got, err)
	}
	_, err = run(`store = s3_workspace(bucket = "Bad_Bucket")
def main():
    return "x"
`)
	if err == nil || !strings.Contains(err.Error(), "is not a valid bucket name") || !strings.Contains(err.Error(), "w.star:1:") {
		t.Errorf("a bad bucket name: %v", err)
	}
}
