// Package glm is the GLM (Z.ai) agent profile over AML's ACP session
// engine: glm_agent() in Starlark. It launches the community
// glm-acp-agent adapter.
//
// The environment is Options.Env, then the AML-owned variables:
// Z_AI_API_KEY (from Options.APIKey), ACP_GLM_BASE_URL, ACP_GLM_MAX_TOKENS,
// ACP_GLM_MODEL (agent(model=), else Options.Model) and
// ACP_GLM_SESSION_DIR (in the session's private state directory). The ACP
// authentication method z-ai-api-key is used when an API key is given or
// env has Z_AI_API_KEY. The adapter's tools cannot be disabled: shell and
// network permissions have no mapping, and the sandbox is the boundary.
package glm

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/option"
)

// Options configure the GLM profile.
type Options struct {
	// Name is the provider name; "" means "glm".
	Name string
	// Command is the adapter; "" means "glm-acp-agent".
	Command string
	// Args are appended literally.
	Args []string
	// Env adds environment variables; never traced.
	Env map[string]string
	// APIKey is the Z.ai key; never traced.
	APIKey string
	// BaseURL overrides the API endpoint.
	BaseURL string
	// MaxTokens bounds a completion; 0 keeps the adapter default.
	MaxTokens int64
	// Model is the fallback model.
	Model string
	// WorkingDirectory is the session cwd outside a sandbox.
	WorkingDirectory string
}

// New returns the GLM agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.Name == "" {
		o.Name = "glm"
	}
	if o.Command == "" {
		o.Command = "glm-acp-agent"
	}
	if err := option.Strings("glm_agent", map[string]string{"name": o.Name, "command": o.Command, "api_key": o.APIKey, "base_url": o.BaseURL,
		"model": o.Model, "working_directory": o.WorkingDirectory}, "api_key"); err != nil {
		return nil, err
	}
	if o.MaxTokens < 0 || o.MaxTokens > 1<<53-1 {
		return nil, fmt.Errorf("glm_agent: max_tokens must be a positive integer, got %d", o.MaxTokens)
	}
	env := maps.Clone(o.Env)
	args := slices.Clone(o.Args)
	auth := ""
	if o.APIKey != "" || env["Z_AI_API_KEY"] != "" {
		auth = "z-ai-api-key"
	}
	profile := func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		e := maps.Clone(env)
		if e == nil {
			e = map[string]string{}
		}
		if o.APIKey != "" {
			e["Z_AI_API_KEY"] = o.APIKey
		}
		if o.BaseURL != "" {
			e["ACP_GLM_BASE_URL"] = o.BaseURL
		}
		if o.MaxTokens > 0 {
			e["ACP_GLM_MAX_TOKENS"] = strconv.FormatInt(o.MaxTokens, 10)
		}
		if m := lc.Request.Model; m != "" {
			e["ACP_GLM_MODEL"] = m
		} else if o.Model != "" {
			e["ACP_GLM_MODEL"] = o.Model
		}
		e["ACP_GLM_SESSION_DIR"] = path.Join(lc.StateDir, "sessions")
		return &acp.Launch{Command: o.Command, Args: args, Env: e, AuthMethodID: auth, ModelHandled: true}, nil
	}
	return acp.New(acp.Config{Name: o.Name, Command: o.Command, WorkingDirectory: o.WorkingDirectory, Profile: profile})
}
