package remotetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/docker"
	"github.com/aml-go/aml/providers/sandbox/remote"
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

// BenchServiceCalls measures, beside the Docker sandbox, the calls to
// svc that the seed's lifecycle of a read-write lease makes, with no
// provider code around them: create a sandbox, upload the archive of a
// 1,000-file, 20 MB tree, run the remote command that extracts it below
// root, run the one that archives root, download that archive to its end,
// destroy the sandbox. It is the floor under the provider's
// acquire-and-release time on svc: what the service costs before the
// provider walks, compares or mirrors anything.
func BenchServiceCalls(b *testing.B, d *Docker, svc remote.Service, root string) {
	archive := filepath.Join(b.TempDir(), "workspace.tar")
	if out, err := exec.Command("tar", "-cf", archive, "-C", Tree(b, 1000, 20<<10), ".").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v %s", err, out)
	}
	ctx := context.Background()
	run := func(m remote.Machine, script string, args ...string) {
		p, err := m.Start(ctx, remote.Command{Args: append([]string{"/bin/sh", "-c", script, "sh"}, args...)})
		if err != nil {
			b.Fatal(err)
		}
		var stderr strings.Builder
		done := make(chan struct{})
		go func() { _, _ = io.Copy(&stderr, p.Stderr()); close(done) }()
		_, _ = io.Copy(io.Discard, p.Stdout())
		<-done
		if code, err := p.Wait(); err != nil || code != 0 {
			b.Fatalf("%q: exit %d, %v: %s", script, code, err, stderr.String())
		}
	}
	b.Run("service-calls", func(b *testing.B) {
		for b.Loop() {
			m, err := svc.Create(ctx, remote.CreateRequest{Labels: map[string]string{"aml-bench": "floor"}})
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Open(archive)
			if err != nil {
				b.Fatal(err)
			}
			err = m.Upload(ctx, "/tmp/in.tar", f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			run(m, `mkdir -p -- "$1" && tar -xf "$2" -C "$1" && rm -f -- "$2"`, root, "/tmp/in.tar")
			run(m, `tar -cf "$2" -C "$1" .`, root, "/tmp/out.tar")
			rc, err := m.Download(ctx, "/tmp/out.tar")
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil || n < 20<<20 {
				b.Fatalf("downloaded %d bytes: %v", n, err)
			}
			if err := m.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			d.Settle()
			b.StartTimer()
		}
	})
}
