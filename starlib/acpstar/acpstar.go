package acpstar

import (
	"strconv"
	"time"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/claude"
	"github.com/aml-go/aml/providers/agent/codex"
	"github.com/aml-go/aml/providers/agent/copilot"
	"github.com/aml-go/aml/providers/agent/gemini"
	"github.com/aml-go/aml/providers/agent/glm"
	"github.com/aml-go/aml/providers/agent/opencode"
	"github.com/aml-go/aml/providers/agent/pi"
	"github.com/aml-go/aml/providers/agent/qwen"
	"github.com/aml-go/aml/starlib"
)

// Options configure the ACP extension.
type Options struct {
	// Relay is the stdio MCP relay command (and leading arguments) that
	// agents without HTTP MCP support use to reach the tool bridge; the
	// aml CLI passes itself and "mcp-relay". nil means no relay.
	Relay []string
	// ClientVersion is the version announced to the agents; "" means
	// "dev".
	ClientVersion string
}

// New returns the extension that adds the ACP agent factories to
// workflows loaded with it (starlib.LoadOptions.Extensions): acp_agent
// for any ACP executable and the opencode_agent, codex_agent,
// copilot_agent, glm_agent, pi_agent, qwen_agent, claude_agent and gemini_agent profiles. Every provider they
// build gets o's relay and version.
func New(o Options) *starlib.Extension {
	bs := make([]*starlib.Builtin, len(factories))
	for i, f := range factories {
		b := f.builtin
		impl := f.impl
		b.Impl = func(c *starlib.Call) (starlark.Value, error) { return impl(o, c) }
		// A factory validates its options and builds a provider that
		// starts nothing until a session: the analysis runs it on
		// literal arguments.
		b.Static = true
		bs[i] = &b
	}
	return &starlib.Extension{Name: "acp", Builtins: bs}
}

// Extension is New(Options{}): the factories without a stdio relay.
var Extension = New(Options{})

// factory is one builtin and its implementation given the options.
type factory struct {
	builtin starlib.Builtin
	impl    func(o Options, c *starlib.Call) (starlark.Value, error)
}

// shared are the parameter rows every profile factory has after its own:
// env=, args=, command=, the working directory and name=.
type shared struct {
	command, commandDoc, envDoc, argsDoc, dir, name string
}

func (r shared) params(own ...starlib.Param) []starlib.Param {
	dir := r.dir
	if dir == "" {
		dir = "working_directory"
	}
	return append(own,
		starlib.Param{Name: "env", Type: "dict", Default: "{}", Doc: r.envDoc},
		starlib.Param{Name: "args", Type: "list", Default: "[]", Doc: r.argsDoc},
		starlib.Param{Name: "command", Type: "str", Default: strconv.Quote(r.command), Doc: r.commandDoc},
		starlib.Param{Name: dir, Type: "str | None", Default: "None", Doc: "Session cwd outside a sandbox (relative paths resolve from the current directory)."},
		starlib.Param{Name: "name", Type: "str", Default: strconv.Quote(r.name), Doc: "Provider name shown in traces and errors."},
		handshakeParam,
	)
}

// meterParam turns the model gateway off for a profile that meters.
var meterParam = starlib.Param{Name: "meter", Type: "bool", Default: "True",
	Doc: "Route the agent's model calls through AML's model gateway, which meters them for budgets and spend (sessions on the host); False counts the agent's own usage reports instead."}

// handshakeParam bounds the session handshake of every factory.
var handshakeParam = starlib.Param{Name: "handshake_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds",
	Doc: "Bound of each handshake request (initialize, authenticate, session/new) in milliseconds (default 60000): an agent that does not answer fails with what it printed."}

// base reads the shared parameters into the profile base: name=,
// command= and the string parameters in nonEmpty must not be empty when
// given, args= is a list of strings, env= a dict of strings, and the
// directory parameter dir resolves from the working directory when
// relative.
func base(o Options, c *starlib.Call, dir, model string, nonEmpty ...string) (acp.Base, error) {
	b := acp.Base{Name: c.Str("name"), Command: c.Str("command"), Model: model, Relay: o.Relay, ClientVersion: o.ClientVersion}
	if n, set, err := c.Int("handshake_timeout_ms"); err != nil {
		return b, err
	} else if set {
		if n <= 0 || n > 1<<40 {
			return b, c.Errorf("handshake_timeout_ms must be a positive integer (milliseconds), got %d", n)
		}
		b.HandshakeTimeout = time.Duration(n) * time.Millisecond
	}
	for _, k := range append([]string{"name", "command"}, nonEmpty...) {
		if c.Has(k) && c.Str(k) == "" {
			return b, c.Errorf("%s must be a non-empty string", k)
		}
	}
	var err error
	if b.Args, err = c.StringList("args"); err != nil {
		return b, err
	}
	if b.Env, err = c.StringDict("env"); err != nil {
		return b, err
	}
	b.WorkingDirectory = c.Str(dir)
	abs, err := c.Abs(b.WorkingDirectory)
	if err != nil {
		return b, c.Errorf("%s %q: %v", dir, b.WorkingDirectory, err)
	}
	b.WorkingDirectory = abs
	return b, nil
}

// provider turns a constructor's results into the factory's result,
// reporting a construction error at the call.
func provider(c *starlib.Call, p *acp.Provider, err error) (starlark.Value, error) {
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &starlib.AgentProviderValue{Provider: p}, nil
}

var factories = []factory{
	{starlib.Builtin{
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
			handshakeParam,
			{Name: "auth_method", Type: "str | None", Default: "None", Doc: "ACP authentication method id sent with authenticate after initialize."},
			{Name: "reports_cost", Type: "bool", Default: "False", Doc: "The agent reports its cumulative cost in ACP usage_update notifications: a cost_usd budget then needs no price for its model, and stops a turn as soon as a report crosses it."},
		},
		Returns: "an agent provider",
		Example: `configure(agent_provider = acp_agent("opencode", args = ["acp"], env = {"OPENAI_API_KEY": env("OPENAI_API_KEY", "")}))`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", "")
		if err != nil {
			return nil, err
		}
		p, err := acp.New(acp.Config{Command: b.Command, Name: b.Name, AuthMethodID: c.Str("auth_method"),
			Args: b.Args, Env: b.Env, WorkingDirectory: b.WorkingDirectory, Relay: b.Relay, ClientVersion: b.ClientVersion,
			HandshakeTimeout: b.HandshakeTimeout, ReportsCost: c.Bool("reports_cost", false)})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "opencode_agent",
		Group: "providers",
		Doc: `Returns the OpenCode agent provider: "opencode acp --pure --cwd <cwd>" plus args= over AML's ACP session engine.

Each session gets a private OpenCode configuration (OPENCODE_CONFIG_CONTENT): config= preserved, then an AML-owned primary agent "aml" made the default, whose tools and permissions follow the agent's permissions (filesystem "read-only" disables and denies edit and write, shell=False bash, network=False webfetch and websearch; the denials also apply to OpenCode's subagents), the effective model (agent(model=), else model=, else config["model"]) and the staged skill directories in skills.paths. The session database and the XDG cache, config, state and data directories are private to the session; env={"XDG_DATA_HOME": ...} may replace only the data directory (where OpenCode keeps auth.json). HOME is not replaced: set env={"OPENCODE_DISABLE_CLAUDE_CODE_PROMPT": "1"} to skip ~/.claude/CLAUDE.md. Starlark tools and structured results reach OpenCode through the AML tool bridge; mcp() grants from define_mcp_server() are attached to the session. Credentials go in env= (for example from env()); they never reach traces or errors.`,
		Params: shared{command: "opencode", commandDoc: "The OpenCode executable.", name: "opencode", dir: "directory",
			envDoc:  "Environment variables for OpenCode (str to str): provider credentials and switches.",
			argsDoc: "Extra arguments after the ACP arguments AML supplies."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: `Fallback model, "provider/model".`},
			starlib.Param{Name: "config", Type: "dict", Default: "{}", Doc: "OpenCode configuration (JSON data)."},
			meterParam,
		),
		Returns: "an agent provider",
		Example: `coder = opencode_agent(model = "openai/gpt-5", env = {"OPENAI_API_KEY": env("OPENAI_API_KEY")})`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "directory", c.Str("model"))
		if err != nil {
			return nil, err
		}
		config, err := c.JSON("config")
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := opencode.New(opencode.Options{Base: b, Config: config})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "codex_agent",
		Group: "providers",
		Doc: `Returns the Codex agent provider: the Codex ACP adapter (codex-acp, from @agentclientprotocol/codex-acp) over AML's ACP session engine.

Each session gets private Codex state (CODEX_HOME, sqlite, logs) in a directory removed afterwards. config= is the base Codex configuration, passed as CODEX_CONFIG with model (agent(model=), else model=), model_reasoning_effort and developer_instructions (the AML system text) written by AML. Filesystem "read-write" starts Codex in agent-full-access mode, "read-only" in read-only mode; shell and network have no Codex mapping (the sandbox is the boundary). Staged skills are discovered natively. api_key= (or CODEX_API_KEY / OPENAI_API_KEY in env=) selects API-key authentication. Starlark tools and structured results reach Codex through the AML tool bridge. Credentials never reach traces or errors.`,
		Params: shared{command: "codex-acp", commandDoc: "The Codex ACP adapter executable.", name: "codex",
			envDoc: "Environment variables for the adapter (str to str).", argsDoc: "Arguments appended literally."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model."},
			starlib.Param{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "OpenAI API key (CODEX_API_KEY); prefer env()."},
			starlib.Param{Name: "config", Type: "dict", Default: "{}", Doc: "Base Codex configuration (JSON data)."},
			meterParam,
			starlib.Param{Name: "codex_path", Type: "str", Default: `"codex"`, Doc: "The Codex executable the adapter runs (CODEX_PATH)."},
			starlib.Param{Name: "reasoning_effort", Type: "str | None", Default: "None", Doc: "Codex model_reasoning_effort."},
		),
		Returns: "an agent provider",
		Example: `coder = codex_agent(model = "gpt-5-codex", api_key = env("OPENAI_API_KEY"))`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"), "codex_path")
		if err != nil {
			return nil, err
		}
		config, err := c.JSON("config")
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := codex.New(codex.Options{Base: b, CodexPath: c.Str("codex_path"), APIKey: c.Str("api_key"),
			ReasoningEffort: c.Str("reasoning_effort"), Config: config})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "copilot_agent",
		Group: "providers",
		Doc: `Returns the GitHub Copilot CLI agent provider over AML's ACP session engine.

Each session runs the Copilot CLI with args= first and then AML's own flags (ACP mode, no auto-update, private logs, no custom instructions, no built-in MCP servers, no interactive questions or login, no remote, --model, --reasoning-effort and the permission flags), so args= cannot override them. COPILOT_HOME and HOME are a private state directory. The GitHub token is read by Copilot from the first of COPILOT_GITHUB_TOKEN, GH_TOKEN and GITHUB_TOKEN set in env= (or, on the host, in the environment): only the variable's name is passed. Filesystem "read-only" denies write and excludes edit and write; shell=False denies shell and excludes bash; network=False denies url and excludes web_fetch and web_search. Starlark tools and structured results reach Copilot through the AML tool bridge (named "<prefix>-<tool>" for the model).`,
		Params: shared{command: "copilot", commandDoc: "The Copilot CLI executable.", name: "copilot",
			envDoc: "Environment variables (the GitHub token) for Copilot (str to str).", argsDoc: "Arguments placed before AML's own flags."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: `"auto"`, Doc: "Fallback model."},
			starlib.Param{Name: "reasoning_effort", Type: "str | None", Default: "None", Doc: "Passed as --reasoning-effort."},
			meterParam,
		),
		Returns: "an agent provider",
		Example: `reviewer = copilot_agent(env = {"GH_TOKEN": env("GH_TOKEN")})`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"))
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := copilot.New(copilot.Options{Base: b, ReasoningEffort: c.Str("reasoning_effort")})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "glm_agent",
		Group: "providers",
		Doc: `Returns the GLM (Z.ai) agent provider: the glm-acp-agent adapter over AML's ACP session engine.

AML sets Z_AI_API_KEY (api_key=), ACP_GLM_BASE_URL (base_url=), ACP_GLM_MAX_TOKENS (max_tokens=), ACP_GLM_MODEL (agent(model=), else model=) and a private ACP_GLM_SESSION_DIR after env=, so env= cannot override them. An API key selects the z-ai-api-key authentication. The adapter's own tools cannot be disabled: shell and network permissions have no mapping, and the sandbox is the boundary. Starlark tools and structured results reach the agent through the AML tool bridge.`,
		Params: shared{command: "glm-acp-agent", commandDoc: "The adapter executable.", name: "glm",
			envDoc: "Environment variables for the adapter (str to str).", argsDoc: "Arguments appended literally."}.params(
			starlib.Param{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "Z.ai API key; prefer env()."},
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model (the adapter defaults to glm-5.3)."},
			starlib.Param{Name: "base_url", Type: "str | None", Default: "None", Doc: "API endpoint."},
			starlib.Param{Name: "max_tokens", Type: "int | None", Default: "None", Positive: true, Doc: "Completion bound (positive)."},
			meterParam,
		),
		Returns: "an agent provider",
		Example: `glm = glm_agent(api_key = env("Z_AI_API_KEY"), model = "glm-4.7")`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"))
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		opts := glm.Options{Base: b, APIKey: c.Str("api_key"), BaseURL: c.Str("base_url")}
		if n, set, err := c.Int("max_tokens"); err != nil {
			return nil, err
		} else if set {
			if n <= 0 {
				return nil, c.Errorf("max_tokens must be a positive integer, got %d", n)
			}
			opts.MaxTokens = n
		}
		p, err := glm.New(opts)
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "pi_agent",
		Group: "providers",
		Doc: `Returns the Pi coding agent provider: the pi-acp adapter (running the native pi) over AML's ACP session engine.

Every session gets a private Pi home (HOME, agent and session directories) removed afterwards; models= is written there as Pi's models.json for custom providers. The model (agent(model=), else model=) and thinking_level= are set as ACP session configuration options and must be ones pi-acp offers. With tools, structured output or MCP grants, or permissions narrower than the default, pi runs through a generated wrapper that passes --tools (read, grep, find, ls; edit and write for filesystem "read-write"; bash with shell; mcp when MCP is used). Tools, structured output and MCP servers reach Pi through the pi-mcp-adapter extension (npm install -g pi-mcp-adapter, or mcp_adapter_path=). Network has no Pi mapping: the sandbox is the boundary. pi needs Node 22.`,
		Params: shared{command: "pi-acp", commandDoc: "The pi-acp executable.", name: "pi",
			envDoc: "Environment variables (credentials) for pi-acp and pi (str to str).", argsDoc: "Extra pi-acp arguments."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: `Fallback model, as pi-acp names it ("provider/model").`},
			starlib.Param{Name: "thinking_level", Type: "str | None", Default: "None", Doc: "Pi thinking level (thought_level option)."},
			starlib.Param{Name: "models", Type: "dict | None", Default: "None", Doc: "Pi models.json content (custom providers)."},
			meterParam,
			starlib.Param{Name: "pi_command", Type: "str", Default: `"pi"`, Doc: "The native pi executable."},
			starlib.Param{Name: "mcp_adapter_path", Type: "str | None", Default: "None", Doc: "The pi-mcp-adapter extension (discovered from PATH when omitted)."},
		),
		Returns: "an agent provider",
		Example: `pi = pi_agent(model = "anthropic/claude-sonnet-4", env = {"ANTHROPIC_API_KEY": env("ANTHROPIC_API_KEY")})`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"), "pi_command")
		if err != nil {
			return nil, err
		}
		models, err := c.JSON("models")
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := pi.New(pi.Options{Base: b, PiCommand: c.Str("pi_command"), MCPAdapterPath: c.Str("mcp_adapter_path"),
			ThinkingLevel: c.Str("thinking_level"), Models: models})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "qwen_agent",
		Group: "providers",
		Doc: `Returns the Qwen Code agent provider: "qwen --acp" (from @qwen-code/qwen-code) over AML's ACP session engine, against an OpenAI-compatible model endpoint.

Each session runs with a private HOME holding Qwen Code's user settings: settings= first, then AML's own keys, which turn off managed memory, follow-up suggestions, usage statistics, telemetry and the deferred tool search (every tool, AML's tool bridge included, is offered to the model directly). The model is agent(model=), else model=; the AML system text is appended to Qwen Code's system prompt (--append-system-prompt). The endpoint is base_url=, else OPENAI_BASE_URL, else https://api.openai.com/v1, reached through AML's model gateway; the key is api_key=, else OPENAI_API_KEY. Permissions are tool exclusions (the tool is not offered): filesystem "read-only" excludes write_file, edit and notebook_edit, shell=False run_shell_command and the tools that run commands, network=False web_fetch and web_search; Qwen Code asks AML before the others run. Starlark tools, structured results and mcp() grants (stdio and streamable HTTP) reach it through session/new. Credentials never reach traces or errors.`,
		Params: shared{command: "qwen", commandDoc: "The Qwen Code executable.", name: "qwen",
			envDoc: "Environment variables for Qwen Code (str to str).", argsDoc: "Arguments before the ACP arguments AML supplies."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model, as the endpoint names it."},
			starlib.Param{Name: "base_url", Type: "str | None", Default: "None", Doc: "The OpenAI-compatible endpoint (default: OPENAI_BASE_URL, else https://api.openai.com/v1)."},
			starlib.Param{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "The endpoint's key (OPENAI_API_KEY); prefer env()."},
			starlib.Param{Name: "reasoning_effort", Type: "str | None", Default: "None", Doc: `The model's reasoning effort: "low", "medium", "high", "xhigh" or "max" (settings model.generationConfig.reasoning).`},
			starlib.Param{Name: "settings", Type: "dict", Default: "{}", Doc: "Qwen Code user settings (JSON data), under AML's own keys."},
			meterParam,
		),
		Returns: "an agent provider",
		Example: `qwen = qwen_agent(model = "qwen3-coder-plus", base_url = "https://dashscope.aliyuncs.com/compatible-mode/v1", api_key = env("DASHSCOPE_API_KEY"))`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"), "base_url", "api_key", "reasoning_effort")
		if err != nil {
			return nil, err
		}
		settings, err := c.JSON("settings")
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := qwen.New(qwen.Options{Base: b, BaseURL: c.Str("base_url"), APIKey: c.Str("api_key"), ReasoningEffort: c.Str("reasoning_effort"), Settings: settings})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "claude_agent",
		Group: "providers",
		Doc: `Returns the Claude Code agent provider: "claude-agent-acp" (Claude Code through its ACP adapter, from @agentclientprotocol/claude-agent-acp) over AML's ACP session engine, against an Anthropic-compatible model endpoint.

Each session runs with a private CLAUDE_CONFIG_DIR and HOME holding Claude Code's user settings: settings= first, then effort= as effortLevel, then AML's own keys, which turn off prompt suggestions, automatic memory, telemetry, error reports, the auto-updater and the deferred tool search (every tool, AML's tool bridge included, is offered to the model directly), and keep the permission mode "default" (neither auto mode, whose classifier makes model calls of its own, nor bypass). The adapter names each session once, with one small model call of its own, metered like every call. The model is agent(model=), else model= (ANTHROPIC_MODEL, also for Claude Code's background work); the AML system text is appended to Claude Code's system prompt. The endpoint is base_url=, else ANTHROPIC_BASE_URL, else https://api.anthropic.com, reached through AML's model gateway; the key is api_key=, else ANTHROPIC_API_KEY. Permissions are disallowed tools (the tool is not offered): filesystem "read-only" withholds Write, Edit, MultiEdit, NotebookEdit and the worktree tools, shell=False Bash and the tools that run or watch commands, network=False WebFetch and WebSearch; Claude Code asks AML before the others run. Starlark tools, structured results and mcp() grants (stdio and streamable HTTP) reach it through session/new. Credentials never reach traces or errors.`,
		Params: shared{command: "claude-agent-acp", commandDoc: "The Claude Code ACP adapter executable.", name: "claude",
			envDoc: "Environment variables for Claude Code (str to str).", argsDoc: "Arguments of the adapter."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model, as the endpoint names it."},
			starlib.Param{Name: "base_url", Type: "str | None", Default: "None", Doc: "The Anthropic-compatible endpoint (default: ANTHROPIC_BASE_URL, else https://api.anthropic.com)."},
			starlib.Param{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "The endpoint's key (ANTHROPIC_API_KEY); prefer env()."},
			starlib.Param{Name: "effort", Type: "str | None", Default: "None", Doc: `Claude Code's effort level: "low", "medium", "high", "xhigh" or "max" (for models that take one).`},
			starlib.Param{Name: "settings", Type: "dict", Default: "{}", Doc: "Claude Code user settings (JSON data), under AML's own keys."},
			meterParam,
		),
		Returns: "an agent provider",
		Example: `claude = claude_agent(model = "claude-sonnet-4-5", api_key = env("ANTHROPIC_API_KEY"), effort = "high")`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"), "base_url", "api_key", "effort")
		if err != nil {
			return nil, err
		}
		settings, err := c.JSON("settings")
		if err != nil {
			return nil, err
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := claude.New(claude.Options{Base: b, BaseURL: c.Str("base_url"), APIKey: c.Str("api_key"), Effort: c.Str("effort"), Settings: settings})
		return provider(c, p, err)
	}},
	{starlib.Builtin{
		Name:  "gemini_agent",
		Group: "providers",
		Doc: `Returns the Gemini CLI agent provider: "gemini --acp" (from @google/gemini-cli) over AML's ACP session engine, against a Gemini API endpoint.

Each session runs with a private GEMINI_CLI_HOME holding Gemini CLI's user settings: settings= first, then AML's own keys, which select API-key authentication, turn off usage statistics, the auto-updater, loop detection and the next-speaker check, and exclude the tools the permissions withhold. The model is agent(model=), else model= (without one, Gemini CLI's "auto" routing chooses, with a classifier call of its own); the AML system text is the user context file GEMINI.md there, which Gemini CLI appends to its system instruction. thinking_budget= sets the model's thinking budget. The working directory is trusted, so that mcp() grants reach it. The endpoint is base_url=, else GOOGLE_GEMINI_BASE_URL, else https://generativelanguage.googleapis.com, reached through AML's model gateway; the key is api_key=, else GEMINI_API_KEY. Permissions are tool exclusions (the tool is not offered): filesystem "read-only" excludes write_file and replace, shell=False run_shell_command and its background-process tools, network=False web_fetch and google_web_search; Gemini CLI asks AML before the others run. Starlark tools, structured results and mcp() grants (stdio and streamable HTTP) reach it through session/new. Credentials never reach traces or errors.`,
		Params: shared{command: "gemini", commandDoc: "The Gemini CLI executable.", name: "gemini",
			envDoc: "Environment variables for Gemini CLI (str to str).", argsDoc: "Arguments before the ACP arguments AML supplies."}.params(
			starlib.Param{Name: "model", Type: "str | None", Default: "None", Doc: "Fallback model, as the endpoint names it."},
			starlib.Param{Name: "base_url", Type: "str | None", Default: "None", Doc: "The Gemini API endpoint (default: GOOGLE_GEMINI_BASE_URL, else https://generativelanguage.googleapis.com)."},
			starlib.Param{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "The endpoint's key (GEMINI_API_KEY); prefer env()."},
			starlib.Param{Name: "thinking_budget", Type: "int | None", Default: "None", Doc: "The model's thinking budget in tokens (needs a model)."},
			starlib.Param{Name: "settings", Type: "dict", Default: "{}", Doc: "Gemini CLI user settings (JSON data), under AML's own keys."},
			meterParam,
		),
		Returns: "an agent provider",
		Example: `gemini = gemini_agent(model = "gemini-2.5-pro", api_key = env("GEMINI_API_KEY"))`,
	}, func(o Options, c *starlib.Call) (starlark.Value, error) {
		b, err := base(o, c, "working_directory", c.Str("model"), "base_url", "api_key")
		if err != nil {
			return nil, err
		}
		settings, err := c.JSON("settings")
		if err != nil {
			return nil, err
		}
		budget, set, err := c.Int("thinking_budget")
		if err != nil {
			return nil, err
		}
		if set && (budget <= 0 || budget > 1<<30) {
			return nil, c.Errorf("thinking_budget must be a positive number of tokens, got %d", budget)
		}
		b.NoMeter = !c.Bool("meter", true)
		p, err := gemini.New(gemini.Options{Base: b, BaseURL: c.Str("base_url"), APIKey: c.Str("api_key"), ThinkingBudget: int(budget), Settings: settings})
		return provider(c, p, err)
	}},
}
