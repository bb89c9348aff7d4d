package starlib

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

var defineToolBuiltin = &Builtin{
	Name:  "define_tool",
	Group: "capabilities",
	Doc: `Defines a tool: an application function that runs in the host process with validated input and JSON output.

The returned tool is callable from component code as t({"id": 42}) or t(id = 42): the input goes through the same normalization and validation as a model's call, and the result is checked against output= when given. Calling a tool never grants it to a model; grant it to one agent with tool(t). execute(input) receives the validated input as one value (a dict for the usual object schema), runs on its own thread (evaluate() is not available there) and must return a string or JSON data. Any JSON Schema is accepted as input; a provider that passes tool input as named arguments rejects a tool whose input root is not an object when it is granted.`,
	Params: []Param{
		{Name: "name", Type: "str", Doc: "Exact tool name: unique within one agent, the key of configure(allowed_tools=)."},
		{Name: "description", Type: "str", Doc: "What the tool does, for the model."},
		{Name: "execute", Type: "callable", Doc: "execute(input) -> str or JSON data."},
		{Name: "input", Type: "dict | None", Default: "None", Doc: "JSON Schema of the input; None accepts any object."},
		{Name: "output", Type: "dict | None", Default: "None", Doc: "JSON Schema the result must satisfy."},
	},
	Returns: "a callable tool",
	Example: `lookup = define_tool(name = "lookup_order", description = "Read one order.", input = schema.object(id = schema.string()), execute = _lookup)`,
	Impl:    defineToolImpl,
}

func defineToolImpl(c *Call) (starlark.Value, error) {
	e := envOf(c.thread)
	if e == nil {
		return nil, c.Errorf("called outside an AML workflow")
	}
	opts := eval.ToolOptions{Name: c.Str("name"), Description: c.Str("description"), Position: c.pos}
	for _, f := range []struct {
		name string
		dst  **eval.Schema
	}{{"input", &opts.Input}, {"output", &opts.Output}} {
		if v := c.Value(f.name); v != nil {
			s, err := compileSchema(v)
			if err != nil {
				return nil, c.Errorf("%s: %v", f.name, err)
			}
			*f.dst = s
		}
	}
	fn := c.Value("execute").(starlark.Callable)
	fn.Freeze()
	name := opts.Name
	pos := c.pos
	opts.Execute = func(ctx context.Context, input any) (any, error) {
		th, stop := e.newThread(ctx, "tool "+name)
		defer stop()
		v, err := starlark.Call(th, fn, starlark.Tuple{fromGo(input)}, nil)
		if err != nil {
			return nil, fromStarlark(ctx, err, pos)
		}
		if s, ok := v.(starlark.String); ok {
			return string(s), nil
		}
		g, err := toGo(v)
		if err != nil {
			return nil, &eval.ToolOutputError{Tool: name, Msg: "result is not a string or JSON data", Err: err}
		}
		return g, nil
	}
	t, err := eval.NewTool(opts)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &ToolValue{Tool: t}, nil
}

// ToolValue is the Starlark value of a tool from define_tool(). Calling it
// from component code runs the tool.
type ToolValue struct {
	Tool *eval.Tool
}

var _ starlark.Callable = (*ToolValue)(nil)

// String implements starlark.Value.
func (v *ToolValue) String() string { return fmt.Sprintf("<tool %s>", v.Tool.Name()) }

// Type implements starlark.Value.
func (v *ToolValue) Type() string { return "tool" }

// Freeze implements starlark.Value; tools are immutable.
func (v *ToolValue) Freeze() {}

// Truth implements starlark.Value.
func (v *ToolValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *ToolValue) Hash() (uint32, error) { return identityHash(v.Tool), nil }

// Name implements starlark.Callable.
func (v *ToolValue) Name() string { return v.Tool.Name() }

// Attr exposes the tool's name and description.
func (v *ToolValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(v.Tool.Name()), nil
	case "description":
		return starlark.String(v.Tool.Description()), nil
	}
	return nil, nil
}

// AttrNames implements starlark.HasAttrs.
func (v *ToolValue) AttrNames() []string { return []string{"description", "name"} }

// CallInternal runs the tool from component code: t(input) with one
// positional value, or t(key = value, ...) for an object input.
func (v *ToolValue) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	cc := componentOf(thread)
	if cc == nil {
		return nil, fmt.Errorf("Tools can only be called while an AML component is active: call %s inside a component body (or the entry function); to let a model call it, grant it with tool(%s)", v.Tool.Name(), v.Tool.Name())
	}
	var input any = eval.NoInput
	switch {
	case len(args) > 1:
		return nil, fmt.Errorf("%s: pass the input as one value or as keyword arguments, got %d positional arguments", v.Tool.Name(), len(args))
	case len(args) == 1 && len(kwargs) > 0:
		return nil, fmt.Errorf("%s: pass the input either as one value or as keyword arguments, not both", v.Tool.Name())
	case len(args) == 1:
		g, err := toGo(args[0])
		if err != nil {
			return nil, &eval.ToolInputError{Tool: v.Tool.Name(), Msg: "input is not JSON data", Err: err}
		}
		input = g
	case len(kwargs) > 0:
		m := make(map[string]any, len(kwargs))
		for _, kv := range kwargs {
			g, err := toGo(kv[1])
			if err != nil {
				return nil, &eval.ToolInputError{Tool: v.Tool.Name(), Msg: fmt.Sprintf("input %s is not JSON data", kv[0]), Err: err}
			}
			m[string(kv[0].(starlark.String))] = g
		}
		input = m
	}
	out, err := cc.CallTool(v.Tool, input)
	if err != nil {
		return nil, err
	}
	return fromGo(out), nil
}

var toolBuiltin = &Builtin{
	Name:  "tool",
	Group: "capabilities",
	Doc: `Grants a tool from define_tool() to the nearest enclosing agent(), so the model may call it.

Valid only inside agent() (not inside system() or follow_up()); names must be unique within one agent, and configure(allowed_tools=[...]) restricts which tools may be granted. Sibling and parent agents do not inherit the grant. Contributes no text.`,
	Params:  []Param{{Name: "t", Type: "tool", Positional: true, Doc: "The tool returned by define_tool()."}},
	Returns: "a tool node",
	Example: `agent(tool(lookup), "Summarize order A-42.")`,
	Impl: func(c *Call) (starlark.Value, error) {
		tv, ok := c.Value("t").(*ToolValue)
		if !ok {
			return nil, c.Errorf("t must be a tool returned by define_tool(), got %s", c.Value("t").Type())
		}
		return nodeValue(&eval.ToolGrant{Tool: tv.Tool, Position: c.pos}), nil
	},
}

var defineMCPServerBuiltin = &Builtin{
	Name:   "define_mcp_server",
	Static: true,
	Group:  "capabilities",
	Doc: `Defines an immutable MCP server descriptor without connecting to it.

transport is {"type": "stdio", "command": ..., "args": [...], "cwd": ..., "env": {...}} or {"type": "streamable-http", "url": "https://...", "headers": {...}}. The descriptor is validated and copied; the agent provider that receives it owns the connection. env and headers may hold secrets: they are never traced.`,
	Params: []Param{
		{Name: "name", Type: "str", Doc: "Exact server name, also used by configure(allowed_mcp_servers=)."},
		{Name: "transport", Type: "dict", Keys: transportKeys, Doc: "The transport description."},
	},
	Returns: "an MCP server descriptor",
	Example: `docs = define_mcp_server(name = "docs", transport = {"type": "streamable-http", "url": "https://mcp.example.com/docs"})`,
	Impl:    defineMCPServerImpl,
}

// transportKeys are the keys of define_mcp_server(transport=): those of
// both types (the Impl rejects the other type's keys).
var transportKeys = []Key{
	{Name: "type", Type: "str", Enum: []string{"stdio", "streamable-http"}, Doc: `How the server is reached: "stdio" (a process aml starts) or "streamable-http" (a URL).`},
	{Name: "command", Type: "str", Doc: "stdio: the executable that serves MCP on its standard streams."},
	{Name: "args", Type: "list", Doc: "stdio: the command's arguments."},
	{Name: "cwd", Type: "str", Doc: "stdio: the directory the command runs in."},
	{Name: "env", Type: "dict", Doc: "stdio: variables added to the command's environment."},
	{Name: "url", Type: "str", Doc: "streamable-http: the server's endpoint."},
	{Name: "headers", Type: "dict", Doc: "streamable-http: headers sent with every request (use env() for secrets)."},
}

func defineMCPServerImpl(c *Call) (starlark.Value, error) {
	name := c.Str("name")
	if name == "" || strings.TrimSpace(name) != name || strings.ContainsRune(name, 0) {
		return nil, c.Errorf("name must be non-empty, without surrounding whitespace, got %q", name)
	}
	d := c.Value("transport").(*starlark.Dict)
	fields := map[string]starlark.Value{}
	for _, kv := range d.Items() {
		k, ok := kv[0].(starlark.String)
		if !ok {
			return nil, c.Errorf("transport keys must be strings, got %s", kv[0].Type())
		}
		fields[string(k)] = kv[1]
	}
	str := func(key string, required bool) (string, error) {
		v, ok := fields[key]
		if !ok {
			if required {
				return "", c.Errorf("transport[%q] is required", key)
			}
			return "", nil
		}
		s, ok := v.(starlark.String)
		if !ok || strings.TrimSpace(string(s)) == "" || strings.TrimSpace(string(s)) != string(s) {
			return "", c.Errorf("transport[%q] must be a non-empty string without surrounding whitespace, got %s", key, v.String())
		}
		return string(s), nil
	}
	strMap := func(key string) (map[string]string, error) {
		v, ok := fields[key]
		if !ok {
			return nil, nil
		}
		md, ok := v.(*starlark.Dict)
		if !ok {
			return nil, c.Errorf("transport[%q] must be a dict of strings, got %s", key, v.Type())
		}
		out := make(map[string]string, md.Len())
		for _, kv := range md.Items() {
			k, ok1 := kv[0].(starlark.String)
			val, ok2 := kv[1].(starlark.String)
			if !ok1 || !ok2 || k == "" {
				return nil, c.Errorf("transport[%q] must map non-empty strings to strings", key)
			}
			out[string(k)] = string(val)
		}
		return out, nil
	}
	typ, err := str("type", true)
	if err != nil {
		return nil, err
	}
	t := eval.MCPTransport{Type: typ}
	allowed := map[string]bool{"type": true}
	switch typ {
	case "stdio":
		for _, k := range []string{"command", "args", "cwd", "env"} {
			allowed[k] = true
		}
		if t.Command, err = str("command", true); err != nil {
			return nil, err
		}
		if t.Cwd, err = str("cwd", false); err != nil {
			return nil, err
		}
		if v, ok := fields["args"]; ok {
			if t.Args, err = stringList(v); err != nil {
				return nil, c.Errorf("transport[\"args\"] %v", err)
			}
		}
		if t.Env, err = strMap("env"); err != nil {
			return nil, err
		}
	case "streamable-http":
		for _, k := range []string{"url", "headers"} {
			allowed[k] = true
		}
		if t.URL, err = str("url", true); err != nil {
			return nil, err
		}
		u, perr := url.Parse(t.URL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, c.Errorf("transport[\"url\"] must be an absolute http: or https: URL, got %q", t.URL)
		}
		t.URL = u.String()
		if t.Headers, err = strMap("headers"); err != nil {
			return nil, err
		}
	default:
		return nil, c.Errorf(`transport["type"] must be "stdio" or "streamable-http", got %q`, typ)
	}
	var unknown []string
	for k := range fields {
		if !allowed[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		valid := make([]string, 0, len(allowed))
		for k := range allowed {
			valid = append(valid, k)
		}
		sort.Strings(valid)
		return nil, c.Errorf("unknown %s transport key(s) %s; valid keys are %s", typ, strings.Join(unknown, ", "), strings.Join(valid, ", "))
	}
	return &MCPServerValue{Server: &eval.MCPServer{Name: name, Transport: t}}, nil
}

// MCPServerValue is the Starlark value of define_mcp_server(). Its
// transport is not exposed, so secrets cannot leak into prompts.
type MCPServerValue struct {
	Server *eval.MCPServer
}

// String implements starlark.Value without revealing the transport.
func (v *MCPServerValue) String() string {
	return fmt.Sprintf("<mcp_server %s (%s)>", v.Server.Name, v.Server.Transport.Type)
}

// Type implements starlark.Value.
func (v *MCPServerValue) Type() string { return "mcp_server" }

// Freeze implements starlark.Value; descriptors are immutable.
func (v *MCPServerValue) Freeze() {}

// Truth implements starlark.Value.
func (v *MCPServerValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *MCPServerValue) Hash() (uint32, error) { return identityHash(v.Server), nil }

// Attr exposes the server's name and transport type.
func (v *MCPServerValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(v.Server.Name), nil
	case "type":
		return starlark.String(v.Server.Transport.Type), nil
	}
	return nil, nil
}

// AttrNames implements starlark.HasAttrs.
func (v *MCPServerValue) AttrNames() []string { return []string{"name", "type"} }

var mcpBuiltin = &Builtin{
	Name:   "mcp",
	Static: true,
	Group:  "capabilities",
	Doc: `Grants one MCP server to the nearest enclosing agent(): a provider-native server by name=, or a descriptor from define_mcp_server() with use=.

Exactly one of name= and use= is required. Valid only inside agent(); names must be unique within one agent and configure(allowed_mcp_servers=[...]) restricts them. The agent provider owns the connection.`,
	Params: []Param{
		{Name: "name", Type: "str | None", Default: "None", Doc: "A provider-native server name."},
		{Name: "use", Type: "mcp_server | None", Default: "None", Doc: "A descriptor from define_mcp_server()."},
	},
	Returns: "an mcp node",
	Example: `agent(mcp(use = docs), "Find the relevant API contract.")`,
	Impl: func(c *Call) (starlark.Value, error) {
		hasName, hasUse := c.Has("name"), c.Has("use")
		if hasName == hasUse {
			return nil, c.Errorf("pass exactly one of name= (a provider-native server) and use= (a define_mcp_server() descriptor)")
		}
		g := &eval.MCPGrant{Position: c.pos}
		if hasName {
			name := c.Str("name")
			if name == "" || strings.TrimSpace(name) != name {
				return nil, c.Errorf("name must be non-empty and without surrounding whitespace, got %q", name)
			}
			g.Name = name
		} else {
			sv, ok := c.Value("use").(*MCPServerValue)
			if !ok {
				return nil, c.Errorf("use must be a descriptor returned by define_mcp_server(), got %s", c.Value("use").Type())
			}
			g.Server = sv.Server
		}
		return nodeValue(g), nil
	},
}
