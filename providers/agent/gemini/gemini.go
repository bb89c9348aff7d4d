// Package gemini is the Gemini CLI agent profile over AML's ACP session
// engine: gemini_agent() in Starlark.
//
// Each session runs "gemini" with Options.Args first and then the
// AML-owned flags, so that the arguments cannot override them: --acp,
// --approval-mode=default (Gemini CLI asks AML before a tool that needs
// approval runs) and --model=<model> (when one is set; without one Gemini
// CLI's "auto" routing picks the model with a classifier call of its
// own). GEMINI_CLI_HOME is the session's private state directory, which
// holds Gemini CLI's user settings (.gemini/settings.json): Options.
// Settings, then AML's own keys, which select API-key authentication,
// turn off usage statistics, the auto-updater, loop detection and the
// next-speaker check (model calls of its own), and exclude the tools the
// permissions withhold. The AML system text is the user context file
// .gemini/GEMINI.md there, which Gemini CLI appends to its system
// instruction. The working directory is trusted
// (GEMINI_CLI_TRUST_WORKSPACE), without which Gemini CLI drops the MCP
// servers of session/new; GEMINI_CLI_NO_RELAUNCH keeps it one process.
//
// Model endpoint: a Gemini-API-compatible one, Options.BaseURL, else
// GOOGLE_GEMINI_BASE_URL in Options.Env or (on the host) the process
// environment, else https://generativelanguage.googleapis.com. It is
// routed through AML's model gateway, which meters the session's calls.
// The key is Options.APIKey, else GEMINI_API_KEY.
//
// Version: the end-to-end tests drive @google/gemini-cli 0.61.0, the
// version .ci/run installs, offline against a fake model.
package gemini

import (
	"context"
	"fmt"
	"maps"
	"os"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Gemini CLI profile: the shared acp.Base (Name ""
// means "gemini", Command "" means "gemini", Args come before the
// AML-owned flags) and what is Gemini CLI's own.
type Options struct {
	acp.Base
	// BaseURL is the Gemini API endpoint; "" means
	// GOOGLE_GEMINI_BASE_URL, else
	// https://generativelanguage.googleapis.com.
	BaseURL string
	// APIKey is the endpoint's key (GEMINI_API_KEY); never traced.
	APIKey string
	// ThinkingBudget, when positive, is the model's thinking budget in
	// tokens (generateContentConfig.thinkingConfig.thinkingBudget, as a
	// model config override for the session's model); 0 leaves Gemini
	// CLI's default. It needs a model (model=, or agent(model=)).
	ThinkingBudget int
	// Settings are Gemini CLI user settings (JSON data), under AML's own
	// keys (see the package doc).
	Settings map[string]any
}

// ReadOnlyExcluded are the file-writing tools excluded under filesystem
// "read-only".
var ReadOnlyExcluded = []string{"write_file", "replace"}

// ShellExcluded are the tools excluded under shell=False: the shell and
// its background processes.
var ShellExcluded = []string{"run_shell_command", "list_background_processes", "read_background_output"}

// NetworkExcluded are the tools excluded under network=False.
var NetworkExcluded = []string{"web_fetch", "google_web_search"}

// defaultBaseURL is the endpoint when none is given.
const defaultBaseURL = "https://generativelanguage.googleapis.com"

// amlSettings are the settings AML sets over Options.Settings (the tool
// exclusions are added per session).
var amlSettings = map[string]any{
	"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
	"privacy":  map[string]any{"usageStatisticsEnabled": false},
	"general":  map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	"model":    map[string]any{"disableLoopDetection": true, "skipNextSpeakerCheck": true},
}

// New returns the Gemini CLI agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.ThinkingBudget < 0 {
		return nil, fmt.Errorf("gemini_agent: thinking_budget must be a positive number of tokens, got %d", o.ThinkingBudget)
	}
	// The user's settings are checked once here; each session's file
	// adds its tool exclusions.
	if _, err := acp.SettingsFile("gemini_agent", o.Settings, amlSettings); err != nil {
		return nil, err
	}
	profile := func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
		req := lc.Request
		flags := append(append([]string(nil), b.Args...), "--acp", "--approval-mode=default")
		model := b.ModelFor(req)
		if model != "" {
			flags = append(flags, "--model="+model)
		} else if o.ThinkingBudget > 0 {
			return nil, fmt.Errorf("gemini_agent: thinking_budget is set for the session's model, and the session has none: pass model = ... to gemini_agent() or agent()")
		}
		// The user's own exclusions stay.
		var exclude []any
		if tools, ok := o.Settings["tools"].(map[string]any); ok {
			if list, ok := tools["exclude"].([]any); ok {
				exclude = append(exclude, list...)
			}
		}
		if req.Permissions.Filesystem != eval.ReadWrite {
			exclude = appendAll(exclude, ReadOnlyExcluded)
		}
		if !req.Permissions.Shell {
			exclude = appendAll(exclude, ShellExcluded)
		}
		if !req.Permissions.Network {
			exclude = appendAll(exclude, NetworkExcluded)
		}
		fixed := maps.Clone(amlSettings)
		if len(exclude) > 0 {
			fixed["tools"] = map[string]any{"exclude": exclude}
		}
		if o.ThinkingBudget > 0 {
			fixed["modelConfigs"] = map[string]any{"customOverrides": []any{map[string]any{
				"match":       map[string]any{"model": model},
				"modelConfig": map[string]any{"generateContentConfig": map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": o.ThinkingBudget}}},
			}}}
		}
		settings, err := acp.SettingsFile("gemini_agent", o.Settings, fixed)
		if err != nil {
			return nil, err
		}
		files := []acp.LaunchFile{{Path: ".gemini/settings.json", Content: settings}}
		if req.System != "" {
			files = append(files, acp.LaunchFile{Path: ".gemini/GEMINI.md", Content: []byte(req.System + "\n")})
		}
		e := b.LaunchEnv()
		routed, err := lc.Route(baseURL(o.BaseURL, e, lc.Local))
		if err != nil {
			return nil, fmt.Errorf("gemini_agent: the model endpoint: %w", err)
		}
		e["GOOGLE_GEMINI_BASE_URL"] = routed
		if o.APIKey != "" {
			e["GEMINI_API_KEY"] = o.APIKey
		}
		e["GEMINI_CLI_HOME"] = lc.StateDir
		e["GEMINI_CLI_NO_RELAUNCH"] = "true"
		e["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
		if dir := acp.SharedCache(e, lc.Local, "NODE_COMPILE_CACHE", "node-compile-cache"); dir != "" {
			e["NODE_COMPILE_CACHE"] = dir
		}
		e["NO_COLOR"] = "1"
		l := &acp.Launch{Command: b.Command, Args: flags, Env: e, ModelHandled: true, SystemHandled: true, Files: files,
			CredentialHint: acp.CredentialHint(e, lc.Local, "gemini_agent found no API key: set GEMINI_API_KEY, or pass api_key = ... or env = {\"GEMINI_API_KEY\": ...}", "GEMINI_API_KEY")}
		if o.APIKey != "" {
			l.Secrets = append(l.Secrets, o.APIKey)
		}
		name := "mcp_" + req.ToolServerName() + "_" + acp.SubmitToolName
		l.StructuredInstruction = "Call " + name + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."
		return l, nil
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{Factory: "gemini_agent", Name: "gemini", Command: "gemini",
		Strings: map[string]string{"base_url": o.BaseURL, "api_key": o.APIKey}, Secret: []string{"api_key"},
		Launch: profile, Meters: true})
}

// appendAll appends names to list as JSON values.
func appendAll(list []any, names []string) []any {
	for _, n := range names {
		list = append(list, n)
	}
	return list
}

// baseURL is the model endpoint of a launch: option, else
// GOOGLE_GEMINI_BASE_URL in env or (on the host) the process
// environment, else the default.
func baseURL(option string, env map[string]string, local bool) string {
	if option != "" {
		return option
	}
	if u := env["GOOGLE_GEMINI_BASE_URL"]; u != "" {
		return u
	}
	if local {
		if u := os.Getenv("GOOGLE_GEMINI_BASE_URL"); u != "" {
			return u
		}
	}
	return defaultBaseURL
}
