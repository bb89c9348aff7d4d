package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aml-go/aml/eval"
)

// TestAppFiles: with Options.AppFiles, include(src=) and file(src=) read
// from it and never from the host directory Cwd; absolute paths, paths
// that leave the directory and skill() packages are refused with errors
// that say why.
func TestAppFiles(t *testing.T) {
	host := t.TempDir()
	// A file of the same name on the host must not be what is read.
	if err := os.WriteFile(filepath.Join(host, "brief.md"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := fstest.MapFS{"brief.md": {Data: []byte("from the bundle\n")}, "dir/x.md": {Data: []byte("x\n")}}
	rt, err := eval.New(eval.Options{Cwd: host, AppFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Evaluate(context.Background(), []any{&eval.Include{Src: "brief.md", NoTitle: true}, &eval.Include{Src: "./dir/../dir/x.md", NoTitle: true}})
	if err != nil || got != "from the bundle\nx\n" {
		t.Fatalf("include(src=) from AppFiles: %q, %v", got, err)
	}
	for _, src := range []string{filepath.Join(host, "brief.md"), "../brief.md", "missing.md", "dir"} {
		_, err := rt.Evaluate(context.Background(), &eval.Include{Src: src})
		if err == nil {
			t.Fatalf("include(src=%q) read something", src)
		}
		if src == "dir" && !strings.Contains(err.Error(), "not a directory") && !strings.Contains(err.Error(), "regular file") {
			t.Fatalf("include(src=%q): %v", src, err)
		}
		if strings.HasPrefix(src, "/") || strings.HasPrefix(src, "..") {
			if !strings.Contains(err.Error(), "not a relative path inside the working directory") {
				t.Fatalf("include(src=%q): %v", src, err)
			}
		}
	}
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Children: []any{"x", &eval.Skill{Src: "dir"}}})
	if err == nil || !strings.Contains(err.Error(), "holds no skill packages") {
		t.Fatalf("skill() with AppFiles: %v", err)
	}
}
