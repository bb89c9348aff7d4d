package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
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

// TestSandboxIncludeIsBounded: include(path=) in a sandbox of a 100 GB
// sparse file, over max_bytes, is read as a stream and refused at its
// first NUL byte, allocating nothing like its size; a large text file
// left in place is counted up to a bound ("at least N lines"), and one
// within max_bytes is read whole.
func TestSandboxIncludeIsBounded(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 30); err != nil {
		t.Skipf("skipping: cannot create a 100 GB sparse file here (%v)", err)
	}
	f.Close()
	text := strings.Repeat("0123456789abcdef\n", 4_200_000) // 71 MB, over the 64 MiB counted
	if err := os.WriteFile(filepath.Join(dir, "long.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := deterministic.New(deterministic.Options{SupportsSandbox: true, Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		return &eval.AgentResponse{Text: req.Prompt}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := eval.New(eval.Options{AgentProvider: p, SandboxProvider: host(t)})
	in := func(children ...any) any {
		return &eval.Workspace{Provider: &fixedWorkspace{dir}, Children: []any{&eval.Sandbox{Access: eval.ReadOnly, Children: []any{&eval.Agent{Children: children}}}}}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = rt.Evaluate(context.Background(), in(&eval.Include{Path: "huge.bin", MaxBytes: 1000, Position: pos(2)}))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "the file contains a NUL byte at offset 0") {
		t.Fatalf("a 100 GB sparse include in a sandbox: %v", err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<20 {
		t.Fatalf("allocated %d MiB: the file was read into memory", allocated>>20)
	}
	got, err := rt.Evaluate(context.Background(), in(&eval.Include{Path: "long.txt", MaxBytes: 1000, NoTitle: true}, " ", &eval.Include{Path: "small.txt", MaxBytes: 1000, NoTitle: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "`long.txt` is 71,400,000 bytes and at least 3,947,581 lines (counted in its first 67,108,864 bytes)") || !strings.HasSuffix(got, "small") {
		t.Fatalf("result %.300q", got)
	}
}
