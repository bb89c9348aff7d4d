// Package copilot is the GitHub Copilot CLI agent profile over AML's ACP
// session engine: copilot_agent() in Starlark.
//
// Each session runs the Copilot CLI with Options.Args first and then the
// AML-owned flags, so that the arguments cannot override them: --acp,
// --no-auto-update, --log-dir=<state>/logs, --no-custom-instructions,
// --disable-builtin-mcps, --no-ask-user, --auth-token-env=<VAR> (when a
// token variable is found), --no-auto-login, --no-color, --no-remote,
// --no-remote-export, --model=<model>, --reasoning-effort=<effort> (when
// set), then the permission flags. COPILOT_HOME and HOME are the
// session's private state directory.
//
// The token variable is the first of COPILOT_GITHUB_TOKEN, GH_TOKEN and
// GITHUB_TOKEN set in Options.Env or, for a launch on the host, in the
// process environment; only its name is passed, never its value.
//
// Package cache: the Copilot CLI unpacks its package (about 200 MB) into
// a cache below HOME on first start, which with a private HOME would be
// every session (8 to 13 s each). Sessions share one cache instead,
// through COPILOT_PKG_CACHE_HOME: Options.PackageCache, else the
// variable's value in Options.Env or (on the host) the process
// environment, else, on the host, <user cache dir>/aml/copilot
// (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux). Copilot keeps
// one directory per version there and unpacks into a temporary name
// before renaming, so concurrent sessions and versions share it safely.
// Inside a sandbox the cache is set only when given.
//
// Permissions are flags: a denied tool kind (--deny-tool) is refused when
// called, and an excluded tool (--excluded-tools) is not offered to the
// model at all. Filesystem "read-only" denies write and excludes every
// file-writing tool Copilot has had (ReadOnlyExcluded: create, edit,
// apply_patch for GPT-5 models, str_replace_editor and others); shell=False
// denies shell and excludes bash, powershell and their session tools;
// network=False denies url and excludes web_fetch, web_search and
// fetch_copilot_cli_documentation. Names a version does not have are
// ignored by it. Sub-agents started with the task tool inherit the
// exclusions.
//
// Versions: the end-to-end tests (cli_test.go) drive Copilot 1.0.80, the
// version .ci/run installs, offline against a fake model (COPILOT_OFFLINE
// with a COPILOT_PROVIDER_BASE_URL model); they also pass against 1.0.102,
// which offers GPT-5 models apply_patch as a freeform (custom) tool and
// leaves skill and session_store_sql out of its offline tool set. Signing
// in to GitHub and Copilot's own models were not tried.
//
// MCP servers: Copilot takes streamable-HTTP servers (and the AML tool
// bridge) with session/new but rejects stdio servers sent that way, so
// the granted stdio servers are written to its own configuration,
// mcp-config.json in the private COPILOT_HOME, which it starts itself.
// Their env= values are in that file (mode 0600, removed with the
// session). A stdio cwd cannot be passed, as with every ACP agent. In a
// sandbox apart from the host (Docker) the bridge is a stdio relay, which
// Copilot refuses like any stdio server from session/new: there the
// bridge and every granted server go to mcp-config.json, and the session
// sends none (acp.Launch.NoSessionMCP). Copilot's native HTTP client
// loads the system's CA certificates even for a plain http endpoint, so
// its image needs them.
//
// Copilot reports notices (the excluded tools, unknown tool names and the
// like) as message chunks of their own that start with "Info: "; they are
// left out of the agent's text. A chunk of the model's answer that starts
// with "Info: " would be left out too. Copilot's warnings ("Warning: ")
// and errors ("Error: ") are kept. So is the text of a sub-agent started
// with the task tool, which Copilot forwards as message chunks of the
// session like its own (1.0.80 and 1.0.102): it precedes the answer.
package copilot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/aml-go/aml/eval"

	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Copilot profile: the shared acp.Base (Name ""
// means "copilot", Command "" means "copilot", Model "" means "auto",
// Args come before the AML-owned flags, Env holds the tokens) and what is
// Copilot's own.
type Options struct {
	acp.Base
	// ReasoningEffort is passed as --reasoning-effort.
	ReasoningEffort string
	// PackageCache is the directory sessions share for Copilot's unpacked
	// package (COPILOT_PKG_CACHE_HOME); "" means the default described
	// in the package doc.
	PackageCache string
}

// ReadOnlyExcluded are the file-writing tools excluded under filesystem
// "read-only": those of Copilot 1.0.80 (create and edit, or apply_patch
// for GPT-5 models) and the names its runtime knows for writing tools.
var ReadOnlyExcluded = []string{"apply_patch", "create", "edit", "insert", "multiedit", "notebookedit", "str_replace", "str_replace_editor", "write", "delete", "move"}

// ShellExcluded are the tools excluded under shell=False.
var ShellExcluded = []string{"bash", "read_bash", "write_bash", "stop_bash", "list_bash", "local_shell",
	"powershell", "read_powershell", "write_powershell", "stop_powershell", "list_powershell"}

// NetworkExcluded are the tools excluded under network=False.
var NetworkExcluded = []string{"web_fetch", "web_search", "fetch_copilot_cli_documentation"}

// pkgCacheVar names Copilot's package cache directory.
const pkgCacheVar = "COPILOT_PKG_CACHE_HOME"

// tokenVars are the token variables in priority order.
var tokenVars = []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"}

// New returns the Copilot agent provider.
func New(o Options) (*acp.Provider, error) {
	profile := func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
		req := lc.Request
		model := b.ModelFor(req)
		flags := append(slices.Clone(b.Args), "--acp", "--no-auto-update", "--log-dir="+path.Join(lc.StateDir, "logs"),
			"--no-custom-instructions", "--disable-builtin-mcps", "--no-ask-user")
		if v := tokenVar(b.Env, lc.Local); v != "" {
			flags = append(flags, "--auth-token-env="+v)
		}
		flags = append(flags, "--no-auto-login", "--no-color", "--no-remote", "--no-remote-export", "--model="+model)
		if o.ReasoningEffort != "" {
			flags = append(flags, "--reasoning-effort="+o.ReasoningEffort)
		}
		var deny, exclude []string
		if req.Permissions.Filesystem != eval.ReadWrite {
			deny, exclude = append(deny, "write"), append(exclude, ReadOnlyExcluded...)
		}
		if !req.Permissions.Shell {
			deny, exclude = append(deny, "shell"), append(exclude, ShellExcluded...)
		}
		if !req.Permissions.Network {
			deny, exclude = append(deny, "url"), append(exclude, NetworkExcluded...)
		}
		for _, d := range deny {
			flags = append(flags, "--deny-tool="+d)
		}
		if len(exclude) > 0 {
			// One comma-separated value: the option takes a variable
			// number of values, which would swallow a later argument.
			flags = append(flags, "--excluded-tools="+strings.Join(exclude, ","))
		}
		e := b.LaunchEnv()
		// A model endpoint of the user's own (COPILOT_PROVIDER_BASE_URL,
		// in env= or on the host) is routed through AML's model gateway.
		if u := providerURL(e, lc.Local); u != "" {
			routed, err := lc.Route(u)
			if err != nil {
				return nil, fmt.Errorf("copilot_agent: COPILOT_PROVIDER_BASE_URL: %w", err)
			}
			if routed != u {
				e[providerVar] = routed
			}
		}
		e["COPILOT_HOME"] = lc.StateDir
		e["HOME"] = lc.StateDir
		if dir := packageCache(o.PackageCache, e, lc.Local); dir != "" {
			e[pkgCacheVar] = dir
		}
		l := &acp.Launch{Command: b.Command, Args: flags, Env: e, ModelHandled: true, DropMessageChunk: isNotice,
			CredentialHint: acp.CredentialHint(e, lc.Local, "copilot_agent found no GitHub token: set COPILOT_GITHUB_TOKEN (or GH_TOKEN or GITHUB_TOKEN), or pass env = {\"COPILOT_GITHUB_TOKEN\": ...}; a model endpoint of your own takes COPILOT_OFFLINE and COPILOT_PROVIDER_BASE_URL (docs/agents.md)",
				append(slices.Clone(tokenVars), "COPILOT_PROVIDER_BASE_URL")...)}
		// In a sandbox apart from the host the bridge is a stdio relay,
		// which Copilot refuses from session/new like any stdio server:
		// then every server goes to its own configuration.
		var relay *acp.BridgeInfo
		if b := lc.Bridge; b != nil && len(b.Relay) > 0 {
			relay = b
			l.NoSessionMCP = true
		}
		if cfg, err := mcpConfig(req.MCPServers, relay); err != nil {
			return nil, err
		} else if cfg != nil {
			l.Files = append(l.Files, acp.LaunchFile{Path: "mcp-config.json", Content: cfg})
		}
		server := req.ToolServerName()
		if len(req.Tools) > 0 {
			var sb strings.Builder
			sb.WriteString("The AML tools are available under these names:")
			for _, t := range req.Tools {
				fmt.Fprintf(&sb, "\n- %s: %s-%s", t.Name, server, t.Name)
			}
			l.InitialPromptPrefix = sb.String()
		}
		name := server + "-" + acp.SubmitToolName
		l.StructuredInstruction = "Call " + name + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."
		return l, nil
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{Factory: "copilot_agent", Name: "copilot", Command: "copilot", Model: "auto",
		Strings: map[string]string{"reasoning_effort": o.ReasoningEffort, "package_cache": o.PackageCache}, Launch: profile,
		// Only a model endpoint of the user's own can be metered: the
		// models of a Copilot plan are reached through GitHub.
		Meters: true,
		MeterFor: func(b *acp.Base, _ *eval.AgentRequest) bool {
			return providerURL(b.Env, true) != ""
		}})
}

// providerVar names the model endpoint of Copilot's bring-your-own-model
// mode.
const providerVar = "COPILOT_PROVIDER_BASE_URL"

// providerURL is that endpoint: in env, else (on the host) in the
// process environment, else "".
func providerURL(env map[string]string, local bool) string {
	if u := env[providerVar]; u != "" {
		return u
	}
	if local {
		return os.Getenv(providerVar)
	}
	return ""
}

// tokenVar names the token variable to pass: from env first, then (for a
// host launch) from the process environment.
func tokenVar(env map[string]string, local bool) string {
	for _, v := range tokenVars {
		if env[v] != "" {
			return v
		}
	}
	if local {
		for _, v := range tokenVars {
			if os.Getenv(v) != "" {
				return v
			}
		}
	}
	return ""
}

// packageCache is the package cache directory of a launch, or "" to leave
// Copilot's default (see the package doc).
func packageCache(option string, env map[string]string, local bool) string {
	if option != "" {
		return option
	}
	return acp.SharedCache(env, local, pkgCacheVar, "copilot")
}

// isNotice reports whether a message chunk is one of Copilot's notices,
// which it sends as chunks of their own.
func isNotice(text string) bool {
	return strings.HasPrefix(text, "Info: ")
}

// mcpConfig is Copilot's MCP configuration (mcp-config.json in
// COPILOT_HOME), or nil when it has no server: the granted stdio servers,
// which Copilot rejects when an ACP client sends them with session/new
// but starts from its own configuration; with relay (the bridge of an
// agent in a sandbox apart from the host, a stdio relay) also the bridge
// and the granted streamable-HTTP servers, since the session then sends
// none.
func mcpConfig(grants []eval.AgentMCPServer, relay *acp.BridgeInfo) ([]byte, error) {
	servers := map[string]any{}
	for _, g := range grants {
		if g.Server == nil {
			continue
		}
		t := g.Server.Transport
		switch {
		case t.Type == "stdio":
			args := t.Args
			if args == nil {
				args = []string{}
			}
			entry := map[string]any{"type": "local", "command": t.Command, "args": args, "tools": []string{"*"}}
			if len(t.Env) > 0 {
				entry["env"] = t.Env
			}
			servers[g.Server.Name] = entry
		case relay != nil && t.Type == "streamable-http":
			entry := map[string]any{"type": "http", "url": t.URL, "tools": []string{"*"}}
			if len(t.Headers) > 0 {
				entry["headers"] = t.Headers
			}
			servers[g.Server.Name] = entry
		}
	}
	if relay != nil {
		servers[relay.Name] = map[string]any{"type": "local", "command": relay.Relay[0], "args": relay.Relay[1:], "env": relay.RelayEnv, "tools": []string{"*"}}
	}
	if len(servers) == 0 {
		return nil, nil
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("copilot_agent: encoding the MCP configuration: %w", err)
	}
	return b, nil
}
