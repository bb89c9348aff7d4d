// Package glm is the GLM (Z.ai) agent profile over AML's ACP session
// engine: glm_agent() in Starlark. It launches the community
// glm-acp-agent adapter.
//
// The environment is Options.Env, then the AML-owned variables:
// Z_AI_API_KEY (from Options.APIKey), ACP_GLM_BASE_URL, ACP_GLM_MAX_TOKENS,
// ACP_GLM_MODEL (agent(model=), else Options.Model) and
// ACP_GLM_SESSION_DIR (in the session's private state directory). The ACP
// authentication method z-ai-api-key is used when an API key is given or
// env has Z_AI_API_KEY.
//
// Metering: a session on the host reaches its endpoint (base_url=, else
// ACP_GLM_BASE_URL, else DefaultBaseURL) through a route of AML's model
// gateway, which meters every call for budgets (Options.NoMeter turns it
// off).
//
// Permissions: the adapter's tools cannot be disabled. It asks permission
// for write_file and run_command, which AML answers from the agent's
// permissions (filesystem "read-only" refuses write_file, shell=False
// refuses run_command). Its web_search, web_reader and image_analysis
// tools never ask and reach Z.AI's servers (image_analysis through npx
// @z_ai/mcp-server): network=False has no mapping, and a sandbox without
// network is the boundary. The end-to-end tests drive glm-acp-agent 1.5.0
// and never let the model call those three.
package glm

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the GLM profile: the shared acp.Base (Name "" means
// "glm", Command "" means the adapter "glm-acp-agent", Args are appended
// literally) and what is GLM's own.
type Options struct {
	acp.Base
	// APIKey is the Z.ai key; never traced.
	APIKey string
	// BaseURL overrides the API endpoint.
	BaseURL string
	// MaxTokens bounds a completion; 0 keeps the adapter default.
	MaxTokens int64
}

// DefaultBaseURL is the endpoint glm-acp-agent uses when base_url is not
// given (its own default, which a metered session routes through AML's
// model gateway).
const DefaultBaseURL = "https://api.z.ai/api/coding/paas/v4"

// New returns the GLM agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.MaxTokens < 0 || o.MaxTokens > 1<<53-1 {
		return nil, fmt.Errorf("glm_agent: max_tokens must be a positive integer, got %d", o.MaxTokens)
	}
	auth := ""
	if o.APIKey != "" || o.Env["Z_AI_API_KEY"] != "" {
		auth = "z-ai-api-key"
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{
		Factory: "glm_agent", Name: "glm", Command: "glm-acp-agent", Meters: true,
		Strings: map[string]string{"api_key": o.APIKey, "base_url": o.BaseURL},
		Secret:  []string{"api_key"},
		Launch: func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
			e := b.LaunchEnv()
			if o.APIKey != "" {
				e["Z_AI_API_KEY"] = o.APIKey
			}
			// The endpoint the adapter would use: base_url=, else its
			// variable (in env=, or on the host), else its default.
			upstream := o.BaseURL
			if upstream == "" {
				upstream = e["ACP_GLM_BASE_URL"]
			}
			if upstream == "" && lc.Local {
				upstream = os.Getenv("ACP_GLM_BASE_URL")
			}
			if upstream == "" {
				upstream = DefaultBaseURL
			}
			base, err := lc.Route(upstream)
			if err != nil {
				return nil, err
			}
			if base != upstream || o.BaseURL != "" {
				e["ACP_GLM_BASE_URL"] = base
			}
			if o.MaxTokens > 0 {
				e["ACP_GLM_MAX_TOKENS"] = strconv.FormatInt(o.MaxTokens, 10)
			}
			if m := b.ModelFor(lc.Request); m != "" {
				e["ACP_GLM_MODEL"] = m
			}
			e["ACP_GLM_SESSION_DIR"] = path.Join(lc.StateDir, "sessions")
			hint := acp.CredentialHint(e, lc.Local, "glm_agent found no API key: set Z_AI_API_KEY, or pass api_key = ...", "Z_AI_API_KEY")
			return &acp.Launch{Command: b.Command, Args: slices.Clone(b.Args), Env: e, AuthMethodID: auth, ModelHandled: true, CredentialHint: hint}, nil
		},
	})
}
