package s3star_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/s3star"
)

// TestS3WorkspaceFactory: s3_workspace() with credentials from the
// environment (the AWS chain) publishes a revision to an S3 endpoint
// that the next run restores; a bad literal fails at the call.
func TestS3WorkspaceFactory(t *testing.T) {
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
	env := func(k string) (string, bool) { return srv.URL, k == "S3_ENDPOINT" }
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
