package eval_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
