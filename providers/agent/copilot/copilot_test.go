package copilot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/copilot"
)

func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}

// The profile's launch, observed by the fake ACP agent standing in for
// the Copilot CLI.
func TestLaunch(t *testing.T) {
	cmd, env := acptest.Command()
	env["GH_TOKEN"] = "gh-secret"
	p, err := copilot.New(copilot.Options{Base: acp.Base{Command: cmd, Env: env, Args: []string{"--user-flag"}}, ReasoningEffort: "high"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Run(context.Background(), &eval.AgentRequest{
		Prompt:      "argv\nenv COPILOT_HOME\nsay |\nenv HOME",
		Model:       "gpt-5",
		Permissions: eval.Permissions{Filesystem: "read-only", Network: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(resp.Text, "\n")
	argv := strings.Join(lines[:len(lines)-1], " ")
	for _, want := range []string{
		"--user-flag --acp --no-auto-update --log-dir=",
		"--no-custom-instructions --disable-builtin-mcps --no-ask-user --auth-token-env=GH_TOKEN --no-auto-login --no-color --no-remote --no-remote-export --model=gpt-5 --reasoning-effort=high",
		"--deny-tool=write --deny-tool=shell --excluded-tools=" + strings.Join(append(slices.Clone(copilot.ReadOnlyExcluded), copilot.ShellExcluded...), ","),
	} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv %q lacks %q", argv, want)
		}
	}
	if strings.Contains(argv, "gh-secret") || strings.Contains(argv, "web_fetch") {
		t.Errorf("argv %q carries the token value or a network exclusion", argv)
	}
	home := lines[len(lines)-1]
	parts := strings.Split(home, "|")
	if len(parts) != 2 || parts[0] == "" || parts[0] != parts[1] || !strings.Contains(parts[0], "aml-acp-") {
		t.Errorf("COPILOT_HOME|HOME = %q, want the same private state directory", home)
	}
}

// Granted tools are named for the model in the first turn, and the
// structured instruction names Copilot's spelling of the submission tool.
func TestToolHintsAndInstruction(t *testing.T) {
	cmd, env := acptest.Command()
	p, _ := copilot.New(copilot.Options{Base: acp.Base{Command: cmd, Env: env}})
	s, _ := eval.NewSchema(map[string]any{"type": "string"})
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up.", Execute: func(context.Context, any) (any, error) { return "x", nil }})
	rec := &tracetest.Recorder{Content: true}
	rt, _ := eval.New(eval.Options{Trace: []eval.TraceSink{rec}})
	_, err := rt.Evaluate(context.Background(), &eval.Agent{Provider: p, Schema: s, Children: []any{
		&eval.ToolGrant{Tool: tool}, "say first", &eval.FollowUp{Children: []any{`submit "done"`}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, e := range rec.Named("acp.session.prompt.submitted") {
		prompts = append(prompts, e.Attributes["prompt"].(string))
	}
	if len(prompts) != 2 {
		t.Fatalf("prompts = %q", prompts)
	}
	if !strings.HasPrefix(prompts[0], "The AML tools are available under these names:\n- lookup: aml-lookup\n\nsay first") {
		t.Errorf("first turn = %q", prompts[0])
	}
	if strings.Contains(prompts[1], "aml-lookup") || !strings.Contains(prompts[1], "Call aml-aml_submit_result once") {
		t.Errorf("final turn = %q", prompts[1])
	}
}

func TestNoTokenNoFlag(t *testing.T) {
	for _, v := range []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"} {
		t.Setenv(v, "")
	}
	cmd, env := acptest.Command()
	p, _ := copilot.New(copilot.Options{Base: acp.Base{Command: cmd, Env: env}})
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "argv", Permissions: eval.DefaultPermissions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(resp.Text, "--auth-token-env") || strings.Contains(resp.Text, "--deny-tool") || !strings.Contains(resp.Text, "--model=auto") {
		t.Fatalf("argv = %q", resp.Text)
	}
}

// TestPackageCache: sessions share one package cache: the option, else
// COPILOT_PKG_CACHE_HOME from env= or the process environment, else one
// below the user cache directory.
func TestPackageCache(t *testing.T) {
	t.Setenv("COPILOT_PKG_CACHE_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "/cache-home")
	cmd, env := acptest.Command()
	run := func(o copilot.Options) string {
		t.Helper()
		o.Command = cmd
		o.Env = env
		p, err := copilot.New(o)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "env COPILOT_PKG_CACHE_HOME", Permissions: eval.DefaultPermissions()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Text
	}
	if got, want := run(copilot.Options{}), filepath.Join("/cache-home", "aml", "copilot"); got != want {
		t.Errorf("default cache = %q, want %q", got, want)
	}
	t.Setenv("COPILOT_PKG_CACHE_HOME", "/from-process")
	if got := run(copilot.Options{}); got != "/from-process" {
		t.Errorf("cache = %q, want the process environment's", got)
	}
	env = maps.Clone(env)
	env["COPILOT_PKG_CACHE_HOME"] = "/from-env"
	if got := run(copilot.Options{}); got != "/from-env" {
		t.Errorf("cache = %q, want env='s", got)
	}
	if got := run(copilot.Options{PackageCache: "/from-option"}); got != "/from-option" {
		t.Errorf("cache = %q, want the option's", got)
	}
}

// TestStdioServersInConfig: granted stdio MCP servers go to Copilot's own
// mcp-config.json (it rejects them from session/new); HTTP servers do not.
func TestStdioServersInConfig(t *testing.T) {
	cmd, env := acptest.Command()
	p, _ := copilot.New(copilot.Options{Base: acp.Base{Command: cmd, Env: env}})
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "cat $COPILOT_HOME/mcp-config.json", Permissions: eval.DefaultPermissions(), MCPServers: []eval.AgentMCPServer{
		{Name: "files", Server: &eval.MCPServer{Name: "files", Transport: eval.MCPTransport{Type: "stdio", Command: "files-mcp", Args: []string{"--root", "/"}, Env: map[string]string{"TOKEN": "t"}}}},
		{Name: "web", Server: &eval.MCPServer{Name: "web", Transport: eval.MCPTransport{Type: "streamable-http", URL: "http://127.0.0.1:9/mcp"}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(resp.Text), &cfg); err != nil {
		t.Fatalf("mcp-config.json %q: %v", resp.Text, err)
	}
	files := cfg.MCPServers["files"]
	if len(cfg.MCPServers) != 1 || files["type"] != "local" || files["command"] != "files-mcp" ||
		fmt.Sprint(files["args"]) != "[--root /]" || fmt.Sprint(files["env"]) != "map[TOKEN:t]" || fmt.Sprint(files["tools"]) != "[*]" {
		t.Fatalf("mcp-config.json = %s", resp.Text)
	}
}
