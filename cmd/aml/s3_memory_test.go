//go:build linux

package main

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// BenchmarkS3SaveMemory reports the peak resident memory of aml run
// saving a workspace with one 1 GiB incompressible file to an S3
// workspace (gofakes3 served by this process, so its storage does not
// count), above the same run with a 1 KiB file.
func BenchmarkS3SaveMemory(b *testing.B) {
	bin := buildAMLB(b)
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer srv.Close()
	cli := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	wf := filepath.Join(dir, "big.star")
	src := `store = s3_workspace(bucket = "work", endpoint = env("S3_ENDPOINT"), force_path_style = True, max_archive_bytes = 2147483648, max_extracted_bytes = 2147483648)

def main():
    return workspace(
        sandbox(script("head -c $SIZE /dev/urandom > big.bin; echo done", shell = "sh"), provider = local_sandbox(), access = "read-write"),
        id = env("ID"), provider = store, save = True,
    )
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	peak := func(id, size string) float64 {
		cmd := exec.Command(bin, "run", "--quiet", wf)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "S3_ENDPOINT="+srv.URL, "AWS_ACCESS_KEY_ID=AK", "AWS_SECRET_ACCESS_KEY=SK", "AWS_REGION=us-east-1",
			"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"), "ID="+id, "SIZE="+size)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("aml run: %v\n%s", err, out)
		}
		return float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB -> MiB
	}
	for i := 0; i < b.N; i++ {
		base := peak("small", "1024")
		big := peak("big", "1073741824")
		b.ReportMetric(base, "baseline-MB")
		b.ReportMetric(big-base, "above-baseline-MB")
	}
}

// buildAMLB builds the aml binary for a benchmark.
func buildAMLB(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "aml")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
