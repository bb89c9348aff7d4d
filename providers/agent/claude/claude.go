// Package claude is the Claude Code agent profile over AML's ACP session
// engine: claude_agent() in Starlark.
//
// Claude Code speaks ACP through Anthropic's Agent SDK adapter,
// @agentclientprotocol/claude-agent-acp, whose "claude-agent-acp" command
// each session runs with Options.Args. The adapter takes its options as
// the _meta of session/new, which AML fills:
//
//   - systemPrompt.append: the AML system text, appended to Claude Code's
//     own system prompt;
//   - claudeCode.options.disallowedTools: the tools the permissions
//     withhold, so that the model is never offered them;
//   - claudeCode.options.allowDangerouslySkipPermissions = false and
//     promptSuggestions = false: Claude Code asks AML before a tool that
//     needs approval runs (session/request_permission, answered from the
//     agent's permissions as for every ACP agent), and makes no model call
//     to predict the next prompt.
//
// The session's permission mode is "default", set after session/new over
// any project setting, so that every tool that needs approval is asked
// for: neither "auto" (whose classifier makes model calls of its own) nor
// a mode that skips the question.
//
// CLAUDE_CONFIG_DIR is the session's private state directory, which holds
// Claude Code's user settings (settings.json): Options.Settings, then
// Options.Effort as effortLevel, then AML's own keys, which turn off what
// would make model calls of its own or leave the session (prompt
// suggestions, automatic memory, session titles, telemetry, error
// reports, the auto-updater). HOME is the same directory, so that nothing
// of the user's own Claude Code setup reaches the session. The adapter's
// Node compile cache (NODE_COMPILE_CACHE, Node 22 and later) is shared by
// the sessions (acp.SharedCache).
//
// Model endpoint: an Anthropic-compatible one, Options.BaseURL, else
// ANTHROPIC_BASE_URL in Options.Env or (on the host) the process
// environment, else https://api.anthropic.com. It is routed through AML's
// model gateway, which meters the session's calls. The key is
// Options.APIKey, else ANTHROPIC_API_KEY. The model is ANTHROPIC_MODEL.
//
// Version: the end-to-end tests drive @agentclientprotocol/claude-agent-acp
// 0.101.0, the version .ci/run installs, offline against a fake model.
package claude

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Claude Code profile: the shared acp.Base (Name ""
// means "claude", Command "" means "claude-agent-acp", Args are the
// adapter's) and what is Claude Code's own.
type Options struct {
	acp.Base
	// BaseURL is the Anthropic-compatible endpoint of the model; "" means
	// ANTHROPIC_BASE_URL, else https://api.anthropic.com.
	BaseURL string
	// APIKey is the endpoint's key (ANTHROPIC_API_KEY); never traced.
	APIKey string
	// Effort is Claude Code's effort level (settings effortLevel: "low",
	// "medium", "high", "xhigh" or "max"), for models that take one; ""
	// leaves Claude Code's default.
	Effort string
	// Settings are Claude Code user settings (JSON data), under AML's own
	// keys (see the package doc).
	Settings map[string]any
}

// ReadOnlyDisallowed are the file-writing tools withheld under filesystem
// "read-only"
// (and the git worktree tools, which create and remove directories).
var ReadOnlyDisallowed = []string{"Write", "Edit", "MultiEdit", "NotebookEdit", "EnterWorktree", "ExitWorktree"}

// ShellDisallowed are the tools withheld under shell=False: the shell and
// the tools that run or watch commands of their own.
var ShellDisallowed = []string{"Bash", "BashOutput", "KillShell", "Monitor", "CronCreate"}

// NetworkDisallowed are the tools withheld under network=False.
var NetworkDisallowed = []string{"WebFetch", "WebSearch"}

// Efforts are the accepted Effort values.
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// defaultBaseURL is the endpoint when none is given.
const defaultBaseURL = "https://api.anthropic.com"

// amlSettings are the settings AML sets over Options.Settings.
var amlSettings = map[string]any{
	"promptSuggestionEnabled": false,
	"autoMemoryEnabled":       false,
	"autoUpdates":             false,
	"includeCoAuthoredBy":     false,
	"permissions":             map[string]any{"defaultMode": "default", "disableAutoMode": "disable", "disableBypassPermissionsMode": "disable"},
	"env": map[string]any{
		"CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION":     "false",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"CLAUDE_CODE_DISABLE_AUTO_MEMORY":          "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"ENABLE_TOOL_SEARCH":                       "false",
	},
}

// New returns the Claude Code agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.Effort != "" && !slices.Contains(Efforts, o.Effort) {
		return nil, fmt.Errorf("claude_agent: effort %q is not one of %q", o.Effort, Efforts)
	}
	fixed := amlSettings
	if o.Effort != "" {
		fixed = map[string]any{"effortLevel": o.Effort}
		for k, v := range amlSettings {
			fixed[k] = v
		}
	}
	settings, err := acp.SettingsFile("claude_agent", o.Settings, fixed)
	if err != nil {
		return nil, err
	}
	profile := func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
		req := lc.Request
		var disallowed []string
		if req.Permissions.Filesystem != eval.ReadWrite {
			disallowed = append(disallowed, ReadOnlyDisallowed...)
		}
		if !req.Permissions.Shell {
			disallowed = append(disallowed, ShellDisallowed...)
		}
		if !req.Permissions.Network {
			disallowed = append(disallowed, NetworkDisallowed...)
		}
		options := map[string]any{"allowDangerouslySkipPermissions": false, "promptSuggestions": false}
		if len(disallowed) > 0 {
			options["disallowedTools"] = disallowed
		}
		meta := map[string]any{"claudeCode": map[string]any{"options": options}}
		if req.System != "" {
			meta["systemPrompt"] = map[string]any{"append": req.System}
		}
		e := b.LaunchEnv()
		routed, err := lc.Route(baseURL(o.BaseURL, e, lc.Local))
		if err != nil {
			return nil, fmt.Errorf("claude_agent: the model endpoint: %w", err)
		}
		e["ANTHROPIC_BASE_URL"] = routed
		if o.APIKey != "" {
			e["ANTHROPIC_API_KEY"] = o.APIKey
		}
		if model := b.ModelFor(req); model != "" {
			e["ANTHROPIC_MODEL"] = model
			// The small fast model of Claude Code's background work is
			// the session's model too, so that no call goes to a model
			// the endpoint may not serve.
			e["ANTHROPIC_SMALL_FAST_MODEL"] = model
			e["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = model
		}
		e["CLAUDE_CONFIG_DIR"] = lc.StateDir
		e["HOME"] = lc.StateDir
		for k, v := range amlSettings["env"].(map[string]any) {
			e[k] = v.(string)
		}
		if dir := acp.SharedCache(e, lc.Local, "NODE_COMPILE_CACHE", "node-compile-cache"); dir != "" {
			e["NODE_COMPILE_CACHE"] = dir
		}
		e["NO_COLOR"] = "1"
		l := &acp.Launch{Command: b.Command, Args: b.Args, Env: e, ModelHandled: true, SystemHandled: true, SessionMeta: meta,
			Configuration:  []acp.ConfigSetting{{Category: "mode", Value: "default"}},
			Files:          []acp.LaunchFile{{Path: "settings.json", Content: settings}},
			CredentialHint: acp.CredentialHint(e, lc.Local, "claude_agent found no API key: set ANTHROPIC_API_KEY, or pass api_key = ... or env = {\"ANTHROPIC_API_KEY\": ...}", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
		if o.APIKey != "" {
			l.Secrets = append(l.Secrets, o.APIKey)
		}
		name := "mcp__" + req.ToolServerName() + "__" + acp.SubmitToolName
		l.StructuredInstruction = "Call " + name + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."
		return l, nil
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{Factory: "claude_agent", Name: "claude", Command: "claude-agent-acp",
		Strings: map[string]string{"base_url": o.BaseURL, "api_key": o.APIKey, "effort": o.Effort}, Secret: []string{"api_key"},
		Launch: profile, Meters: true})
}

// baseURL is the model endpoint of a launch: option, else
// ANTHROPIC_BASE_URL in env or (on the host) the process environment,
// else the default.
func baseURL(option string, env map[string]string, local bool) string {
	if option != "" {
		return option
	}
	if u := env["ANTHROPIC_BASE_URL"]; u != "" {
		return u
	}
	if local {
		if u := os.Getenv("ANTHROPIC_BASE_URL"); u != "" {
			return u
		}
	}
	return defaultBaseURL
}
