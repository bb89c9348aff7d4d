// Package codex is the Codex agent profile over AML's ACP session engine:
// codex_agent() in Starlark. It launches the Codex ACP adapter
// (codex-acp, from @agentclientprotocol/codex-acp) with private state.
//
// The session configuration (CODEX_CONFIG, a JSON object the adapter
// merges into the Codex config) is Options.Config, then model,
// model_reasoning_effort and developer_instructions (the AML system text,
// omitted when empty) written by AML. The environment is Options.Env, then
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
	"maps"
	"path"
	"slices"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/option"
)

// Options configure the Codex profile.
type Options struct {
	// Name is the provider name; "" means "codex".
	Name string
	// Command is the ACP adapter; "" means "codex-acp".
	Command string
	// Args are appended literally.
	Args []string
	// Config is the base Codex configuration (JSON data), captured at
	// construction.
	Config map[string]any
	// CodexPath is the Codex executable the adapter runs (CODEX_PATH);
	// "" means "codex".
	CodexPath string
	// Env adds environment variables; never traced.
	Env map[string]string
	// Model is the fallback model.
	Model string
	// ReasoningEffort sets model_reasoning_effort.
	ReasoningEffort string
	// APIKey sets CODEX_API_KEY and selects api-key authentication; never
	// traced.
	APIKey string
	// WorkingDirectory is the session cwd outside a sandbox.
	WorkingDirectory string
}

// New returns the Codex agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.Name == "" {
		o.Name = "codex"
	}
	if o.Command == "" {
		o.Command = "codex-acp"
	}
	if o.CodexPath == "" {
		o.CodexPath = "codex"
	}
	if err := option.Strings("codex_agent", map[string]string{"name": o.Name, "command": o.Command, "codex_path": o.CodexPath, "model": o.Model,
		"reasoning_effort": o.ReasoningEffort, "working_directory": o.WorkingDirectory, "api_key": o.APIKey}, "api_key"); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(o.Config)
	if err != nil {
		return nil, fmt.Errorf("codex_agent: config must be JSON data: %w", err)
	}
	env := maps.Clone(o.Env)
	args := slices.Clone(o.Args)
	auth := ""
	if o.APIKey != "" || env["CODEX_API_KEY"] != "" || env["OPENAI_API_KEY"] != "" {
		auth = "api-key"
	}
	profile := func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, err
		}
		if cfg == nil {
			cfg = map[string]any{}
		}
		req := lc.Request
		if m := req.Model; m != "" {
			cfg["model"] = m
		} else if o.Model != "" {
			cfg["model"] = o.Model
		}
		if o.ReasoningEffort != "" {
			cfg["model_reasoning_effort"] = o.ReasoningEffort
		}
		if req.System != "" {
			cfg["developer_instructions"] = req.System
		}
		content, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		e := maps.Clone(env)
		if e == nil {
			e = map[string]string{}
		}
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
		return &acp.Launch{Command: o.Command, Args: args, Env: e, AuthMethodID: auth, ModelHandled: true, SystemHandled: true}, nil
	}
	return acp.New(acp.Config{Name: o.Name, Command: o.Command, WorkingDirectory: o.WorkingDirectory, Profile: profile, NativeSkills: true})
}
