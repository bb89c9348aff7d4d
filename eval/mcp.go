package eval

// MCPTransport describes how to reach an MCP server. Exactly one of the
// stdio fields (Command) or the HTTP fields (URL) is set, per Type.
type MCPTransport struct {
	// Type is "stdio" or "streamable-http".
	Type    string
	Command string
	Args    []string
	Cwd     string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// MCPServer is an immutable MCP server descriptor from
// define_mcp_server(). Its transport may carry secrets (env, headers) and
// is never traced.
type MCPServer struct {
	Name      string
	Transport MCPTransport
}

// MCPGrant grants an MCP server to the nearest enclosing agent: either a
// provider-native server by Name, or the configured Server.
type MCPGrant struct {
	Name     string
	Server   *MCPServer
	Position Position
}

// Kind implements Node.
func (*MCPGrant) Kind() string { return "mcp" }

// Pos implements Node.
func (n *MCPGrant) Pos() Position { return n.Position }

// GrantName returns the granted server's name.
func (n *MCPGrant) GrantName() string {
	if n.Server != nil {
		return n.Server.Name
	}
	return n.Name
}

// AgentMCPServer is a granted MCP server as a provider sees it. Server is
// nil for a provider-native server named Name.
type AgentMCPServer struct {
	Name   string
	Server *MCPServer
}
