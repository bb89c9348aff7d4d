// Package s3test serves gofakes3 (an in-memory S3) for tests and gives
// them a real SDK client of it with a bucket, and the environment through
// which the AWS chain finds fake credentials.
package s3test

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
)

// Server serves gofakes3 until the test ends and returns its URL and a
// path-style client with fake credentials, with bucket created.
func Server(t testing.TB, bucket string) (string, *s3.Client) {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	cli := Client(srv.URL)
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return srv.URL, cli
}

// Client is a path-style client of the S3 service at url with fake
// credentials, sending checksums only where S3 requires them.
func Client(url string) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(url),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AK", "SK", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// Env are the variables through which the AWS chain finds the fake
// credentials (and no shared configuration of the machine's).
func Env(dir string) []string {
	return []string{"AWS_ACCESS_KEY_ID=AK", "AWS_SECRET_ACCESS_KEY=SK", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
}

// SetEnv sets Env for the rest of the test.
func SetEnv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, kv := range Env(dir) {
		for i := range kv {
			if kv[i] == '=' {
				t.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
}
