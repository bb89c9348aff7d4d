//go:build unix

package hostexec_test

import (
	"context"
	"testing"

	"github.com/aml-go/aml/eval"
)

// BenchmarkExecRoundTrip measures one Exec of "echo hi": process group
// start, output collection, reaping.
func BenchmarkExecRoundTrip(b *testing.B) {
	ws := b.TempDir()
	rt := open(b, options(ws, eval.ReadWrite, ".", ".")).Runtime()
	ctx := context.Background()
	args := []string{"hi"}
	b.ReportAllocs()
	for b.Loop() {
		res, err := rt.Exec(ctx, "echo", args, eval.ExecOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if string(res.Stdout) != "hi\n" {
			b.Fatalf("stdout %q", res.Stdout)
		}
	}
}
