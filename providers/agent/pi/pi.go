// Package pi is the Pi coding agent profile over AML's ACP session
// engine: pi_agent() in Starlark. It launches the pi-acp adapter, which
// runs the native pi executable.
//
// Every session gets a private Pi home: HOME, PI_CODING_AGENT_DIR
// (<state>/agent) and PI_CODING_AGENT_SESSION_DIR (<state>/sessions) are
// in its state directory, with agent/settings.json ({"quietStartup":
// true}) and, when Options.Models is set, agent/models.json (Pi's custom
// provider and model definitions). PI_SKIP_VERSION_CHECK is set.
//
// The model (agent(model=), else Options.Model) and the thinking level
// are ACP session configuration options (categories "model" and
// "thought_level"), validated against what pi-acp advertises.
//
// When the agent has Starlark tools, structured output or MCP grants, or
// its permissions are narrower than the default, pi runs through a
// generated wrapper (pi-for-aml) that passes --tools: read, grep, find
// and ls; edit and write for filesystem "read-write"; bash with shell; mcp
// when MCP is used. MCP (the AML tool bridge included) goes through the
// pi-mcp-adapter extension (-e <adapter>) configured in agent/mcp.json
// (the bridge connected eagerly, so that its tools are known to the mcp
// proxy tool from the start; granted servers lazily), because pi-acp does
// not connect ACP MCP servers. In a sandbox apart from the host (Docker)
// the bridge is configured as a stdio server running the sandbox's relay
// (acp.BridgeInfo.Relay). Network has no Pi mapping (the sandbox is the
// boundary).
//
// pi-acp's startup banner (session _meta.piAcp.startupInfo) is removed
// from the start of each turn's text; messages are therefore omitted.
package pi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// Options configure the Pi profile: the shared acp.Base (Name "" means
// "pi", Command "" means the ACP adapter "pi-acp", Args are extra adapter
// arguments, Env holds credentials) and what is Pi's own.
type Options struct {
	acp.Base
	// PiCommand is the native pi executable; "" means "pi".
	PiCommand string
	// MCPAdapterPath is the pi-mcp-adapter extension entry point; ""
	// discovers it next to the pi-mcp-adapter executable on PATH.
	MCPAdapterPath string
	// ThinkingLevel is set as the thought_level configuration option.
	ThinkingLevel string
	// Models is Pi's models.json (custom providers), written into the
	// private agent directory when set.
	Models map[string]any
}

// mcpNote tells the model how to reach AML tools through Pi's MCP proxy.
const mcpNote = "AML tools and MCP capabilities use Pi's mcp proxy tool. Call mcp with the exact tool name and an args object."

// New returns the Pi agent provider.
func New(o Options) (*acp.Provider, error) {
	if o.PiCommand == "" {
		o.PiCommand = "pi"
	}
	if strings.ContainsAny(o.PiCommand+o.MCPAdapterPath, "'\n") {
		return nil, fmt.Errorf("pi_agent: pi_command and mcp_adapter_path must not contain quotes or newlines")
	}
	var models []byte
	if o.Models != nil {
		var err error
		if models, err = json.MarshalIndent(o.Models, "", "  "); err != nil {
			return nil, fmt.Errorf("pi_agent: models must be JSON data: %w", err)
		}
	}
	profile := func(_ context.Context, lc acp.LaunchContext, b *acp.Base) (*acp.Launch, error) {
		req := lc.Request
		st := lc.StateDir
		e := b.LaunchEnv()
		e["HOME"] = st
		e["PI_CODING_AGENT_DIR"] = path.Join(st, "agent")
		e["PI_CODING_AGENT_SESSION_DIR"] = path.Join(st, "sessions")
		e["PI_SKIP_VERSION_CHECK"] = "1"
		e["PI_ACP_PI_COMMAND"] = o.PiCommand
		files := []acp.LaunchFile{{Path: "agent/settings.json", Content: []byte(`{"quietStartup":true}`)}}
		if models != nil {
			routed, err := routeModels(models, lc)
			if err != nil {
				return nil, err
			}
			files = append(files, acp.LaunchFile{Path: "agent/models.json", Content: routed})
		}
		l := &acp.Launch{Command: b.Command, Args: slices.Clone(b.Args), Env: e, ModelHandled: true, NoSessionMCP: true, TransformText: stripStartup}
		if models == nil {
			l.CredentialHint = acp.CredentialHint(e, lc.Local, "pi_agent found no model credential: set the key variable of the model's provider (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...), or define the provider in models = {...} (docs/agents.md)", acp.ModelKeyVars...)
		}
		if m := b.ModelFor(req); m != "" {
			l.Configuration = append(l.Configuration, acp.ConfigSetting{Category: "model", Value: m})
		}
		if o.ThinkingLevel != "" {
			l.Configuration = append(l.Configuration, acp.ConfigSetting{Category: "thought_level", Value: o.ThinkingLevel})
		}

		usesMCP := lc.Bridge != nil || len(req.MCPServers) > 0
		perms := req.Permissions
		if usesMCP || perms != eval.DefaultPermissions() {
			tools := []string{"read", "grep", "find", "ls"}
			if perms.Filesystem == eval.ReadWrite {
				tools = append(tools, "edit", "write")
			}
			if perms.Shell {
				tools = append(tools, "bash")
			}
			script := "#!/bin/sh\nexec '" + o.PiCommand + "' --tools "
			if usesMCP {
				tools = append(tools, "mcp")
				adapter, err := adapterPath(o.MCPAdapterPath, lc.Local)
				if err != nil {
					return nil, err
				}
				script += strings.Join(tools, ",") + " -e '" + adapter + "' \"$@\"\n"
				cfg, err := mcpConfig(lc.Bridge, req.MCPServers)
				if err != nil {
					return nil, err
				}
				files = append(files,
					acp.LaunchFile{Path: "agent/mcp.json", Content: cfg},
					acp.LaunchFile{Path: "agent/mcp-cache.json", Content: []byte(`{"version":1,"servers":{}}`)})
				l.InitialPromptPrefix = mcpNote
				l.StructuredInstruction = "Call the mcp tool once with tool " + acp.SubmitToolName + ` and args {"result": <the final value>}. If it returns an error, correct the result and call it again. After it accepts a result, do not call it again. A JSON value in message text does not count.`
			} else {
				script += strings.Join(tools, ",") + " \"$@\"\n"
			}
			files = append(files, acp.LaunchFile{Path: "pi-for-aml", Content: []byte(script), Executable: true})
			e["PI_ACP_PI_COMMAND"] = path.Join(st, "pi-for-aml")
		}
		l.Files = files
		return l, nil
	}
	return acp.NewProfile(o.Base, acp.ProfileSpec{Factory: "pi_agent", Name: "pi", Command: "pi-acp",
		Strings: map[string]string{"pi_command": o.PiCommand, "mcp_adapter_path": o.MCPAdapterPath, "thinking_level": o.ThinkingLevel},
		Launch:  profile,
		// A session is metered when its model's provider is one of
		// models.json, whose baseUrl AML routes.
		Meters: true,
		MeterFor: func(b *acp.Base, req *eval.AgentRequest) bool {
			id, _, ok := strings.Cut(b.ModelFor(req), "/")
			if !ok || models == nil {
				return false
			}
			var m struct {
				Providers map[string]struct {
					BaseURL string `json:"baseUrl"`
				} `json:"providers"`
			}
			return json.Unmarshal(models, &m) == nil && m.Providers[id].BaseURL != ""
		}})
}

// routeModels points every provider of models.json that names a baseUrl
// at its route (LaunchContext.Route: AML's model gateway when the session
// is metered).
func routeModels(models []byte, lc acp.LaunchContext) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(models, &m); err != nil {
		return nil, err
	}
	providers, _ := m["providers"].(map[string]any)
	for id, v := range providers {
		p, _ := v.(map[string]any)
		u, _ := p["baseUrl"].(string)
		if u == "" {
			continue
		}
		routed, err := lc.Route(u)
		if err != nil {
			return nil, fmt.Errorf("pi_agent: provider %q: %w", id, err)
		}
		p["baseUrl"] = routed
	}
	return json.MarshalIndent(m, "", "  ")
}

// adapterPath finds the pi-mcp-adapter extension: the configured path,
// else index.ts beside the resolved pi-mcp-adapter executable (host
// launches only).
func adapterPath(configured string, local bool) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if local {
		if bin, err := exec.LookPath("pi-mcp-adapter"); err == nil {
			if real, err := filepath.EvalSymlinks(bin); err == nil {
				p := filepath.Join(filepath.Dir(real), "index.ts")
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("tools, structured output and MCP servers reach Pi through the pi-mcp-adapter extension, which was not found: install it (npm install -g pi-mcp-adapter) or pass mcp_adapter_path=")
}

// mcpConfig is agent/mcp.json for pi-mcp-adapter: the bridge and the
// granted servers.
func mcpConfig(bridge *acp.BridgeInfo, grants []eval.AgentMCPServer) ([]byte, error) {
	servers := map[string]any{}
	if bridge != nil {
		entry := map[string]any{"url": bridge.URL, "headers": map[string]string{"Authorization": bridge.Authorization},
			"lifecycle": "eager", "directTools": false, "toolPrefix": "none"}
		if len(bridge.Relay) > 0 {
			// In a sandbox apart from the host: the relay over stdio.
			entry = map[string]any{"command": bridge.Relay[0], "args": bridge.Relay[1:], "env": bridge.RelayEnv,
				"lifecycle": "eager", "directTools": false, "toolPrefix": "none"}
		}
		servers[bridge.Name] = entry
	}
	for _, g := range grants {
		if g.Server == nil {
			return nil, fmt.Errorf("pi_agent cannot verify named MCP server %q; grant it with define_mcp_server() instead", g.Name)
		}
		t := g.Server.Transport
		entry := map[string]any{"lifecycle": "lazy", "directTools": false, "toolPrefix": "none"}
		switch t.Type {
		case "stdio":
			if t.Cwd != "" {
				entry["cwd"] = t.Cwd
			}
			entry["command"], entry["args"] = t.Command, append([]string{}, t.Args...)
			if len(t.Env) > 0 {
				entry["env"] = t.Env
			}
		case "streamable-http":
			entry["url"] = t.URL
			if len(t.Headers) > 0 {
				entry["headers"] = t.Headers
			}
		default:
			return nil, fmt.Errorf("MCP server %q: unsupported transport %q", g.Server.Name, t.Type)
		}
		servers[g.Server.Name] = entry
	}
	return json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
}

// stripStartup removes pi-acp's startup banner from the start of text.
func stripStartup(text string, meta map[string]any) string {
	if piACP, ok := meta["piAcp"].(map[string]any); ok {
		if info, ok := piACP["startupInfo"].(string); ok && info != "" {
			if rest, ok := strings.CutPrefix(text, info); ok {
				return strings.TrimLeft(rest, "\n")
			}
		}
	}
	return text
}
