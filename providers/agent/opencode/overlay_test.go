package opencode_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/opencode"
)

func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}

// TestConfigOverlay checks the private configuration a session receives,
// with the fake ACP agent standing in for opencode: the user's config is
// kept, the aml agent follows the permissions (denials also top-level),
// the model follows the precedence, and staged skills are discovered
// natively; the database and XDG directories are private.
func TestConfigOverlay(t *testing.T) {
	cmd, env := acptest.Command()
	env["XDG_DATA_HOME"] = "/srv/opencode-data"
	p, err := opencode.New(opencode.Options{
		Base: acp.Base{Command: cmd, Env: env, Model: "factory/model"},
		Config: map[string]any{
			"model":      "config/model",
			"theme":      "dark",
			"permission": "ask",
			"tools":      map[string]any{"webfetch": true, "todowrite": false},
			"agent":      map[string]any{"build": map[string]any{"mode": "primary"}, "aml": map[string]any{"tools": map[string]any{"bash": true, "grep": false}}},
			"skills":     map[string]any{"paths": []any{"/opt/skills"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &eval.AgentRequest{
		Prompt:      "argv\nenv OPENCODE_CONFIG_CONTENT\nsay |\nenv OPENCODE_DB\nsay |\nenv XDG_CONFIG_HOME\nsay |\nenv XDG_DATA_HOME",
		Permissions: eval.Permissions{Filesystem: "read-only", Network: true},
		Skills:      []eval.AgentSkill{{Name: "review", Dir: "/tmp/stage/.agents/skills/review"}},
	}
	resp, err := p.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	argv, rest, _ := strings.Cut(resp.Text, "\n{")
	if !strings.HasPrefix(argv, "acp\n--pure\n--cwd\n") {
		t.Fatalf("argv = %q", argv)
	}
	fields := strings.Split("{"+rest, "|")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(fields[0]), &cfg); err != nil {
		t.Fatalf("config %q: %v", fields[0], err)
	}
	if cfg["theme"] != "dark" || cfg["model"] != "factory/model" || cfg["default_agent"] != "aml" {
		t.Errorf("config = %v", cfg)
	}
	agents := cfg["agent"].(map[string]any)
	if agents["build"] == nil {
		t.Error("the user's build agent was dropped")
	}
	aml := agents["aml"].(map[string]any)
	tools := aml["tools"].(map[string]any)
	for name, want := range map[string]any{"edit": false, "write": false, "bash": false, "grep": false, "webfetch": true, "todowrite": false} {
		if tools[name] != want {
			t.Errorf("aml tools[%s] = %v, want %v (tools %v)", name, tools[name], want, tools)
		}
	}
	if aml["mode"] != "primary" || aml["permission"].(map[string]any)["bash"] != "deny" {
		t.Errorf("aml agent = %v", aml)
	}
	top := cfg["permission"].(map[string]any)
	if top["*"] != "ask" || top["edit"] != "deny" || top["write"] != "deny" || top["bash"] != "deny" || top["webfetch"] != nil {
		t.Errorf("top-level permission = %v", top)
	}
	paths := cfg["skills"].(map[string]any)["paths"].([]any)
	if len(paths) != 2 || paths[0] != "/opt/skills" || paths[1] != "/tmp/stage/.agents/skills/review" {
		t.Errorf("skills.paths = %v", paths)
	}
	if len(fields) != 4 || !strings.HasSuffix(fields[1], "/opencode.db") || !strings.Contains(fields[2], "aml-acp-") || fields[3] != "/srv/opencode-data" {
		t.Errorf("state = %q", fields[1:])
	}
	// agent(model=) wins over the factory model.
	req.Model, req.Prompt = "agent/model", "env OPENCODE_CONFIG_CONTENT"
	resp, err = p.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Text, `"model":"agent/model"`) {
		t.Errorf("config = %s", resp.Text)
	}
	if !p.NativeSkillDiscovery() {
		t.Error("opencode discovers skills natively")
	}
}
