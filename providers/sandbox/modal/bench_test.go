package modal_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/modaldouble"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/docker"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// benchWorkspace makes n random files of size bytes in ten directories.
func benchWorkspace(b *testing.B, n, size int) string {
	dir := b.TempDir()
	buf := make([]byte, size)
	for i := range n {
		_, _ = rand.Read(buf)
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// benchProviders are the Modal provider over the double (through the
// official SDK) and the Docker sandbox on the double's engine.
func benchProviders(b *testing.B) (map[string]eval.SandboxProvider, *modaldouble.Double) {
	d := modaldouble.New(b)
	rp, err := remote.New(remote.Options{Service: newService(b, d, modal.Options{}, nil), GuestRoot: "/workspace"})
	if err != nil {
		b.Fatal(err)
	}
	dp, err := docker.New(docker.Options{Client: d.Docker().Client(), Image: remotetest.Image})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]eval.SandboxProvider{"modal": rp, "docker": dp}, d
}

func benchRequest(dir string) *eval.SandboxAcquireRequest {
	return &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "bench",
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}}
}

// BenchmarkAcquireRelease: a read-write lease of a 1,000-file, 20 MB
// workspace acquired and released, through the Modal double and on the
// Docker sandbox. The storage of a terminated sandbox, which the service
// reclaims after it answers, is waited for outside the timer.
func BenchmarkAcquireRelease(b *testing.B) {
	dir := benchWorkspace(b, 1000, 20<<10)
	ps, d := benchProviders(b)
	for name, p := range ps {
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
				d.Docker().Settle()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkExec: the round trip of one short command.
func BenchmarkExec(b *testing.B) {
	dir := b.TempDir()
	ps, _ := benchProviders(b)
	for name, p := range ps {
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
