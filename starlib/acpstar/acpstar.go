package acpstar

import (
	"path/filepath"

	"github.com/aml-go/aml/starlib"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/codex"
	"github.com/aml-go/aml/providers/agent/copilot"
	"github.com/aml-go/aml/providers/agent/glm"
	"github.com/aml-go/aml/providers/agent/opencode"
	"github.com/aml-go/aml/providers/agent/pi"
)

var acpAgentBuiltin = &starlib.Builtin{
	Name:  "acp_agent",
	Group: "providers",
	Doc: `Returns an agent provider that runs any Agent Client Protocol (ACP) agent executable.

Each agent() session launches command with literal args (never through a shell): on the host in its own process group, with the host environment plus env=; inside a sandbox() through the sandbox runtime, with env= only. The session cwd is the sandbox's effective cwd, else working_directory=, else the current directory. The initial prompt and each follow_up() are sequential session/prompt turns of one ACP session; the result is the final turn's assistant text. Authored system text becomes a first-turn prelude inside literal <SYSTEM> tags. Permission requests are answered from the agent's permissions: reads are allowed; edit, delete and move need filesystem "read-write"; execute needs shell; fetch needs network; anything else is rejected. MCP grants from define_mcp_server() are passed to session/new; named mcp(name=...) grants are rejected. env values may hold credentials: they never reach traces or errors. Cancellation and timeout_ms send session/cancel and kill the agent's process tree.`,
	Params: []starlib.Param{
		{Name: "command", Type: "str", Positional: true, Doc: "The ACP agent executable (a name on PATH or a path)."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Literal arguments."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables added for the agent process (str to str)."},
		{Name: "name", Type: "str", Default: `"acp"`, Doc: "Provider name shown in traces and errors."},
		{Name: "working_directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox; relative paths resolve from the current directory."},
		{Name: "auth_method", Type: "str | None", Default: "None", Doc: "ACP authentication method id sent with authenticate after initialize."},
	},
	Returns: "an agent provider",
	Example: `configure(agent_provider = acp_agent("opencode", args = ["acp"], env = {"OPENAI_API_KEY": env("OPENAI_API_KEY", "")}))`,
	Impl:    acpAgentImpl,
}

func acpAgentImpl(c *starlib.Call) (starlark.Value, error) {
	l, err := readLaunch(c, "working_directory", "name")
	if err != nil {
		return nil, err
	}
	return providerValue(c)(acp.New(acp.Config{Command: c.Str("command"), Name: c.Str("name"), AuthMethodID: c.Str("auth_method"),
		Args: l.args, Env: l.env, WorkingDirectory: l.dir}))
}

var opencodeAgentBuiltin = &starlib.Builtin{
	Name:  "opencode_agent",
	Group: "providers",
	Doc: `Returns the OpenCode agent provider: "opencode acp --pure --cwd <cwd>" plus args= over AML's ACP session engine.

Each session gets a private OpenCode configuration (OPENCODE_CONFIG_CONTENT): config= preserved, then an AML-owned primary agent "aml" made the default, whose tools and permissions follow the agent's permissions (filesystem "read-only" disables and denies edit and write, shell=False bash, network=False webfetch and websearch; the denials also apply to OpenCode's subagents), the effective model (agent(model=), else model=, else config["model"]) and the staged skill directories in skills.paths. The session database and the XDG cache, config, state and data directories are private to the session; env={"XDG_DATA_HOME": ...} may replace only the data directory (where OpenCode keeps auth.json). HOME is not replaced: set env={"OPENCODE_DISABLE_CLAUDE_CODE_PROMPT": "1"} to skip ~/.claude/CLAUDE.md. Starlark tools and structured results reach OpenCode through the AML tool bridge; mcp() grants from define_mcp_server() are attached to the session. Credentials go in env= (for example from env()); they never reach traces or errors.`,
	Params: []starlib.Param{
		{Name: "model", Type: "str | None", Default: "None", Doc: `Fallback model, "provider/model".`},
		{Name: "config", Type: "dict", Default: "{}", Doc: "OpenCode configuration (JSON data)."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables for OpenCode (str to str): provider credentials and switches."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Extra arguments after the ACP arguments AML supplies."},
		{Name: "command", Type: "str", Default: `"opencode"`, Doc: "The OpenCode executable."},
		{Name: "directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox (relative paths resolve from the current directory)."},
		{Name: "name", Type: "str", Default: `"opencode"`, Doc: "Provider name shown in traces and errors."},
	},
	Returns: "an agent provider",
	Example: `coder = opencode_agent(model = "openai/gpt-5", env = {"OPENAI_API_KEY": env("OPENAI_API_KEY")})`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		l, err := readLaunch(c, "directory", "name", "command")
		if err != nil {
			return nil, err
		}
		config, err := c.JSON("config")
		if err != nil {
			return nil, err
		}
		return providerValue(c)(opencode.New(opencode.Options{Name: c.Str("name"), Command: c.Str("command"), Model: c.Str("model"),
			Config: config, Args: l.args, Env: l.env, Directory: l.dir}))
	},
}

// Extension adds the ACP agent factories to workflows loaded with it
// (starlib.LoadOptions.Extensions): acp_agent for any ACP executable and
// the opencode_agent, codex_agent, copilot_agent, glm_agent and pi_agent
// profiles.
var Extension = &starlib.Extension{
	Name: "acp",
	Builtins: []*starlib.Builtin{
		acpAgentBuiltin, opencodeAgentBuiltin, codexAgentBuiltin, copilotAgentBuiltin, glmAgentBuiltin, piAgentBuiltin,
	},
}

// launch holds the parameters every agent factory shares.
type launch struct {
	args []string
	env  map[string]string
	dir  string
}

// readLaunch checks that the string parameters nonEmpty are not empty
// when given, and reads args= (a list of strings), env= (a dict of
// strings) and the directory parameter dirParam, resolved from the
// working directory when relative.
func readLaunch(c *starlib.Call, dirParam string, nonEmpty ...string) (launch, error) {
	var l launch
	for _, k := range nonEmpty {
		if c.Has(k) && c.Str(k) == "" {
			return l, c.Errorf("%s must be a non-empty string", k)
		}
	}
	var err error
	if l.args, err = c.StringList("args"); err != nil {
		return l, err
	}
	if l.env, err = c.StringDict("env"); err != nil {
		return l, err
	}
	l.dir = c.Str(dirParam)
	if l.dir != "" && !filepath.IsAbs(l.dir) {
		abs, err := filepath.Abs(l.dir)
		if err != nil {
			return l, c.Errorf("%s %q: %v", dirParam, l.dir, err)
		}
		l.dir = abs
	}
	return l, nil
}

// providerValue turns an agent provider constructor's results into the
// factory's result, reporting a construction error at the call.
func providerValue(c *starlib.Call) func(*acp.Provider, error) (starlark.Value, error) {
	return func(p *acp.Provider, err error) (starlark.Value, error) {
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &starlib.AgentProviderValue{Provider: p}, nil
	}
}

var codexAgentBuiltin = &starlib.Builtin{
	Name:  "codex_agent",
	Group: "providers",
	Doc: `Returns the Codex agent provider: the Codex ACP adapter (codex-acp, from @agentclientprotocol/codex-acp) over AML's ACP session engine.

Each session gets private Codex state (CODEX_HOME, sqlite, logs) in a directory removed afterwards. config= is the base Codex configuration, passed as CODEX_CONFIG with model (agent(model=), else model=), model_reasoning_effort and developer_instructions (the AML system text) written by AML. Filesystem "read-write" starts Codex in agent-full-access mode, "read-only" in read-only mode; shell and network have no Codex mapping (the sandbox is the boundary). Staged skills are discovered natively. api_key= (or CODEX_API_KEY / OPENAI_API_KEY in env=) selects API-key authentication. Starlark tools and structured results reach Codex through the AML tool bridge. Credentials never reach traces or errors.`,
	Params: []starlib.Param{
		{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model."},
		{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "OpenAI API key (CODEX_API_KEY); prefer env()."},
		{Name: "config", Type: "dict", Default: "{}", Doc: "Base Codex configuration (JSON data)."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables for the adapter (str to str)."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Arguments appended literally."},
		{Name: "command", Type: "str", Default: `"codex-acp"`, Doc: "The Codex ACP adapter executable."},
		{Name: "codex_path", Type: "str", Default: `"codex"`, Doc: "The Codex executable the adapter runs (CODEX_PATH)."},
		{Name: "reasoning_effort", Type: "str | None", Default: "None", Doc: "Codex model_reasoning_effort."},
		{Name: "working_directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox (relative paths resolve from the current directory)."},
		{Name: "name", Type: "str", Default: `"codex"`, Doc: "Provider name shown in traces and errors."},
	},
	Returns: "an agent provider",
	Example: `coder = codex_agent(model = "gpt-5-codex", api_key = env("OPENAI_API_KEY"))`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		l, err := readLaunch(c, "working_directory", "name", "command", "codex_path")
		if err != nil {
			return nil, err
		}
		config, err := c.JSON("config")
		if err != nil {
			return nil, err
		}
		return providerValue(c)(codex.New(codex.Options{Name: c.Str("name"), Command: c.Str("command"), CodexPath: c.Str("codex_path"), Model: c.Str("model"),
			APIKey: c.Str("api_key"), ReasoningEffort: c.Str("reasoning_effort"), Config: config, Args: l.args, Env: l.env, WorkingDirectory: l.dir}))
	},
}

var copilotAgentBuiltin = &starlib.Builtin{
	Name:  "copilot_agent",
	Group: "providers",
	Doc: `Returns the GitHub Copilot CLI agent provider over AML's ACP session engine.

Each session runs the Copilot CLI with args= first and then AML's own flags (ACP mode, no auto-update, private logs, no custom instructions, no built-in MCP servers, no interactive questions or login, no remote, --model, --reasoning-effort and the permission flags), so args= cannot override them. COPILOT_HOME and HOME are a private state directory. The GitHub token is read by Copilot from the first of COPILOT_GITHUB_TOKEN, GH_TOKEN and GITHUB_TOKEN set in env= (or, on the host, in the environment): only the variable's name is passed. Filesystem "read-only" denies write and excludes edit and write; shell=False denies shell and excludes bash; network=False denies url and excludes web_fetch and web_search. Starlark tools and structured results reach Copilot through the AML tool bridge (named "<prefix>-<tool>" for the model).`,
	Params: []starlib.Param{
		{Name: "model", Type: "str | None", Default: `"auto"`, Doc: "Fallback model."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables (the GitHub token) for Copilot (str to str)."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Arguments placed before AML's own flags."},
		{Name: "command", Type: "str", Default: `"copilot"`, Doc: "The Copilot CLI executable."},
		{Name: "reasoning_effort", Type: "str | None", Default: "None", Doc: "Passed as --reasoning-effort."},
		{Name: "working_directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox (relative paths resolve from the current directory)."},
		{Name: "name", Type: "str", Default: `"copilot"`, Doc: "Provider name shown in traces and errors."},
	},
	Returns: "an agent provider",
	Example: `reviewer = copilot_agent(env = {"GH_TOKEN": env("GH_TOKEN")})`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		l, err := readLaunch(c, "working_directory", "name", "command")
		if err != nil {
			return nil, err
		}
		return providerValue(c)(copilot.New(copilot.Options{Name: c.Str("name"), Command: c.Str("command"), Model: c.Str("model"),
			ReasoningEffort: c.Str("reasoning_effort"), Args: l.args, Env: l.env, WorkingDirectory: l.dir}))
	},
}

var glmAgentBuiltin = &starlib.Builtin{
	Name:  "glm_agent",
	Group: "providers",
	Doc: `Returns the GLM (Z.ai) agent provider: the glm-acp-agent adapter over AML's ACP session engine.

AML sets Z_AI_API_KEY (api_key=), ACP_GLM_BASE_URL (base_url=), ACP_GLM_MAX_TOKENS (max_tokens=), ACP_GLM_MODEL (agent(model=), else model=) and a private ACP_GLM_SESSION_DIR after env=, so env= cannot override them. An API key selects the z-ai-api-key authentication. The adapter's own tools cannot be disabled: shell and network permissions have no mapping, and the sandbox is the boundary. Starlark tools and structured results reach the agent through the AML tool bridge.`,
	Params: []starlib.Param{
		{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "Z.ai API key; prefer env()."},
		{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model (the adapter defaults to glm-5.3)."},
		{Name: "base_url", Type: "str | None", Default: "None", Doc: "API endpoint."},
		{Name: "max_tokens", Type: "int | None", Default: "None", Doc: "Completion bound (positive)."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables for the adapter (str to str)."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Arguments appended literally."},
		{Name: "command", Type: "str", Default: `"glm-acp-agent"`, Doc: "The adapter executable."},
		{Name: "working_directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox (relative paths resolve from the current directory)."},
		{Name: "name", Type: "str", Default: `"glm"`, Doc: "Provider name shown in traces and errors."},
	},
	Returns: "an agent provider",
	Example: `glm = glm_agent(api_key = env("Z_AI_API_KEY"), model = "glm-4.7")`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		l, err := readLaunch(c, "working_directory", "name", "command")
		if err != nil {
			return nil, err
		}
		o := glm.Options{Name: c.Str("name"), Command: c.Str("command"), APIKey: c.Str("api_key"), Model: c.Str("model"), BaseURL: c.Str("base_url"),
			Args: l.args, Env: l.env, WorkingDirectory: l.dir}
		if n, set, err := c.Int("max_tokens"); err != nil {
			return nil, err
		} else if set {
			if n <= 0 {
				return nil, c.Errorf("max_tokens must be a positive integer, got %d", n)
			}
			o.MaxTokens = n
		}
		return providerValue(c)(glm.New(o))
	},
}

var piAgentBuiltin = &starlib.Builtin{
	Name:  "pi_agent",
	Group: "providers",
	Doc: `Returns the Pi coding agent provider: the pi-acp adapter (running the native pi) over AML's ACP session engine.

Every session gets a private Pi home (HOME, agent and session directories) removed afterwards; models= is written there as Pi's models.json for custom providers. The model (agent(model=), else model=) and thinking_level= are set as ACP session configuration options and must be ones pi-acp offers. With tools, structured output or MCP grants, or permissions narrower than the default, pi runs through a generated wrapper that passes --tools (read, grep, find, ls; edit and write for filesystem "read-write"; bash with shell; mcp when MCP is used). Tools, structured output and MCP servers reach Pi through the pi-mcp-adapter extension (npm install -g pi-mcp-adapter, or mcp_adapter_path=). Network has no Pi mapping: the sandbox is the boundary. pi needs Node 22.`,
	Params: []starlib.Param{
		{Name: "model", Type: "str | None", Default: "None", Doc: `Fallback model, as pi-acp names it ("provider/model").`},
		{Name: "thinking_level", Type: "str | None", Default: "None", Doc: "Pi thinking level (thought_level option)."},
		{Name: "env", Type: "dict", Default: "{}", Doc: "Environment variables (credentials) for pi-acp and pi (str to str)."},
		{Name: "models", Type: "dict | None", Default: "None", Doc: "Pi models.json content (custom providers)."},
		{Name: "args", Type: "list", Default: "[]", Doc: "Extra pi-acp arguments."},
		{Name: "command", Type: "str", Default: `"pi-acp"`, Doc: "The pi-acp executable."},
		{Name: "pi_command", Type: "str", Default: `"pi"`, Doc: "The native pi executable."},
		{Name: "mcp_adapter_path", Type: "str | None", Default: "None", Doc: "The pi-mcp-adapter extension (discovered from PATH when omitted)."},
		{Name: "working_directory", Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox (relative paths resolve from the current directory)."},
		{Name: "name", Type: "str", Default: `"pi"`, Doc: "Provider name shown in traces and errors."},
	},
	Returns: "an agent provider",
	Example: `pi = pi_agent(model = "anthropic/claude-sonnet-4", env = {"ANTHROPIC_API_KEY": env("ANTHROPIC_API_KEY")})`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		l, err := readLaunch(c, "working_directory", "name", "command", "pi_command")
		if err != nil {
			return nil, err
		}
		models, err := c.JSON("models")
		if err != nil {
			return nil, err
		}
		return providerValue(c)(pi.New(pi.Options{Name: c.Str("name"), Command: c.Str("command"), PiCommand: c.Str("pi_command"),
			MCPAdapterPath: c.Str("mcp_adapter_path"), Model: c.Str("model"), ThinkingLevel: c.Str("thinking_level"), Models: models,
			Args: l.args, Env: l.env, WorkingDirectory: l.dir}))
	},
}
