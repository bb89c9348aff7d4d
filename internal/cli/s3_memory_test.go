//go:build linux

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aml-go/aml/internal/s3test"
	"github.com/aml-go/aml/internal/testbin"
)

// BenchmarkS3SaveMemory reports the peak resident memory of aml run
// saving a workspace with one 1 GiB incompressible file to an S3
// workspace (gofakes3 served by this process, so its storage does not
// count), above the same run with a 1 KiB file.
func BenchmarkS3SaveMemory(b *testing.B) {
	bin := buildAMLB(b)
	url, _ := s3test.Server(b, "work")
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
		cmd.Env = append(append(os.Environ(), "S3_ENDPOINT="+url, "ID="+id, "SIZE="+size), s3test.Env(dir)...)
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
	return testbin.Build(b, "github.com/aml-go/aml/cmd/aml", testbin.Options{})
}
