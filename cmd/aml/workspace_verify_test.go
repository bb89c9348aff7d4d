package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestWorkspaceVerify: aml workspace verify against gofakes3 (served in
// process) prints the contract table and trusts it; a missing bucket
// fails.
func TestWorkspaceVerify(t *testing.T) {
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AK")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SK")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	cli := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"workspace", "verify", "s3://work/teams", "--endpoint", srv.URL}, nil, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if op, rest, ok := strings.Cut(line, "  "); ok {
			rows[op] = strings.Join(strings.Fields(rest), " ")
		}
	}
	for op, want := range map[string]string{
		"PutObject If-None-Match: * on an existing key": "required honoured 412 Precondition Failed",
		"GetObject If-Match with a wrong ETag":          "optional ignored the request succeeded although its condition did not hold",
	} {
		if rows[op] != want {
			t.Errorf("row %q: %q, want %q\n%s", op, rows[op], want, out.String())
		}
	}
	if !strings.Contains(out.String(), "s3://work/teams: s3_workspace() can trust this service") {
		t.Errorf("no verdict:\n%s", out.String())
	}
	out.Reset()
	if code := Main([]string{"workspace", "verify", "--json", "--endpoint", srv.URL, "s3://work"}, nil, &out, &errOut); code != exitOK {
		t.Fatalf("--json: exit %d", code)
	}
	var rep struct {
		Trusted bool `json:"trusted"`
		Checks  []struct{ Operation, Result string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.Trusted || len(rep.Checks) < 9 {
		t.Errorf("--json: %+v, %v\n%s", rep, err, out.String())
	}
	errOut.Reset()
	if code := Main([]string{"workspace", "verify", "s3://nosuch-bucket", "--endpoint", srv.URL}, nil, &out, &errOut); code != exitFailure || !strings.Contains(errOut.String(), "does not exist") {
		t.Errorf("a missing bucket: exit %d, %s", code, errOut.String())
	}
	if code := Main([]string{"workspace", "verify", "work"}, nil, &out, &errOut); code != exitUsage {
		t.Errorf("an argument that is not s3://: exit %d", code)
	}
}
