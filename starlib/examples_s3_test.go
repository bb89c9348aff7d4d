package starlib_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// TestS3Example runs examples/workspace_s3.star twice against an S3
// endpoint (gofakes3 in process) with credentials from the environment:
// the second run continues from the revision the first saved.
func TestS3Example(t *testing.T) {
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AK")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SK")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	cli := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AML_S3_ENDPOINT": srv.URL, "AML_S3_BUCKET": "work"}
	lo := starlib.LoadOptions{Extensions: allExtensions, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	root, _ := filepath.Abs("..")
	for _, want := range []string{"run 1", "run 2"} {
		got, err := starlib.Run(context.Background(), filepath.Join("..", "examples", "workspace_s3.star"), "", lo, eval.Options{Cwd: root})
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
}
