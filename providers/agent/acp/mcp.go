package acp

import (
	"fmt"
	"maps"
	"slices"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
)

// mcpDescriptors maps the agent's MCP grants to ACP session/new
// descriptors. Named (provider-native) grants fail closed: a generic ACP
// agent cannot verify them. A stdio cwd is rejected because ACP has no
// field for it.
func mcpDescriptors(provider string, grants []eval.AgentMCPServer) ([]acpsdk.McpServer, error) {
	out := make([]acpsdk.McpServer, 0, len(grants))
	for _, g := range grants {
		if g.Server == nil {
			return nil, fmt.Errorf("provider %q cannot verify named MCP server %q; grant it with define_mcp_server() instead", provider, g.Name)
		}
		t := g.Server.Transport
		switch t.Type {
		case "stdio":
			if t.Cwd != "" {
				return nil, fmt.Errorf("MCP server %q: ACP cannot pass a stdio cwd; remove cwd= or start the server through a wrapper", g.Server.Name)
			}
			env := make([]acpsdk.EnvVariable, 0, len(t.Env))
			for _, k := range slices.Sorted(maps.Keys(t.Env)) {
				env = append(env, acpsdk.EnvVariable{Name: k, Value: t.Env[k]})
			}
			args := t.Args
			if args == nil {
				args = []string{}
			}
			out = append(out, acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: g.Server.Name, Command: t.Command, Args: args, Env: env}})
		case "streamable-http":
			hs := make([]acpsdk.HttpHeader, 0, len(t.Headers))
			for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
				hs = append(hs, acpsdk.HttpHeader{Name: k, Value: t.Headers[k]})
			}
			out = append(out, acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Type: "http", Name: g.Server.Name, Url: t.URL, Headers: hs}})
		default:
			return nil, fmt.Errorf("MCP server %q: unsupported transport %q", g.Server.Name, t.Type)
		}
	}
	return out, nil
}
