package remote_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// providers are the remote provider over container sandboxes and the
// Docker sandbox, for the same measurements.
func providers(b *testing.B) (map[string]eval.SandboxProvider, *remotetest.Docker) {
	d := remotetest.New(b, "/home/user")
	rp, err := remote.New(remote.Options{Service: d, GuestRoot: "workspace"})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]eval.SandboxProvider{"remote": rp, "docker": remotetest.DockerBeside(b, d)}, d
}

// BenchmarkAcquireRelease: acquire and release of a 1,000-file, 20 MB
// workspace (hydration and the mirror for the remote one, a bind mount
// for Docker).
func BenchmarkAcquireRelease(b *testing.B) {
	ps, d := providers(b)
	remotetest.BenchAcquireRelease(b, d, ps)
}

// BenchmarkExec: the round trip of one short command.
func BenchmarkExec(b *testing.B) {
	ps, _ := providers(b)
	remotetest.BenchExec(b, ps)
}

// TestTransferMemory: a 128 MB workspace goes in and comes back (one
// file changed, so the mirror writes it) with the heap never more than
// 64 MB above where it started: transfers are streamed, never buffered
// whole. AML_TRANSFER_TEST_MB sets the size (1024 for the 1 GB figure).
func TestTransferMemory(t *testing.T) {
	mb := 128
	if v := os.Getenv("AML_TRANSFER_TEST_MB"); v != "" {
		fmt.Sscan(v, &mb)
	}
	d := remotetest.New(t, "/home/user")
	p, err := remote.New(remote.Options{Service: d, GuestRoot: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	dir := remotetest.Tree(t, mb/8, 8<<20)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	start := time.Now()
	l, err := p.Acquire(context.Background(), request(dir, eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := l.Runtime().Exec(context.Background(), "sh", []string{"-c", "echo changed >> d0/f0.bin"}, eval.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(stop)
	above := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("%d MB in and back in %v; heap peak %d MB above the start", mb, time.Since(start).Round(time.Millisecond), above>>20)
	if above > 64<<20 {
		t.Errorf("the heap grew %d MB during a %d MB transfer: not streamed", above>>20, mb)
	}
}

// BenchmarkServiceCalls: the service calls of one read-write lease
// without the provider (remotetest.BenchServiceCalls), the floor under
// BenchmarkAcquireRelease.
func BenchmarkServiceCalls(b *testing.B) {
	d := remotetest.New(b, "/home/user")
	remotetest.BenchServiceCalls(b, d, d, "workspace")
}
