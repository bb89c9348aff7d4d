package acp_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

func TestProfileLaunch(t *testing.T) {
	cmd, env := acptest.Command()
	var seen acp.LaunchContext
	p, err := acp.New(acp.Config{Name: "profiled", Command: "unused", Profile: func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		seen = lc
		env := map[string]string{"AML_FAKE_ACP_SERVE": env["AML_FAKE_ACP_SERVE"], "PROFILE_STATE": lc.StateDir, "PROFILE_MODEL": lc.Request.Model}
		return &acp.Launch{Command: cmd, Env: env, ModelHandled: true, InitialPromptPrefix: "PREFIX",
			Files: []acp.LaunchFile{{Path: "config/settings.json", Content: []byte(`{"ok":true}`)}}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "say |\ncat $PROFILE_STATE/config/settings.json\nsay |\nenv PROFILE_MODEL", Model: "big-model"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The prefix is the first line of the first turn, said back.
	if want := `PREFIX|{"ok":true}|big-model`; resp.Text != want {
		t.Fatalf("text = %q, want %q", resp.Text, want)
	}
	if !seen.Local || seen.StateDir == "" || seen.Cwd == "" {
		t.Fatalf("launch context = %+v", seen)
	}
	if _, err := os.Stat(seen.StateDir); !os.IsNotExist(err) {
		t.Fatalf("state directory %s survived the session: %v", seen.StateDir, err)
	}
	// Launch files must stay inside the state directory.
	p, _ = acp.New(acp.Config{Command: "unused", Profile: func(context.Context, acp.LaunchContext) (*acp.Launch, error) {
		return &acp.Launch{Command: cmd, Files: []acp.LaunchFile{{Path: "../escape"}}}, nil
	}})
	if _, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil); err == nil || !strings.Contains(err.Error(), "normalized relative path") {
		t.Fatalf("escaping launch file: %v", err)
	}
}

func TestGenericAgentRejectsModel(t *testing.T) {
	_, err := fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: "x", Model: "m"}, nil)
	if err == nil || !strings.Contains(err.Error(), `cannot select model "m"`) {
		t.Fatalf("error = %v", err)
	}
}

func TestProfileConfiguration(t *testing.T) {
	cmd, env := acptest.Command()
	profile := func(settings ...acp.ConfigSetting) *acp.Provider {
		p, _ := acp.New(acp.Config{Command: "unused", Profile: func(context.Context, acp.LaunchContext) (*acp.Launch, error) {
			return &acp.Launch{Command: cmd, Env: env, ModelHandled: true, Configuration: settings}, nil
		}})
		return p
	}
	resp, err := profile(
		acp.ConfigSetting{Category: "model", Value: "fake-large"},
		acp.ConfigSetting{Category: "thought_level", Value: "high"},
		acp.ConfigSetting{ID: "fast", Value: true},
	).Run(context.Background(), &eval.AgentRequest{Prompt: "config"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "fast=true,model=fake-large,thinking=high\n" {
		t.Fatalf("config = %q", resp.Text)
	}
	for _, c := range []struct {
		setting acp.ConfigSetting
		want    string
	}{
		{acp.ConfigSetting{Category: "model", Value: "gpt-9"}, `does not offer "gpt-9"`},
		{acp.ConfigSetting{Category: "other", Value: "x"}, "does not advertise configuration option category other"},
		{acp.ConfigSetting{ID: "fast", Value: "yes"}, "takes a boolean value"},
	} {
		_, err := profile(c.setting).Run(context.Background(), &eval.AgentRequest{Prompt: "config"}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.setting, err, c.want)
		}
	}
}

func TestProfileTransformAndNoSessionMCP(t *testing.T) {
	cmd, env := acptest.Command()
	var bridge *acp.BridgeInfo
	p, _ := acp.New(acp.Config{Command: "unused", Profile: func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		bridge = lc.Bridge
		return &acp.Launch{Command: cmd, Env: env, NoSessionMCP: true, TransformText: func(text string, _ map[string]any) string { return strings.ToUpper(text) }}, nil
	}})
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "msg a shout\nmcp", Output: &eval.OutputRequest{JSONSchema: map[string]any{"type": "string"}}, ToolServer: "aml"}, nil)
	if err == nil {
		t.Fatalf("no submission should fail, got %+v", resp)
	}
	if bridge == nil || bridge.Name != "aml" || !strings.HasPrefix(bridge.Authorization, "Bearer ") {
		t.Fatalf("bridge info = %+v", bridge)
	}
	resp, err = p.Run(context.Background(), &eval.AgentRequest{Prompt: "msg a shout\nmcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "SHOUT[]" || resp.Messages != nil {
		t.Fatalf("text %q messages %q: want the transformed text, no MCP servers and no messages", resp.Text, resp.Messages)
	}
}

// TestDropMessageChunk: chunks the profile drops are left out of the text
// and of the messages; the others keep their order.
func TestDropMessageChunk(t *testing.T) {
	cmd, env := acptest.Command()
	p, _ := acp.New(acp.Config{Command: "unused", Profile: func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		return &acp.Launch{Command: cmd, Env: env, DropMessageChunk: func(text string) bool { return strings.HasPrefix(text, "Info: ") }}, nil
	}})
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "msg a Info: notice\nmsg b first \nmsg b Info: dropped\nmsg b then Info: kept\nmsg c Info: another"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "first then Info: kept" || len(resp.Messages) != 1 || resp.Messages[0] != "first then Info: kept" {
		t.Fatalf("text %q messages %q", resp.Text, resp.Messages)
	}
}

// TestCredentialHint checks that a profile's hint is added to a failed
// session, and only when none of its variables is set.
func TestCredentialHint(t *testing.T) {
	cmd, env := acptest.Command()
	const hint = "found no key: set AML_TEST_KEY_A"
	run := func(extra map[string]string) error {
		p, _ := acp.New(acp.Config{Command: "unused", Profile: func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
			e := map[string]string{"AML_FAKE_ACP_SERVE": env["AML_FAKE_ACP_SERVE"], "AML_FAKE_ACP_MODE": "exit-init"}
			for k, v := range extra {
				e[k] = v
			}
			return &acp.Launch{Command: cmd, Env: e, CredentialHint: acp.CredentialHint(e, lc.Local, hint, "AML_TEST_KEY_A", "AML_TEST_KEY_B")}, nil
		}})
		_, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil)
		return err
	}
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "during initialize: fake agent: refusing to initialize; "+hint) {
		t.Fatalf("without a key: %v", err)
	}
	if err := run(map[string]string{"AML_TEST_KEY_B": "k"}); err == nil || strings.Contains(err.Error(), hint) {
		t.Fatalf("with a key in env: %v", err)
	}
	t.Setenv("AML_TEST_KEY_A", "k")
	if err := run(nil); err == nil || strings.Contains(err.Error(), hint) {
		t.Fatalf("with a key in the host environment: %v", err)
	}
	if h := acp.CredentialHint(map[string]string{}, false, hint, "AML_TEST_KEY_A"); h != hint {
		t.Fatalf("inside a sandbox the host environment does not count: %q", h)
	}
}

// TestSessionMeta: a launch's SessionMeta reaches the agent as the _meta
// of session/new; a launch without one sends none.
func TestSessionMeta(t *testing.T) {
	cmd, env := acptest.Command()
	for _, tc := range []struct {
		meta map[string]any
		want string
	}{
		{map[string]any{"systemPrompt": map[string]any{"append": "Be brief."}}, `{"systemPrompt":{"append":"Be brief."}}`},
		{nil, `null`},
	} {
		p, err := acp.New(acp.Config{Name: "meta", Command: "unused", Profile: func(context.Context, acp.LaunchContext) (*acp.Launch, error) {
			return &acp.Launch{Command: cmd, Env: env, SessionMeta: tc.meta}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "meta"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text != tc.want {
			t.Fatalf("session/new _meta = %s, want %s", resp.Text, tc.want)
		}
	}
}
