//go:build unix

package local_test

import (
	"context"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// BenchmarkAcquireRelease measures one acquisition (path resolution, no
// setup) and its release.
func BenchmarkAcquireRelease(b *testing.B) {
	ws := b.TempDir()
	p := newProvider(b, local.Options{})
	req := request(ws, eval.ReadWrite, ".", ".")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
