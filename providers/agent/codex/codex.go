// Package codex is the Codex agent profile over AML's ACP session engine:
// codex_agent() in Starlark. It launches the Codex ACP adapter
// (codex-acp, from @agentclientprotocol/codex-acp) with private state.
//
// The session configuration (CODEX_CONFIG, a JSON object the adapter
// merges into the Codex config) is Options.Config, then model,
// model_reasoning_effort and developer_instructions (the AML system text,
// omitted when empty) written by AML, and mcp_optional_startup_grace_ms
// (30 s, so that the first turn has the granted MCP servers' tools)
// unless Options.Config sets it. The environment is Options.Env, then
// the AML-owned variables: CODEX_HOME (the session's state directory, or
// the staged skills home so that Codex discovers skills natively),
// CODEX_CONFIG, CODEX_SQLITE_HOME, APP_SERVER_LOGS, CODEX_PATH,
// INITIAL_AGENT_MODE ("agent-full-access" for filesystem "read-write",
// "read-only" otherwise), NO_BROWSER=1, and CODEX_API_KEY when an API key
// is given. The ACP api-key authentication is used when an API key is
// given or the environment has CODEX_API_KEY or OPENAI_API_KEY.
//
// Shell and network permissions have no Codex mapping: the enclosing
// sandbox is the boundary.
package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"slices"
	"time"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Codex profile: the shared acp.Base (Name ""
// means "codex", Command "" means the adapter "codex-acp", Args are
// appended literally) and what is Codex's own.
type Options struct {
	acp.Base
	// Config is the base Codex configuration (JSON data), captured at
	// construction.
	Config map[string]any
	// CodexPath is the Codex executable the adapter runs (CODEX_PATH);
	// "" means "codex".
	CodexPath string
	// ReasoningEffort sets model_reasoning_effort.
	ReasoningEffort string
	// APIKey sets CODEX_API_KEY and selects api-key authentication; never
	// traced.
	APIKey string
}

// New returns the Codex agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.CodexPath == "" {
		o.CodexPath = "codex"
	}
	config, err := acp.Capture("codex_agent", "config", o.Config)
	if err != nil {
		return nil, err
	}
	auth := ""
	if o.APIKey != "" || o.Env["CODEX_API_KEY"] != "" || o.Env["OPENAI_API_KEY"] != "" {
		auth = "api-key"
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{
		Factory: "codex_agent", Name: "codex", Command: "codex-acp", NativeSkills: true,
		Strings: map[string]string{"codex_path": o.CodexPath, "reasoning_effort": o.ReasoningEffort, "api_key": o.APIKey},
		Secret:  []string{"api_key"},
		Meters:  true,
		MeterFor: func(_ *acp.Base, _ *eval.AgentRequest) bool {
			cfg, err := config.Fresh()
			if err != nil {
				return false
			}
			_, _, ok := endpoint(cfg)
			return ok
		},
		Launch: func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
			cfg, err := config.Fresh()
			if err != nil {
				return nil, err
			}
			openaiBase, err := routeEndpoint(cfg, lc, b.Env)
			if err != nil {
				return nil, err
			}
			req := lc.Request
			if m := b.ModelFor(req); m != "" {
				cfg["model"] = m
			}
			if o.ReasoningEffort != "" {
				cfg["model_reasoning_effort"] = o.ReasoningEffort
			}
			if req.System != "" {
				cfg["developer_instructions"] = req.System
			}
			// The first turn waits for the granted MCP servers to start:
			// by default Codex gives them a short grace and goes on
			// without the tools of one that is slower (a server started
			// with npx on a busy machine), so the model never sees them.
			if _, set := cfg["mcp_optional_startup_grace_ms"]; !set {
				cfg["mcp_optional_startup_grace_ms"] = mcpStartupGrace.Milliseconds()
			}
			content, err := json.Marshal(cfg)
			if err != nil {
				return nil, err
			}
			e := b.LaunchEnv()
			home := lc.StateDir
			if len(req.Skills) > 0 {
				home = req.Skills[0].Home
			}
			mode := "read-only"
			if req.Permissions.Filesystem == eval.ReadWrite {
				mode = "agent-full-access"
			}
			e["CODEX_HOME"] = home
			e["CODEX_CONFIG"] = string(content)
			e["CODEX_SQLITE_HOME"] = lc.StateDir
			e["APP_SERVER_LOGS"] = path.Join(lc.StateDir, "logs")
			e["CODEX_PATH"] = o.CodexPath
			e["INITIAL_AGENT_MODE"] = mode
			e["NO_BROWSER"] = "1"
			if o.APIKey != "" {
				e["CODEX_API_KEY"] = o.APIKey
			}
			if openaiBase != "" {
				e["OPENAI_BASE_URL"] = openaiBase
			}
			hint := acp.CredentialHint(e, lc.Local, "codex_agent found no API key: set OPENAI_API_KEY (or CODEX_API_KEY), or pass api_key = ... or env = {\"OPENAI_API_KEY\": ...}", "CODEX_API_KEY", "OPENAI_API_KEY")
			return &acp.Launch{Command: b.Command, Args: slices.Clone(b.Args), Env: e, AuthMethodID: auth, ModelHandled: true, SystemHandled: true, CredentialHint: hint}, nil
		},
	})
}

// mcpStartupGrace is how long Codex's first turn waits for the MCP
// servers the agent is granted (mcp_optional_startup_grace_ms), unless
// Options.Config sets it.
const mcpStartupGrace = 30 * time.Second

// DefaultOpenAIBaseURL is the endpoint of Codex's built-in "openai"
// provider when OPENAI_BASE_URL does not name another.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// endpoint names the session's model provider (config's model_provider,
// else "openai") and the base URL it calls: its model_providers entry's
// base_url, else, for the built-in openai provider, "" (OPENAI_BASE_URL or
// the default decide). ok is false for a provider whose endpoint AML
// cannot route (another built-in one), so that it is not metered.
func endpoint(cfg map[string]any) (id, base string, ok bool) {
	id, _ = cfg["model_provider"].(string)
	if id == "" {
		id = "openai"
	}
	providers, _ := cfg["model_providers"].(map[string]any)
	p, _ := providers[id].(map[string]any)
	if u, _ := p["base_url"].(string); u != "" {
		return id, u, true
	}
	return id, "", id == "openai"
}

// routeEndpoint points the session's model provider at its route
// (LaunchContext.Route: AML's model gateway when the session is metered):
// a configured base_url in place, the built-in openai provider through
// the OPENAI_BASE_URL it returns ("" when it stays as it was).
func routeEndpoint(cfg map[string]any, lc acp.LaunchContext, env map[string]string) (string, error) {
	id, base, ok := endpoint(cfg)
	if !ok {
		return "", nil
	}
	if base != "" {
		routed, err := lc.Route(base)
		if err != nil {
			return "", fmt.Errorf("codex_agent: model provider %q: %w", id, err)
		}
		cfg["model_providers"].(map[string]any)[id].(map[string]any)["base_url"] = routed
		return "", nil
	}
	upstream := env["OPENAI_BASE_URL"]
	if upstream == "" && lc.Local {
		upstream = os.Getenv("OPENAI_BASE_URL")
	}
	if upstream == "" {
		upstream = DefaultOpenAIBaseURL
	}
	routed, err := lc.Route(upstream)
	if err != nil {
		return "", fmt.Errorf("codex_agent: the openai provider: %w", err)
	}
	if routed == upstream {
		return "", nil
	}
	return routed, nil
}
