package acpstar_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
)

func TestExtensionFactories(t *testing.T) {
	var names []string
	for _, b := range acpstar.Extension.Builtins {
		names = append(names, b.Name)
		if b.Impl == nil || b.Doc == "" || b.Example == "" || b.Group != "providers" {
			t.Errorf("%s: incomplete catalog entry", b.Name)
		}
	}
	want := []string{"acp_agent", "opencode_agent", "codex_agent", "copilot_agent", "glm_agent", "pi_agent", "qwen_agent", "claude_agent", "gemini_agent"}
	if !slices.Equal(names, want) {
		t.Fatalf("builtins %v, want %v", names, want)
	}
	// The profile factories share their trailing parameter rows.
	for _, b := range acpstar.Extension.Builtins[1:] {
		var tail []string
		for _, p := range b.Params[len(b.Params)-6:] {
			tail = append(tail, p.Name)
		}
		if tail[0] != "env" || tail[1] != "args" || tail[2] != "command" || tail[4] != "name" || tail[5] != "handshake_timeout_ms" {
			t.Errorf("%s: shared rows %v", b.Name, tail)
		}
	}
}

// TestFactoriesBuildProviders: each factory builds a provider from
// Starlark, named as asked, and reports a bad option at the call.
func TestFactoriesBuildProviders(t *testing.T) {
	ext := acpstar.New(acpstar.Options{Relay: []string{"/bin/aml", "mcp-relay"}, ClientVersion: "1.2.3"})
	src := `
providers = [
    acp_agent("my-agent", name = "mine"),
    opencode_agent(name = "oc"),
    codex_agent(name = "cx"),
    copilot_agent(name = "cp"),
    glm_agent(name = "gl", max_tokens = 10),
    pi_agent(name = "p"),
    qwen_agent(name = "q", settings = {"ui": {"theme": "dark"}}),
    claude_agent(name = "cl", effort = "high", settings = {"permissions": {"allow": ["Read"]}}),
    gemini_agent(name = "ge", model = "gemini-x", thinking_budget = 512, settings = {"ui": {"theme": "dark"}}),
]
`
	w, err := starlib.LoadFile("f.star", starlib.LoadOptions{Source: []byte(src), Extensions: []*starlib.Extension{ext}})
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := w.Globals["providers"].(*starlark.List)
	if ps == nil || ps.Len() != 9 {
		t.Fatalf("providers = %v", w.Globals["providers"])
	}
	for i, name := range []string{"mine", "oc", "cx", "cp", "gl", "p", "q", "cl", "ge"} {
		v, ok := ps.Index(i).(*starlib.AgentProviderValue)
		if !ok || v.Provider.Name() != name {
			t.Errorf("provider %d = %v, want one named %q", i, ps.Index(i), name)
		}
	}
	_, err = starlib.Run(context.Background(), "g.star", "", starlib.LoadOptions{Source: []byte("p = glm_agent(max_tokens = 0)\n"), Extensions: []*starlib.Extension{ext}}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), "glm_agent: max_tokens must be a positive integer, got 0") {
		t.Fatalf("bad option: %v", err)
	}
	_, err = starlib.Run(context.Background(), "g.star", "", starlib.LoadOptions{Source: []byte("p = qwen_agent(settings = {\"ui\": 3})\n"), Extensions: []*starlib.Extension{ext}}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), `qwen_agent: settings["ui"] must be a dict`) {
		t.Fatalf("bad settings: %v", err)
	}
	_, err = starlib.Run(context.Background(), "g.star", "", starlib.LoadOptions{Source: []byte("p = claude_agent(effort = \"huge\")\n"), Extensions: []*starlib.Extension{ext}}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), `claude_agent: effort "huge" is not one of`) {
		t.Fatalf("bad effort: %v", err)
	}
	_, err = starlib.Run(context.Background(), "g.star", "", starlib.LoadOptions{Source: []byte("p = gemini_agent(thinking_budget = -1)\n"), Extensions: []*starlib.Extension{ext}}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), "thinking_budget must be a positive number of tokens, got -1") {
		t.Fatalf("bad thinking budget: %v", err)
	}
}
