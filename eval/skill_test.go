package eval_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

type nativeSkills struct{ *deterministic.Agent }

func (nativeSkills) NativeSkillDiscovery() bool { return true }

func TestSkillStagedForTheSessionOnly(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg", "my-skill")
	if err := os.MkdirAll(filepath.Join(pkg, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"SKILL.md":         "---\nname: my-skill\ndescription: Does things.\n---\nBody.\n",
		"assets/logo.bin":  "\x00\x01\x02binary",
		"assets/notes.txt": "notes",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var seen eval.AgentSkill
	var system string
	inner, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if len(req.Skills) != 1 {
			return nil, errors.New("want one skill")
		}
		seen, system = req.Skills[0], req.System
		for name, content := range files {
			data, err := os.ReadFile(filepath.Join(seen.Dir, name))
			if err != nil || string(data) != content {
				return nil, errors.New("staged copy of " + name + " is missing or differs")
			}
		}
		return &eval.AgentResponse{Text: "ok"}, nil
	}})
	rt, _ := eval.New(eval.Options{AgentProvider: nativeSkills{inner}, Cwd: dir})
	if _, err := rt.Evaluate(context.Background(), &eval.Agent{Children: []any{&eval.Skill{Src: "pkg/my-skill"}, "x"}}); err != nil {
		t.Fatal(err)
	}
	if seen.Name != "my-skill" || seen.SkillFile != filepath.Join(seen.Dir, "SKILL.md") || filepath.Join(seen.Home, "skills", "my-skill") != seen.Dir {
		t.Fatalf("skill %+v", seen)
	}
	if system != "" {
		t.Fatalf("a native-discovery provider got the fallback fragment: %q", system)
	}
	if _, err := os.Stat(seen.Home); !os.IsNotExist(err) {
		t.Fatalf("staging area survived the session: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pkg, "SKILL.md")); err != nil {
		t.Fatalf("the source package was changed: %v", err)
	}
}

// TestStagingInsideSandboxUsesTheRuntime checks that inside a sandbox the
// agent's staging area comes from the sandbox runtime, so the agent sees
// it even when the sandbox is read-only.
func TestStagingInsideSandboxUsesTheRuntime(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "my-skill")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "SKILL.md"), []byte("---\nname: my-skill\ndescription: Does things.\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := deterministic.NewSandbox(deterministic.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var skill eval.AgentSkill
	agent, _ := deterministic.New(deterministic.Options{SupportsSandbox: true, Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		skill = req.Skills[0]
		return &eval.AgentResponse{Text: "ok"}, nil
	}})
	rt, _ := eval.New(eval.Options{AgentProvider: agent, SandboxProvider: sb, Cwd: dir})
	if _, err := rt.Evaluate(context.Background(), &eval.Sandbox{Children: []any{&eval.Agent{Children: []any{&eval.Skill{Src: "my-skill"}, "go"}}}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(skill.SkillFile, "/deterministic-staging/") || !strings.HasSuffix(skill.SkillFile, "/.agents/skills/my-skill/SKILL.md") {
		t.Fatalf("skill staged at %q, want the sandbox's staging area", skill.SkillFile)
	}
	found := false
	for _, w := range sb.Writes() {
		if strings.HasSuffix(w.Path, "/.agents/skills/my-skill/SKILL.md") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the sandbox recorded no staged SKILL.md: %+v", sb.Writes())
	}
}
