// Package qwen is the Qwen Code agent profile over AML's ACP session
// engine: qwen_agent() in Starlark.
//
// Each session runs "qwen" with Options.Args first and then the AML-owned
// flags, so that the arguments cannot override them: --acp,
// --auth-type=openai, --approval-mode=default (Qwen Code asks AML before
// a tool that needs approval runs, rather than a model of its own
// deciding), --model=<model> (when one is set),
// --append-system-prompt=<the AML system text> (when there is one), and
// --exclude-tools=<the tools the permissions withhold>. HOME is the
// session's private state directory, which holds Qwen Code's user
// settings (.qwen/settings.json): Options.Settings, then AML's own keys,
// which turn off what would make model calls of its own or leave the
// session (managed memory extraction and consolidation, follow-up
// suggestions, usage statistics and telemetry) and the deferred-tool
// search, so that every tool, the AML tool bridge's included, is offered
// to the model directly. QWEN_CODE_LEGACY_MCP_BLOCKING=1 makes Qwen Code
// connect the granted MCP servers before the first prompt instead of
// while it runs.
//
// Model endpoint: an OpenAI-compatible one, Options.BaseURL, else
// OPENAI_BASE_URL in Options.Env or (on the host) the process
// environment, else https://api.openai.com/v1. It is routed through AML's
// model gateway, which meters the session's calls. The key is
// Options.APIKey, else OPENAI_API_KEY.
//
// Permissions are tool exclusions, so a withheld tool is never offered to
// the model: filesystem "read-only" excludes ReadOnlyExcluded, shell=False
// ShellExcluded, network=False NetworkExcluded. Qwen Code asks permission
// for the others (session/request_permission), which AML answers from the
// agent's permissions as for every ACP agent.
//
// Version: the end-to-end tests drive @qwen-code/qwen-code 0.24.4, the
// version .ci/run installs, offline against a fake model.
package qwen

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Qwen Code profile: the shared acp.Base (Name ""
// means "qwen", Command "" means "qwen", Args come before the AML-owned
// flags) and what is Qwen Code's own.
type Options struct {
	acp.Base
	// BaseURL is the OpenAI-compatible endpoint of the model; "" means
	// OPENAI_BASE_URL, else https://api.openai.com/v1.
	BaseURL string
	// APIKey is the endpoint's key (OPENAI_API_KEY); never traced.
	APIKey string
	// Settings are Qwen Code user settings (JSON data), under AML's own
	// keys (see the package doc).
	Settings map[string]any
	// ReasoningEffort is the model's reasoning effort (settings
	// model.generationConfig.reasoning.effort: "low", "medium", "high",
	// "xhigh" or "max"), for models that take one; "" leaves Qwen Code's
	// default.
	ReasoningEffort string
}

// ReasoningEfforts are the accepted ReasoningEffort values.
var ReasoningEfforts = []string{"low", "medium", "high", "xhigh", "max"}

// ReadOnlyExcluded are the file-writing tools excluded under filesystem
// "read-only".
var ReadOnlyExcluded = []string{"write_file", "edit", "notebook_edit", "replace", "multi_edit"}

// ShellExcluded are the tools excluded under shell=False: the shell and
// the tools that run commands of their own.
var ShellExcluded = []string{"run_shell_command", "monitor", "cron_create", "loop_wakeup"}

// NetworkExcluded are the tools excluded under network=False.
var NetworkExcluded = []string{"web_fetch", "web_search"}

// defaultBaseURL is the endpoint when none is given.
const defaultBaseURL = "https://api.openai.com/v1"

// amlSettings are the settings AML sets over Options.Settings.
var amlSettings = map[string]any{
	"memory":    map[string]any{"enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false},
	"ui":        map[string]any{"enableFollowupSuggestions": false},
	"privacy":   map[string]any{"usageStatisticsEnabled": false},
	"telemetry": map[string]any{"enabled": false},
	"tools":     map[string]any{"toolSearch": map[string]any{"enabled": false}},
}

// New returns the Qwen Code agent provider.
func New(o Options) (*acp.Provider, error) {
	fixed := amlSettings
	if o.ReasoningEffort != "" {
		if !slices.Contains(ReasoningEfforts, o.ReasoningEffort) {
			return nil, fmt.Errorf("qwen_agent: reasoning_effort %q is not one of %q", o.ReasoningEffort, ReasoningEfforts)
		}
		fixed = maps.Clone(amlSettings)
		fixed["model"] = map[string]any{"generationConfig": map[string]any{"reasoning": map[string]any{"effort": o.ReasoningEffort}}}
	}
	settings, err := acp.SettingsFile("qwen_agent", o.Settings, fixed)
	if err != nil {
		return nil, err
	}
	profile := func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
		req := lc.Request
		flags := append(slices.Clone(b.Args), "--acp", "--auth-type=openai", "--approval-mode=default")
		if model := b.ModelFor(req); model != "" {
			flags = append(flags, "--model="+model)
		}
		if req.System != "" {
			flags = append(flags, "--append-system-prompt="+req.System)
		}
		var exclude []string
		if req.Permissions.Filesystem != eval.ReadWrite {
			exclude = append(exclude, ReadOnlyExcluded...)
		}
		if !req.Permissions.Shell {
			exclude = append(exclude, ShellExcluded...)
		}
		if !req.Permissions.Network {
			exclude = append(exclude, NetworkExcluded...)
		}
		if len(exclude) > 0 {
			flags = append(flags, "--exclude-tools="+strings.Join(exclude, ","))
		}
		e := b.LaunchEnv()
		routed, err := lc.Route(baseURL(o.BaseURL, e, lc.Local))
		if err != nil {
			return nil, fmt.Errorf("qwen_agent: the model endpoint: %w", err)
		}
		e["OPENAI_BASE_URL"] = routed
		if o.APIKey != "" {
			e["OPENAI_API_KEY"] = o.APIKey
		}
		e["HOME"] = lc.StateDir
		if dir := acp.SharedCache(e, lc.Local, compileCacheVar, "node-compile-cache"); dir != "" {
			e[compileCacheVar] = dir
		}
		e["QWEN_CODE_LEGACY_MCP_BLOCKING"] = "1"
		e["NO_COLOR"] = "1"
		l := &acp.Launch{Command: b.Command, Args: flags, Env: e, ModelHandled: true, SystemHandled: true,
			Files:          []acp.LaunchFile{{Path: ".qwen/settings.json", Content: settings}},
			CredentialHint: acp.CredentialHint(e, lc.Local, "qwen_agent found no API key: set OPENAI_API_KEY, or pass api_key = ... or env = {\"OPENAI_API_KEY\": ...}", "OPENAI_API_KEY")}
		if o.APIKey != "" {
			l.Secrets = append(l.Secrets, o.APIKey)
		}
		name := "mcp__" + req.ToolServerName() + "__" + acp.SubmitToolName
		l.StructuredInstruction = "Call " + name + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."
		return l, nil
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{Factory: "qwen_agent", Name: "qwen", Command: "qwen",
		Strings: map[string]string{"base_url": o.BaseURL, "api_key": o.APIKey, "reasoning_effort": o.ReasoningEffort}, Secret: []string{"api_key"},
		Launch: profile, Meters: true})
}

// compileCacheVar names Node's compile cache directory (Node 22 and
// later; older versions ignore it).
const compileCacheVar = "NODE_COMPILE_CACHE"

// baseURL is the model endpoint of a launch: option, else OPENAI_BASE_URL
// in env or (on the host) the process environment, else the default.
func baseURL(option string, env map[string]string, local bool) string {
	if option != "" {
		return option
	}
	if u := env["OPENAI_BASE_URL"]; u != "" {
		return u
	}
	if local {
		if u := os.Getenv("OPENAI_BASE_URL"); u != "" {
			return u
		}
	}
	return defaultBaseURL
}
