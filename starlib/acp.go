package starlib

import (
	"path/filepath"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/agent/acp"
)

func init() {
	register(acpAgentBuiltin)
}

var acpAgentBuiltin = &Builtin{
	Name:  "acp_agent",
	Group: "providers",
	Doc: `Returns an agent provider that runs any Agent Client Protocol (ACP) agent executable.

Each agent() session launches command with literal args (never through a shell): on the host in its own process group, with the host environment plus env=; inside a sandbox() through the sandbox runtime, with env= only. The session cwd is the sandbox's effective cwd, else working_directory=, else the current directory. The initial prompt and each follow_up() are sequential session/prompt turns of one ACP session; the result is the final turn's assistant text. Authored system text becomes a first-turn prelude inside literal <SYSTEM> tags. Permission requests are answered from the agent's permissions: reads are allowed; edit, delete and move need filesystem "read-write"; execute needs shell; fetch needs network; anything else is rejected. MCP grants from define_mcp_server() are passed to session/new; named mcp(name=...) grants are rejected. env values may hold credentials: they never reach traces or errors. Cancellation and timeout_ms send session/cancel and kill the agent's process tree.`,
	Params: []Param{
		{Name: "command", Type: "str", Positional: true, Doc: "The ACP agent executable (a name on PATH or a path)."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Literal arguments."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables added for the agent process (str to str)."},
		{Name: "name", Type: "str", Default: `"acp"`, Doc: "Provider name shown in traces and errors."},
		{Name: "working_directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox; relative paths resolve from the current directory."},
		{Name: "auth_method", Type: "str | None", Default: "None", Doc: "ACP authentication method id sent with authenticate after initialize."},
	},
	Returns: "an agent provider",
	Example: `configure(agent_provider = acp_agent("opencode", args = ["acp"], env = {"OPENAI_API_KEY": env("OPENAI_API_KEY", "")}))`,
	impl:    acpAgentImpl,
}

func acpAgentImpl(c *call) (starlark.Value, error) {
	cfg := acp.Config{Command: c.str("command"), Name: c.str("name"), AuthMethodID: c.str("auth_method"), WorkingDirectory: c.str("working_directory")}
	if c.has("name") && cfg.Name == "" {
		return nil, c.errorf("name must be a non-empty string")
	}
	if v := c.value("args"); v != nil {
		args, err := stringList(v)
		if err != nil {
			return nil, c.errorf("args %v", err)
		}
		cfg.Args = args
	}
	if v := c.value("env"); v != nil {
		d := v.(*starlark.Dict)
		cfg.Env = make(map[string]string, d.Len())
		for _, kv := range d.Items() {
			k, ok1 := kv[0].(starlark.String)
			val, ok2 := kv[1].(starlark.String)
			if !ok1 || !ok2 {
				return nil, c.errorf("env must map strings to strings, got %s: %s", kv[0].Type(), kv[1].Type())
			}
			cfg.Env[string(k)] = string(val)
		}
	}
	if d := cfg.WorkingDirectory; d != "" && !filepath.IsAbs(d) {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, c.errorf("working_directory %q: %v", d, err)
		}
		cfg.WorkingDirectory = abs
	}
	p, err := acp.New(cfg)
	if err != nil {
		return nil, c.errorf("%v", err)
	}
	return &AgentProviderValue{Provider: p}, nil
}
