package codex_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/codex"
)

func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}

// TestLaunchEnvironment checks what the adapter receives, with the fake
// ACP agent standing in for codex-acp: the config with AML's fields, the
// AML-owned variables over env=, the mode from the permissions, the
// skills home and api-key authentication.
func TestLaunchEnvironment(t *testing.T) {
	cmd, env := acptest.Command()
	env["AML_FAKE_ACP_MODE"] = "auth"
	env["AML_FAKE_ACP_AUTH_METHOD"] = "api-key"
	env["CODEX_HOME"] = "/user/choice"
	p, err := codex.New(codex.Options{
		Base:            acp.Base{Command: cmd, Env: env, Model: "gpt-x"},
		APIKey:          "sk-secret",
		CodexPath:       "/opt/codex",
		ReasoningEffort: "high",
		Config:          map[string]any{"approval_policy": "never", "model": "ignored"},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &eval.AgentRequest{
		Prompt:      "env CODEX_CONFIG\nsay |\nenv CODEX_HOME\nsay |\nenv INITIAL_AGENT_MODE\nsay |\nenv CODEX_PATH\nsay |\nenv CODEX_API_KEY\nsay |\nenv NO_BROWSER",
		System:      "Be careful.",
		Permissions: eval.Permissions{Filesystem: "read-only"},
		Skills:      []eval.AgentSkill{{Name: "review", Home: "/tmp/stage/.agents", Dir: "/tmp/stage/.agents/skills/review"}},
	}
	resp, err := p.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(resp.Text, "|")
	if len(f) != 6 {
		t.Fatalf("text = %q", resp.Text)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(f[0]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["approval_policy"] != "never" || cfg["model"] != "gpt-x" || cfg["model_reasoning_effort"] != "high" || cfg["developer_instructions"] != "Be careful." {
		t.Errorf("CODEX_CONFIG = %v", cfg)
	}
	if f[1] != "/tmp/stage/.agents" || f[2] != "read-only" || f[3] != "/opt/codex" || f[4] != "sk-secret" || f[5] != "1" {
		t.Errorf("environment = %q", f[1:])
	}
	// The system text is configuration, not a prompt prelude.
	req.Prompt = "echo"
	req.Permissions = eval.DefaultPermissions()
	req.Skills = nil
	resp, err = p.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo" {
		t.Errorf("first turn = %q, want no <SYSTEM> prelude", resp.Text)
	}
}
