package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
)

var stagedPath = regexp.MustCompile("Read it from `([^`]+)`")

// TestIncludeStagingLifecycle checks an oversized include is staged for
// the agent's session only: the copy exists while the provider runs and is
// gone afterwards, on success and on failure.
func TestIncludeStagingLifecycle(t *testing.T) {
	dir := t.TempDir()
	body := strings.Repeat("0123456789\n", 100)
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{false, true} {
		var staged string
		p, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
			m := stagedPath.FindStringSubmatch(req.Prompt)
			if m == nil {
				return nil, errors.New("no read instruction in the prompt")
			}
			staged = m[1]
			data, err := os.ReadFile(staged)
			if err != nil || string(data) != body {
				return nil, errors.New("the staged copy is missing or differs")
			}
			if fail {
				return nil, errors.New("provider failed")
			}
			return &eval.AgentResponse{Text: "read"}, nil
		}})
		rt, _ := eval.New(eval.Options{AgentProvider: p, Cwd: dir})
		got, err := rt.Evaluate(context.Background(), &eval.Agent{Children: []any{&eval.Include{Src: "big.txt", MaxBytes: 100}}})
		if fail != (err != nil) || (!fail && got != "read") {
			t.Fatalf("fail=%v: got %q, %v", fail, got, err)
		}
		if fail && !strings.Contains(err.Error(), "provider failed") {
			t.Fatalf("error %v", err)
		}
		if staged == "" {
			t.Fatal("the provider saw no staged copy")
		}
		if _, err := os.Stat(filepath.Dir(filepath.Dir(filepath.Dir(staged)))); !os.IsNotExist(err) {
			t.Fatalf("fail=%v: the staging area survived the session: %v", fail, err)
		}
	}
}

// TestIncludeStagingReleasedWhenSiblingFails checks the staging area is
// removed when the agent never runs because a later child failed.
func TestIncludeStagingReleasedWhenSiblingFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("x", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A private temporary directory, so that staging areas of tests
	// running at the same time in other packages are not counted.
	t.Setenv("TMPDIR", t.TempDir())
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "aml-agent-*"))
	rt, _ := eval.New(eval.Options{AgentProvider: echo(t, nil), Cwd: dir})
	boom := &eval.Component{Name: "Boom", Fn: func(*eval.ComponentContext) (any, error) { return nil, errors.New("boom") }}
	_, err := rt.Evaluate(context.Background(), &eval.Agent{Children: []any{&eval.Include{Src: "big.txt", MaxBytes: 10}, boom}})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "aml-agent-*"))
	if len(after) > len(before) {
		t.Fatalf("staging areas leaked: before %v, after %v", before, after)
	}
}

func TestIncludeCacheSeesChanges(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "note.md")
	rt, _ := eval.New(eval.Options{Cwd: dir})
	for i, content := range []string{"first", "second version"} {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := rt.Evaluate(context.Background(), &eval.Include{Src: "note.md", NoTitle: true})
		if err != nil || got != content {
			t.Fatalf("read %d: %q, %v", i, got, err)
		}
	}
}

// TestHostStagingThroughTheHost: with a host that makes temporary
// directories (the local sandbox), an agent's host staging is made and
// removed through it, so it carries its owner marker while it exists.
func TestHostStagingThroughTheHost(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("x", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	var root string
	p, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		m := stagedPath.FindStringSubmatch(req.Prompt)
		if m == nil {
			return nil, errors.New("no read instruction in the prompt")
		}
		root = filepath.Dir(filepath.Dir(filepath.Dir(m[1]))) // <root>/includes/<n>/big.txt
		if _, err := os.Stat(root + ".owner"); err != nil {
			return nil, fmt.Errorf("the staging %s has no owner marker: %w", root, err)
		}
		return &eval.AgentResponse{Text: "read"}, nil
	}})
	host, err := local.New(local.Options{})
	if err != nil {
		t.Skip(err)
	}
	rt, _ := eval.New(eval.Options{AgentProvider: p, Cwd: dir, Host: host})
	if _, err := rt.Evaluate(context.Background(), &eval.Agent{Children: []any{&eval.Include{Src: "big.txt", MaxBytes: 100}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, root + ".owner"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived the session: %v", p, err)
		}
	}
}
