package eval_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
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
	// A skill package comes from AppFiles too, and is staged for the
	// agent as one from the host would be.
	files["skills/review/SKILL.md"] = &fstest.MapFile{Data: []byte("---\nname: review\ndescription: Reviews.\n---\nRead the diff.\n")}
	files["skills/review/scripts/run.sh"] = &fstest.MapFile{Data: []byte("echo hi\n"), Mode: 0o755}
	var staged string
	p, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if len(req.Skills) != 1 {
			return nil, fmt.Errorf("%d skills", len(req.Skills))
		}
		data, err := os.ReadFile(req.Skills[0].SkillFile)
		if err != nil {
			return nil, err
		}
		script, err := os.Stat(filepath.Join(req.Skills[0].Dir, "scripts", "run.sh"))
		if err != nil || script.Mode()&0o100 == 0 {
			return nil, fmt.Errorf("the package script: %v", err)
		}
		staged = string(data)
		return &eval.AgentResponse{Text: req.Skills[0].Name}, nil
	}})
	rt, err = eval.New(eval.Options{Cwd: host, AppFiles: files, AgentProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	got, err = rt.Evaluate(context.Background(), &eval.Agent{Children: []any{"x", &eval.Skill{Src: "skills/review"}}})
	if err != nil || got != "review" || !strings.Contains(staged, "Read the diff.") {
		t.Fatalf("skill() from AppFiles: %q, %v (staged %q)", got, err, staged)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Children: []any{"x", &eval.Skill{Src: "brief.md"}}})
	if err == nil || !strings.Contains(err.Error(), "must name a package directory") {
		t.Fatalf("skill() of a file: %v", err)
	}
}

// TestAppFileKinds: include(src=) of an entry that is not a regular file
// names its type in the evaluator's words (filekind.Coarse): any device
// is a "device", an entry of no named type a "special file".
func TestAppFileKinds(t *testing.T) {
	files := fstest.MapFS{
		"tty":  {Mode: fs.ModeDevice | fs.ModeCharDevice},
		"disk": {Mode: fs.ModeDevice},
		"fifo": {Mode: fs.ModeNamedPipe},
		"odd":  {Mode: fs.ModeIrregular},
		"dir":  {Mode: fs.ModeDir | 0o755},
	}
	rt, err := eval.New(eval.Options{Cwd: t.TempDir(), AppFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	for src, kind := range map[string]string{"tty": "device", "disk": "device", "fifo": "named pipe", "odd": "special file", "dir": "directory"} {
		_, err := rt.Evaluate(context.Background(), &eval.Include{Src: src})
		if want := "must name a regular file, not a " + kind; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("include(src=%q): %v, want %q", src, err, want)
		}
	}
}
