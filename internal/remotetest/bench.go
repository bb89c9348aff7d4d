package remotetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// Tree makes a temporary directory of n files of size random bytes each
// (so that nothing compresses) spread over ten subdirectories.
func Tree(tb testing.TB, n, size int) string {
	tb.Helper()
	dir := tb.TempDir()
	buf := make([]byte, size)
	for i := range n {
		_, _ = rand.Read(buf)
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// DockerBeside returns the Docker sandbox on d's engine with the test
// image: what a remote provider is measured against.
func DockerBeside(tb testing.TB, d *Docker) eval.SandboxProvider {
	tb.Helper()
	p, err := docker.New(docker.Options{Client: d.Client(), Image: Image})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func benchRequest(dir string) *eval.SandboxAcquireRequest {
	return &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "bench",
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}}
}

// BenchAcquireRelease measures, for each provider, a read-write lease of
// a 1,000-file, 20 MB workspace acquired and released. What the time
// counts is what a user waits for: the storage a destroyed remote
// sandbox leaves is reclaimed by the service after it answers, on its
// own machines, so d's reclamation is waited for outside the timer.
func BenchAcquireRelease(b *testing.B, d *Docker, providers map[string]eval.SandboxProvider) {
	dir := Tree(b, 1000, 20<<10)
	for name, p := range providers {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				l, err := p.Acquire(context.Background(), benchRequest(dir))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				d.Settle()
				b.StartTimer()
			}
		})
	}
}

// BenchExec measures, for each provider, the round trip of one short
// command in a lease.
func BenchExec(b *testing.B, providers map[string]eval.SandboxProvider) {
	dir := b.TempDir()
	for name, p := range providers {
		b.Run(name, func(b *testing.B) {
			l, err := p.Acquire(context.Background(), benchRequest(dir))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Release(context.Background())
			for b.Loop() {
				if _, err := l.Runtime().Exec(context.Background(), "true", nil, eval.ExecOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
