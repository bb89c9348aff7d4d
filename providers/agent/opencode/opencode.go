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
	"path"
	"slices"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/option"
)

// Options configure the OpenCode profile.
type Options struct {
	// Name is the provider name; "" means "opencode".
	Name string
	// Command is the OpenCode executable; "" means "opencode".
	Command string
	// Args are appended after the ACP arguments AML supplies.
	Args []string
	// Config is OpenCode's configuration object (JSON data), captured at
	// construction.
	Config map[string]any
	// Directory is the session cwd outside a sandbox; "" means the
	// process working directory.
	Directory string
	// Env adds environment variables (credentials); never traced.
	Env map[string]string
	// Model is the fallback model ("provider/model").
	Model string
}

// New returns the OpenCode agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.Name == "" {
		o.Name = "opencode"
	}
	if o.Command == "" {
		o.Command = "opencode"
	}
	if err := option.Strings("opencode_agent", map[string]string{"name": o.Name, "command": o.Command, "directory": o.Directory, "model": o.Model}); err != nil {
		return nil, err
	}
	// Capture the config now, as JSON: later changes by the caller have
	// no effect, and values that are not JSON data are rejected here.
	raw, err := json.Marshal(o.Config)
	if err != nil {
		return nil, fmt.Errorf("opencode_agent: config must be JSON data: %w", err)
	}
	env := maps.Clone(o.Env)
	args := slices.Clone(o.Args)
	command, model := o.Command, o.Model
	profile := func(_ context.Context, lc acp.LaunchContext) (*acp.Launch, error) {
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, err
		}
		if cfg == nil {
			cfg = map[string]any{}
		}
		if err := overlay(cfg, lc, model); err != nil {
			return nil, err
		}
		content, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		e := maps.Clone(env)
		if e == nil {
			e = map[string]string{}
		}
		st := lc.StateDir
		e["OPENCODE_CONFIG_CONTENT"] = string(content)
		e["OPENCODE_DB"] = path.Join(st, "opencode.db")
		e["XDG_CACHE_HOME"] = path.Join(st, "cache")
		e["XDG_CONFIG_HOME"] = path.Join(st, "config")
		e["XDG_STATE_HOME"] = path.Join(st, "state")
		if _, ok := env["XDG_DATA_HOME"]; !ok {
			e["XDG_DATA_HOME"] = path.Join(st, "data")
		}
		return &acp.Launch{
			Command:      command,
			Args:         append([]string{"acp", "--pure", "--cwd", lc.Cwd}, args...),
			Env:          e,
			ModelHandled: true,
		}, nil
	}
	return acp.New(acp.Config{Name: o.Name, Command: o.Command, WorkingDirectory: o.Directory, Profile: profile, NativeSkills: true})
}

// overlay applies the AML session profile to the user's config.
func overlay(cfg map[string]any, lc acp.LaunchContext, fallback string) error {
	req := lc.Request
	model := req.Model
	if model == "" {
		model = fallback
	}
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
