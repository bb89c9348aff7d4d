// Package opencode is the OpenCode agent profile over AML's ACP session
// engine: opencode_agent() in Starlark.
//
// Each session runs "opencode acp --pure --cwd <cwd>" followed by the
// configured args, with a private OpenCode configuration passed in
// OPENCODE_CONFIG_CONTENT: the user's config, overlaid with an AML-owned
// primary agent "aml" (the default agent) whose tools and permissions
// follow the AML permissions, the effective model, and the staged skill
// directories appended to skills.paths. The session database and the
// XDG cache, config, state and data directories are invocation-private
// (an explicit env XDG_DATA_HOME may replace only the data directory).
// HOME is not replaced.
//
// Model precedence: agent(model=) over Options.Model over config.model.
// Permissions: filesystem "read-only" disables and denies edit and write;
// shell=False bash; network=False webfetch and websearch. The denials are
// also merged into the top-level permission table so that OpenCode's
// native subagents inherit them.
package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"strings"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the OpenCode profile: the shared acp.Base (Name ""
// means "opencode", Command "" means "opencode", Args are appended after
// the ACP arguments AML supplies, Model is "provider/model", and
// WorkingDirectory, directory= in Starlark, "" means the process working
// directory) and what is OpenCode's own.
type Options struct {
	acp.Base
	// Config is OpenCode's configuration object (JSON data), captured at
	// construction.
	Config map[string]any
}

// New returns the OpenCode agent provider.
func New(o Options) (*acp.Provider, error) {
	config, err := acp.Capture("opencode_agent", "config", o.Config)
	if err != nil {
		return nil, err
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{
		Factory: "opencode_agent", Name: "opencode", Command: "opencode", DirectoryOption: "directory", NativeSkills: true,
		Meters: true,
		MeterFor: func(b *acp.Base, req *eval.AgentRequest) bool {
			cfg, err := config.Fresh()
			if err != nil {
				return false
			}
			_, ok := endpoint(cfg, modelOf(cfg, b.ModelFor(req)))
			return ok
		},
		Launch: func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
			cfg, err := config.Fresh()
			if err != nil {
				return nil, err
			}
			if err := routeProviders(cfg, lc, b.Env, modelOf(cfg, b.ModelFor(lc.Request))); err != nil {
				return nil, err
			}
			if err := overlay(cfg, lc, b.ModelFor(lc.Request)); err != nil {
				return nil, err
			}
			content, err := json.Marshal(cfg)
			if err != nil {
				return nil, err
			}
			e := b.LaunchEnv()
			st := lc.StateDir
			e["OPENCODE_CONFIG_CONTENT"] = string(content)
			e["OPENCODE_DB"] = path.Join(st, "opencode.db")
			e["XDG_CACHE_HOME"] = path.Join(st, "cache")
			e["XDG_CONFIG_HOME"] = path.Join(st, "config")
			e["XDG_STATE_HOME"] = path.Join(st, "state")
			if _, ok := b.Env["XDG_DATA_HOME"]; !ok {
				e["XDG_DATA_HOME"] = path.Join(st, "data")
			}
			return &acp.Launch{
				Command:        b.Command,
				Args:           append([]string{"acp", "--pure", "--cwd", lc.Cwd}, b.Args...),
				Env:            e,
				ModelHandled:   true,
				CredentialHint: credentialHint(cfg, b.Env, lc.Local),
			}, nil
		},
	})
}

// overlay applies the AML session profile to the user's config; model is
// the effective model of the session, or "".
func overlay(cfg map[string]any, lc acp.LaunchContext, model string) error {
	req := lc.Request
	if model != "" {
		cfg["model"] = model
	}
	var denied []string
	if req.Permissions.Filesystem != eval.ReadWrite {
		denied = append(denied, "edit", "write")
	}
	if !req.Permissions.Shell {
		denied = append(denied, "bash")
	}
	if !req.Permissions.Network {
		denied = append(denied, "webfetch", "websearch")
	}

	agents, err := table(cfg, "agent")
	if err != nil {
		return err
	}
	// Native tool choices (top-level, then an existing aml agent) first;
	// AML denials are final.
	tools := map[string]any{}
	if t, err := table(cfg, "tools"); err != nil {
		return err
	} else {
		maps.Copy(tools, t)
	}
	if old, ok := agents["aml"].(map[string]any); ok {
		if t, ok := old["tools"].(map[string]any); ok {
			maps.Copy(tools, t)
		}
	}
	perm := map[string]any{}
	top, err := permissionTable(cfg)
	if err != nil {
		return err
	}
	for _, name := range denied {
		tools[name] = false
		perm[name] = "deny"
		top[name] = "deny"
	}
	agents["aml"] = map[string]any{"mode": "primary", "tools": tools, "permission": perm}
	cfg["default_agent"] = "aml"

	if len(req.Skills) > 0 {
		skills, err := table(cfg, "skills")
		if err != nil {
			return err
		}
		var paths []any
		if p, ok := skills["paths"]; ok {
			list, ok := p.([]any)
			if !ok {
				return errors.New("config.skills.paths must be a list")
			}
			paths = list
		}
		for _, s := range req.Skills {
			paths = append(paths, s.Dir)
		}
		skills["paths"] = paths
	}
	return nil
}

// table returns cfg[key] as an object, creating it when missing.
func table(cfg map[string]any, key string) (map[string]any, error) {
	v, ok := cfg[key]
	if !ok || v == nil {
		m := map[string]any{}
		cfg[key] = m
		return m, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("config.%s must be an object", key)
	}
	return m, nil
}

// permissionTable returns the top-level permission table. OpenCode also
// accepts a single action string there ("allow", "ask", "deny"); it
// becomes the "*" rule so that AML's denials can be added.
func permissionTable(cfg map[string]any) (map[string]any, error) {
	if s, ok := cfg["permission"].(string); ok {
		m := map[string]any{"*": s}
		cfg["permission"] = m
		return m, nil
	}
	return table(cfg, "permission")
}

// credentialHint is the session's acp.Launch.CredentialHint: none when the
// config names providers (their options hold keys or a keyless local
// server), when the user's own data directory (with OpenCode's stored
// logins) is passed, or when a common provider's key variable is set.
func credentialHint(cfg map[string]any, env map[string]string, local bool) string {
	if _, ok := cfg["provider"]; ok {
		return ""
	}
	if _, ok := env["XDG_DATA_HOME"]; ok {
		return ""
	}
	return acp.CredentialHint(env, local, "opencode_agent found no model credential: set the key variable of the model's provider (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...), or configure the provider in config = {\"provider\": ...} (docs/agents.md)", acp.ModelKeyVars...)
}

// defaultEndpoints are the API base URLs of OpenCode's built-in providers
// that AML can route through its model gateway without a baseURL in the
// configuration.
var defaultEndpoints = map[string]string{
	"openai":    "https://api.openai.com/v1",
	"anthropic": "https://api.anthropic.com/v1",
}

// modelOf is the session's model: agent(model=) or the profile's, else
// the configuration's.
func modelOf(cfg map[string]any, model string) string {
	if model == "" {
		model, _ = cfg["model"].(string)
	}
	return model
}

// endpoint is the base URL the model's provider calls: its
// options.baseURL in the configuration, else a built-in default. ok is
// false when the session's endpoint is not known, so that it cannot be
// metered.
func endpoint(cfg map[string]any, model string) (string, bool) {
	id, _, found := strings.Cut(model, "/")
	if !found || id == "" {
		return "", false
	}
	providers, _ := cfg["provider"].(map[string]any)
	if u := baseURL(providers[id]); u != "" {
		return u, true
	}
	u, ok := defaultEndpoints[id]
	return u, ok
}

// routeProviders points every provider of the configuration that names a
// baseURL, and the session model's built-in provider, at its route
// (LaunchContext.Route: AML's model gateway when the session is metered).
// A built-in provider's endpoint is its variable (OPENAI_BASE_URL,
// ANTHROPIC_BASE_URL) in env, or on the host, else its default; it is
// written into the configuration only when the session is metered.
func routeProviders(cfg map[string]any, lc acp.LaunchContext, env map[string]string, model string) error {
	providers, _ := cfg["provider"].(map[string]any)
	for id, v := range providers {
		if u := baseURL(v); u != "" {
			routed, err := lc.Route(u)
			if err != nil {
				return fmt.Errorf("opencode_agent: provider %q: %w", id, err)
			}
			v.(map[string]any)["options"].(map[string]any)["baseURL"] = routed
		}
	}
	id, _, _ := strings.Cut(model, "/")
	u, builtin := defaultEndpoints[id]
	if !builtin || baseURL(providers[id]) != "" {
		return nil
	}
	v := strings.ToUpper(id) + "_BASE_URL"
	if e := env[v]; e != "" {
		u = e
	} else if e := os.Getenv(v); e != "" && lc.Local {
		u = e
	}
	routed, err := lc.Route(u)
	if err != nil {
		return fmt.Errorf("opencode_agent: provider %q: %w", id, err)
	}
	if routed == u {
		return nil // not metered: OpenCode's own default stands
	}
	if providers == nil {
		providers = map[string]any{}
		cfg["provider"] = providers
	}
	p, _ := providers[id].(map[string]any)
	if p == nil {
		p = map[string]any{}
		providers[id] = p
	}
	opts, _ := p["options"].(map[string]any)
	if opts == nil {
		opts = map[string]any{}
		p["options"] = opts
	}
	opts["baseURL"] = routed
	return nil
}

// baseURL is a provider entry's options.baseURL, or "".
func baseURL(v any) string {
	p, _ := v.(map[string]any)
	opts, _ := p["options"].(map[string]any)
	u, _ := opts["baseURL"].(string)
	return u
}
