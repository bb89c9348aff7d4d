package starlib_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/s3test"
	"github.com/aml-go/aml/starlib"
)

// TestS3Example runs examples/workspace_s3.star twice against an S3
// endpoint (gofakes3 in process) with credentials from the environment:
// the second run continues from the revision the first saved.
func TestS3Example(t *testing.T) {
	url, _ := s3test.Server(t, "work")
	s3test.SetEnv(t)
	env := map[string]string{"AML_S3_ENDPOINT": url, "AML_S3_BUCKET": "work"}
	lo := starlib.LoadOptions{Extensions: allExtensions, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	root, _ := filepath.Abs("..")
	for _, want := range []string{"run 1", "run 2"} {
		got, err := starlib.Run(context.Background(), filepath.Join("..", "examples", "workspace_s3.star"), "", lo, eval.Options{Cwd: root})
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
}
