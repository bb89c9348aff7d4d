package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// TestIncludeSparseFileStreams: an oversized include(src=) of a 2 GB
// sparse file (all NUL bytes) fails at its first byte without reading
// the file into memory.
func TestIncludeSparseFileStreams(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Skipf("skipping: cannot create a 2 GB sparse file here (%v)", err)
	}
	f.Close()
	rt, _ := eval.New(eval.Options{AgentProvider: echo(t, nil), Cwd: dir})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Children: []any{&eval.Include{Src: "huge.bin", MaxBytes: 1024, Position: pos(2)}}})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "t.star:2:1: include(src=\"huge.bin\"): the file contains a NUL byte at offset 0") {
		t.Fatalf("error = %v", err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB while refusing a 2 GB sparse include", allocated>>10)
	if allocated > 64<<20 {
		t.Fatalf("allocated %d MiB: the file was read into memory", allocated>>20)
	}
}
