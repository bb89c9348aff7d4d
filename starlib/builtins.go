package starlib

import (
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/stdlib"
)

// childrenOnly implements a builtin whose node takes only its children.
func childrenOnly(build func(kids []any, pos eval.Position) eval.Node) func(*Call) (starlark.Value, error) {
	return func(c *Call) (starlark.Value, error) {
		kids, err := c.Children()
		if err != nil {
			return nil, err
		}
		return nodeValue(build(kids, c.pos)), nil
	}
}

var childrenParam = Param{Name: "children", Type: "renderable", Variadic: true,
	Doc: "Content in authored order: strings, numbers, None/booleans (nothing), lists (flattened) and AML nodes."}

var agentBuiltin = &Builtin{
	Name:   "agent",
	Static: true,
	Group:  "nodes",
	Doc: `Runs one provider session after its children resolved.

The children form the initial prompt (trimmed); system() children extend the system prompt and follow_up() children add later turns of the same session. Child agents run first and their results take their authored position in the prompt. The node's result is the provider's final text. Text is concatenated without separators; use block() for blank-line separation.`,
	Params: []Param{
		childrenParam,
		{Name: "provider", Type: "agent_provider | None", Default: "None", Doc: "Provider for this agent; None uses configure(agent_provider=) or the runtime default."},
		{Name: "model", Type: "str | None", Default: "None", Doc: "Provider-owned model identifier, passed through."},
		{Name: "system", Type: "str | None", Default: "None", Doc: "Fixed system text placed after the runtime system text and before system() children."},
		{Name: "name", Type: "str | None", Default: "None", Doc: "Diagnostic name for traces and errors; never sent to the provider."},
		{Name: "schema", Type: "dict | None", Default: "None", Keys: schemaKeys, OpenKeys: true, Doc: "JSON Schema of a structured result: the provider's structured value is validated and the agent renders it as canonical JSON (sorted keys). Use evaluate(node, schema=S) instead to receive the value in Starlark; one agent has one schema owner."},
		{Name: "timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", OmitFor: "no timeout", Doc: "Positive bound in milliseconds on the provider session, counted once it holds a scheduler slot."},
		{Name: "cwd", Type: "str | None", Default: "None", Doc: "Agent-local working directory inside the enclosing sandbox(); requires one."},
		{Name: "permissions", Type: "dict | None", Default: "None", Keys: permissionKeys, Doc: `Requested native controls: {"filesystem": "read-only"|"read-write", "network": bool, "shell": bool}; omitted keys keep read-write, True, True.`},
		{Name: "budget", Type: "dict | None", Default: "None", Keys: budgetKeys, Doc: `What this one session may spend: {"tokens": N, "cost_usd": X, "model_calls": N, "tool_calls": N, "wall_s": N} (any of them); it counts toward the budgets around it.`},
	},
	Returns: "an agent node",
	Example: `agent("Review the change.", system("Be concise."), provider = echo)`,
	Impl:    agentImpl,
}

func agentImpl(c *Call) (starlark.Value, error) {
	kids, err := c.Children()
	if err != nil {
		return nil, err
	}
	n := &eval.Agent{Children: kids, Model: c.Str("model"), System: c.Str("system"), Cwd: c.Str("cwd"), Position: c.pos}
	if v := c.Value("schema"); v != nil {
		s, err := compileSchema(v)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		n.Schema = s
	}
	if p, ok := c.Value("provider").(*AgentProviderValue); ok {
		n.Provider = p.Provider
	}
	if c.Has("name") {
		name := c.Str("name")
		if name == "" || strings.TrimSpace(name) != name {
			return nil, c.Errorf("name must be a non-empty string without surrounding whitespace, got %q", name)
		}
		n.Name = name
	}
	if c.Has("model") && strings.TrimSpace(n.Model) == "" {
		return nil, c.Errorf("model must be a non-empty string; omit it to use the provider default")
	}
	if ms, set, err := c.Int("timeout_ms"); err != nil {
		return nil, err
	} else if set {
		n.TimeoutMS = ms // positive: the catalog checked it
	}
	if c.Has("cwd") && n.Cwd == "" {
		return nil, c.Errorf("cwd must be a non-empty relative path")
	}
	if n.Cwd != "" {
		if _, err := eval.CheckLogicalPath(n.Cwd, true); err != nil {
			return nil, c.Errorf("cwd: %v", err)
		}
	}
	if d, ok := c.Value("permissions").(*starlark.Dict); ok {
		n.Permissions = permissions(d)
	}
	if v := c.Value("budget"); v != nil && v != starlark.None {
		b, err := budgetDict("budget", v, true)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		if !b.IsZero() {
			n.Budget = b
		}
	}
	return nodeValue(n), nil
}

// schemaKeys are the usual keys of a JSON Schema dict, for completion
// and the checks of their values; others are accepted.
var schemaKeys = []Key{
	{Name: "type", Type: "str | list", Enum: []string{"object", "string", "integer", "number", "boolean", "array", "null"}, Doc: "The JSON type (or list of types) the value must have."},
	{Name: "properties", Type: "dict", Doc: "An object's schema of each property, by name."},
	{Name: "required", Type: "list", Doc: "The properties an object must have."},
	{Name: "items", Type: "dict | bool", Doc: "The schema of each element of an array."},
	{Name: "enum", Type: "list", Doc: "The values allowed, exactly."},
	{Name: "const", Type: "any", Doc: "The one value allowed."},
	{Name: "description", Type: "str", Doc: "What the value means, shown to the agent."},
	{Name: "additionalProperties", Type: "bool | dict", Doc: "Whether an object may have properties not listed, or their schema."},
	{Name: "minimum", Type: "int | float", Doc: "The smallest number allowed."},
	{Name: "maximum", Type: "int | float", Doc: "The largest number allowed."},
	{Name: "minLength", Type: "int", Doc: "The fewest characters a string may have."},
	{Name: "maxLength", Type: "int", Doc: "The most characters a string may have."},
	{Name: "minItems", Type: "int", Doc: "The fewest elements an array may have."},
	{Name: "maxItems", Type: "int", Doc: "The most elements an array may have."},
	{Name: "pattern", Type: "str", Doc: "A regular expression a string must match."},
	{Name: "format", Type: "str", Doc: `A named string format ("date-time", "email", "uri", ...).`},
	{Name: "anyOf", Type: "list", Doc: "Schemas of which the value must match at least one."},
	{Name: "oneOf", Type: "list", Doc: "Schemas of which the value must match exactly one."},
	{Name: "default", Type: "any", Doc: "The value meant when none is given (not applied by validation)."},
	{Name: "title", Type: "str", Doc: "A short name of the value."},
}

// accessValues are the strings of an access= or filesystem permission.
var accessValues = []string{string(eval.ReadOnly), string(eval.ReadWrite)}

// permissionKeys are the keys of agent(permissions=).
var permissionKeys = []Key{
	{Name: "filesystem", Type: "str", Enum: accessValues, Doc: `What the agent may do to the files of its sandbox: "read-only" or "read-write" (the default).`},
	{Name: "network", Type: "bool", Doc: "Whether the agent may reach the network (default True)."},
	{Name: "shell", Type: "bool", Doc: "Whether the agent may run commands (default True)."},
}

// permissions reads an agent(permissions=) dict, whose keys and values
// the catalog checked against permissionKeys.
func permissions(d *starlark.Dict) *eval.Permissions {
	p := eval.DefaultPermissions()
	for _, item := range d.Items() {
		k, _ := item[0].(starlark.String)
		switch string(k) {
		case "filesystem":
			v, _ := item[1].(starlark.String)
			p.Filesystem = eval.Access(v)
		case "network":
			v, _ := item[1].(starlark.Bool)
			p.Network = bool(v)
		case "shell":
			v, _ := item[1].(starlark.Bool)
			p.Shell = bool(v)
		}
	}
	return &p
}

var systemBuiltin = &Builtin{
	Name:   "system",
	Static: true,
	Group:  "nodes",
	Doc: `Adds its resolved text to the system prompt of the nearest enclosing agent().

The provider receives system text in this order: the runtime system text, the agent's system= prop, then system() children in authored order; empty fragments are omitted and the rest are trimmed and joined with newlines. Valid only inside agent(); it contributes nothing to the prompt.`,
	Params:  []Param{childrenParam},
	Returns: "a system node",
	Example: `agent(system("Report only evidence."), "Review the patch.")`,
	Impl:    childrenOnly(func(kids []any, pos eval.Position) eval.Node { return &eval.System{Children: kids, Position: pos} }),
}

var followUpBuiltin = &Builtin{
	Name:   "follow_up",
	Static: true,
	Group:  "nodes",
	Doc: `Adds one later turn to the session of the nearest enclosing agent().

Follow-ups are flat (one cannot contain another), keep authored order, and must resolve to non-empty text. Every turn counts toward max_turns_per_agent. After the first follow_up(), the agent's remaining children must be follow-ups (whitespace aside).`,
	Params:  []Param{childrenParam},
	Returns: "a follow_up node",
	Example: `agent("Draft the plan.", follow_up("Estimate the risk of each step."))`,
	Impl:    childrenOnly(func(kids []any, pos eval.Position) eval.Node { return &eval.FollowUp{Children: kids, Position: pos} }),
}

var blockBuiltin = &Builtin{
	Name:   "block",
	Static: true,
	Group:  "nodes",
	Doc: `Adds exact blank-line separation around its children, optionally as a named section.

With children it contributes "\n\n", the children, and "\n\n"; with no children (or only None/booleans) a single "\n\n". With tag= the children are wrapped in <tag>…</tag> lines; the tag is normalized to lowercase kebab-case ("Personal Data" -> personal-data) and dropped when no letters or digits remain. Children are not trimmed or escaped. multiline=True dedents direct string children (removing a leading and trailing blank line and the common indentation), for triple-quoted prompts. block() creates no scope.`,
	Params: []Param{
		childrenParam,
		{Name: "tag", Type: "str | None", Default: "None", Doc: "Section name, normalized to lowercase kebab-case."},
		{Name: "multiline", Type: "bool", Default: "False", Doc: "Dedent direct string children."},
	},
	Returns: "a block node",
	Example: `block(findings, tag = "security review")`,
	Impl: func(c *Call) (starlark.Value, error) {
		kids, err := c.Children()
		if err != nil {
			return nil, err
		}
		if c.Bool("multiline", false) {
			for i, k := range kids {
				if s, ok := k.(string); ok {
					kids[i] = stdlib.Dedent(s)
				}
			}
		}
		return nodeValue(&eval.Block{Children: kids, Tag: c.Str("tag"), Position: c.pos}), nil
	},
}

var fragmentBuiltin = &Builtin{
	Name:   "fragment",
	Static: true,
	Group:  "nodes",
	Doc: `Groups children without adding text, scope or concurrency; the same as a list.

Agent-scoped children (system(), follow_up()) inside a fragment belong to the nearest enclosing agent(). A fragment adds no depth.`,
	Params:  []Param{childrenParam},
	Returns: "a fragment node",
	Example: `fragment(system("Be concise."), "Review the change.")`,
	Impl:    childrenOnly(func(kids []any, pos eval.Position) eval.Node { return &eval.Fragment{Children: kids, Position: pos} }),
}

var parallelBuiltin = &Builtin{
	Name:   "parallel",
	Static: true,
	Group:  "nodes",
	Doc: `Evaluates independent branches concurrently and renders their text in authored order.

Each argument is one branch; lists are flattened into branches and None/booleans contribute none; a fragment stays one branch. Branches share the evaluation's limits and agent scheduler (max_concurrent_agents is the only concurrency bound). It waits for every branch; if any failed, it fails with a ParallelError listing every failed branch index and its cause. No separators are inserted: wrap branches in block() to keep them apart. Agent-scoped nodes directly in a branch do not attach to an agent around the parallel().`,
	Params:  []Param{{Name: "branches", Type: "renderable", Variadic: true, Doc: "The branches."}},
	Returns: "a parallel node",
	Example: `parallel([block(agent("Review " + k + "."), tag = k) for k in kinds])`,
	Impl:    childrenOnly(func(kids []any, pos eval.Position) eval.Node { return &eval.Parallel{Branches: kids, Position: pos} }),
}

var componentBuiltin = &Builtin{
	Name:  "component",
	Group: "components",
	Doc: `Turns a function into a lazy component.

Review = component(_review) returns a callable; Review(files = x) builds a component node without running anything. The function body runs when the evaluator descends into the node, on its own thread, so it may call evaluate() and evaluate_all() to collect nested results before deciding what to return. Arguments are frozen when the node is built.`,
	Params: []Param{
		{Name: "fn", Type: "callable", Positional: true, Doc: "The component body; it returns a renderable value."},
		{Name: "name", Type: "str | None", Default: "None", Doc: "Display name in traces and errors; defaults to the function name without leading underscores."},
	},
	Returns: "a callable component",
	Example: `Review = component(_review)`,
	Impl: func(c *Call) (starlark.Value, error) {
		fn := c.Value("fn").(starlark.Callable)
		name := c.Str("name")
		if name == "" {
			name = strings.TrimLeft(fn.Name(), "_")
			if name == "" || name == "lambda" {
				name = fn.Name()
			}
		}
		fn.Freeze()
		return &ComponentValue{fn: fn, name: name, pos: c.pos}, nil
	},
}

var evaluateBuiltin = &Builtin{
	Name:             "evaluate",
	Rules:            evaluateRules,
	OutsideComponent: "evaluate() is only available while an AML component is active; call it inside a component body (or the entry function), not at top level or in a provider callback",
	Group:            "components",
	Doc: `Resolves a value inside the current evaluation and returns its text (evaluate to collect).

Only available while a component body runs (the entry function counts). The nested value inherits the evaluation's limits, scheduler, tracing and cancellation; its resources are released before evaluate() returns.`,
	Params: []Param{
		{Name: "value", Type: "renderable", Positional: true, Doc: "The value to resolve."},
		{Name: "schema", Type: "dict | None", Default: "None", Positional: true, Keys: schemaKeys, OpenKeys: true, Doc: "JSON Schema of a structured result: the value must resolve to exactly one agent(), with no other text, and evaluate() returns its validated result as Starlark values."},
	},
	Returns: "str, or the validated value when schema is given",
	Example: `finding = evaluate(agent("Inspect the change."), schema = Finding)`,
	Impl: func(c *Call) (starlark.Value, error) {
		cc := componentOf(c.thread)
		if cc == nil {
			return nil, c.outsideComponent()
		}
		v, s, err := evaluateArgs(c)
		if err != nil {
			return nil, err
		}
		if s != nil {
			out, err := cc.EvaluateStructured(v, s, c.pos)
			if err != nil {
				return nil, err
			}
			return fromGo(out), nil
		}
		text, err := cc.Evaluate(v)
		if err != nil {
			return nil, err
		}
		return starlark.String(text), nil
	},
}

// evaluateArgs converts evaluate()'s arguments: a renderable value and,
// when given, a valid schema (nil otherwise).
func evaluateArgs(c *Call) (any, *eval.Schema, error) {
	v, err := toRenderable(c.Value("value"), "evaluate() argument")
	if err != nil {
		return nil, nil, err
	}
	sv := c.Value("schema")
	if sv == nil {
		return v, nil, nil
	}
	s, err := compileSchema(sv)
	if err != nil {
		return nil, nil, c.Errorf("%v", err)
	}
	return v, s, nil
}

// evaluateRules are evaluate()'s checks of its arguments.
func evaluateRules(c *Call) error {
	_, _, err := evaluateArgs(c)
	return err
}

var askBuiltin = &Builtin{
	Name:             "ask",
	OutsideComponent: "ask() is only available while an AML component is active; call it inside a component body (or the entry function)",
	Group:            "components",
	Doc: `Asks a person a question and returns the answer.

Only available while a component body runs. In a run with --journal the run suspends when the question has no recorded answer: everything is released, the question and its id are printed, and aml exits with 4; answer it with aml resume RUN --journal DIR --answer ID=VALUE, and the program continues with the answer. Without a journal the question is asked on the terminal when stdin is one, and ask() fails otherwise.`,
	Params: []Param{
		{Name: "question", Type: "str", Positional: true, Doc: "The question."},
		{Name: "schema", Type: "dict | None", Default: "None", Positional: true, Keys: schemaKeys, OpenKeys: true, Doc: "JSON Schema of the answer (for example schema.boolean()); None asks for free text."},
		{Name: "id", Type: "str | None", Default: "None", Doc: "Stable name of the question for --answer; an id names one question per run (asking it again is an error). None uses the question's place in the run (its effect identity)."},
	},
	Returns: "str, or the answer as Starlark values when schema is given",
	Example: `reviewer = ask("Who should review the release notes?")`,
	Impl: func(c *Call) (starlark.Value, error) {
		return askImpl(c, "ask", c.Value("schema"))
	},
}

var approveBuiltin = &Builtin{
	Name:             "approve",
	OutsideComponent: "approve() is only available while an AML component is active; call it inside a component body (or the entry function)",
	Group:            "components",
	Doc:              `Asks a person a yes/no question and returns True or False: ask(question, schema.boolean(), id=id).`,
	Params: []Param{
		{Name: "question", Type: "str", Positional: true, Doc: "The question."},
		{Name: "id", Type: "str | None", Default: "None", Doc: "Stable name of the question for --answer; an id names one question per run (asking it again is an error). None uses the question's place in the run (its effect identity)."},
	},
	Returns: "bool",
	Example: `if not approve("Publish the release notes?", id = "publish"):
    return "not published"`,
	Impl: func(c *Call) (starlark.Value, error) {
		d := starlark.NewDict(1)
		if err := d.SetKey(starlark.String("type"), starlark.String("boolean")); err != nil {
			return nil, err
		}
		return askImpl(c, "approve", d)
	},
}

// askImpl is ask() and approve().
func askImpl(c *Call, name string, schema starlark.Value) (starlark.Value, error) {
	cc := componentOf(c.thread)
	if cc == nil {
		return nil, c.outsideComponent()
	}
	question := c.Str("question")
	if strings.TrimSpace(question) == "" {
		return nil, c.Errorf("question must be non-empty text")
	}
	var s *eval.Schema
	if schema != nil {
		var err error
		if s, err = compileSchema(schema); err != nil {
			return nil, c.Errorf("%v", err)
		}
	}
	id := ""
	if v := c.Value("id"); v != nil {
		id = c.Str("id")
		if strings.TrimSpace(id) == "" || strings.ContainsAny(id, "= \t\n") {
			return nil, c.Errorf("id must be a non-empty name without spaces or '=' (it is typed as --answer ID=VALUE), got %q", id)
		}
	}
	answer, err := cc.Ask(question, id, s, c.pos)
	if err != nil {
		return nil, err
	}
	return fromGo(answer), nil
}

var evaluateAllBuiltin = &Builtin{
	Name:             "evaluate_all",
	OutsideComponent: "evaluate_all() is only available while an AML component is active; call it inside a component body (or the entry function)",
	Group:            "components",
	Doc: `Resolves several values concurrently and returns their texts in authored order.

Like evaluate() but for a list: the values run concurrently (bounded by max_concurrent_agents), evaluate_all() waits for all of them, and fails with a ParallelError listing every failed index when any failed.`,
	Params: []Param{
		{Name: "values", Type: "list", Positional: true, Doc: "The values to resolve."},
		{Name: "schema", Type: "dict | None", Default: "None", Positional: true, Keys: schemaKeys, OpenKeys: true, Doc: "JSON Schema applied to each value as in evaluate(value, schema=S)."},
	},
	Returns: "list of str, or of validated values when schema is given",
	Example: `a, b = evaluate_all([agent("Review correctness."), agent("Review security.")])`,
	Impl: func(c *Call) (starlark.Value, error) {
		cc := componentOf(c.thread)
		if cc == nil {
			return nil, c.outsideComponent()
		}
		seq := c.Value("values").(starlark.Indexable)
		vals := make([]any, seq.Len())
		for i := range vals {
			v, err := toRenderable(seq.Index(i), "evaluate_all() value")
			if err != nil {
				// Again, for the error only: the label names the index.
				_, err = toRenderable(seq.Index(i), fmt.Sprintf("evaluate_all() value %d", i))
				return nil, err
			}
			vals[i] = v
		}
		if sv := c.Value("schema"); sv != nil {
			s, err := compileSchema(sv)
			if err != nil {
				return nil, c.Errorf("%v", err)
			}
			results, err := cc.EvaluateAllStructured(vals, s, c.pos)
			if err != nil {
				return nil, err
			}
			out := make([]starlark.Value, len(results))
			for i, r := range results {
				out[i] = fromGo(r)
			}
			return starlark.NewList(out), nil
		}
		texts, err := cc.EvaluateAll(vals, c.pos)
		if err != nil {
			return nil, err
		}
		out := make([]starlark.Value, len(texts))
		for i, t := range texts {
			out[i] = starlark.String(t)
		}
		return starlark.NewList(out), nil
	},
}

var limitParams = []Param{
	{Name: "max_agent_calls", Type: "int | None", Default: "None", NonNegative: true, Doc: "Provider-backed agent sessions per evaluation (default 32; 0 disables)."},
	{Name: "max_concurrent_agents", Type: "int | None", Default: "None", NonNegative: true, Doc: "Active agent provider calls (default 4; 0 disables)."},
	{Name: "max_depth", Type: "int | None", Default: "None", NonNegative: true, Doc: "Nested component/primitive depth; lists add none (default 16; 0 disables)."},
	{Name: "max_turns_per_agent", Type: "int | None", Default: "None", NonNegative: true, Doc: "Initial prompt plus follow-ups of one agent (default 16; 0 disables)."},
	{Name: "max_steps", Type: "int | None", Default: "None", NonNegative: true, Doc: "Starlark computation steps of one evaluation, across all its component bodies and callbacks (default 0: no limit, as in the original)."},
	{Name: "max_prompt_bytes", Type: "int | None", Default: "None", NonNegative: true, Doc: "Bytes one agent session may send: its system text, prompt and follow-ups (default 4194304, 4 MiB; 0: no limit). A larger prompt fails before the provider runs."},
}

var configureBuiltin = &Builtin{
	Name:  "configure",
	Group: "runtime",
	Doc: `Sets runtime options for this workflow: default providers, system text, allow-lists and limits.

Call it at most once, at top level of the entry file. Precedence, lowest first: built-in defaults, configure(), then CLI flags and Go options. A provider= on a node always wins for that node.`,
	Params: append([]Param{
		{Name: "agent_provider", Type: "agent_provider | None", Default: "None", Doc: "Default provider of agent() nodes without provider=."},
		{Name: "sandbox_provider", Type: "sandbox_provider | None", Default: "None", Doc: "Default provider of outer sandbox() scopes."},
		{Name: "workspace_provider", Type: "workspace_provider | None", Default: "None", Doc: "Default provider of the workspace() scope."},
		{Name: "system", Type: "str | None", Default: "None", Doc: "First system fragment of every agent."},
		{Name: "allowed_tools", Type: "list | None", Default: "None", Doc: "Exact names of tools that may be granted to agents (unrestricted when omitted)."},
		{Name: "allowed_mcp_servers", Type: "list | None", Default: "None", Doc: "Exact names of MCP servers that may be granted (unrestricted when omitted)."},
		{Name: "budget", Type: "dict | None", Default: "None", Keys: budgetKeys, Doc: `What the run may spend: {"tokens": N, "cost_usd": X, "model_calls": N, "tool_calls": N, "wall_s": N, "on_exceed": "fail" | "ask"} (any of them); the --max-tokens, --max-cost, --max-model-calls, --max-tool-calls and --max-wall flags override its keys.`},
		{Name: "prices", Type: "dict | None", Default: "None", Doc: `Model prices for cost budgets, in US dollars per million tokens: {"MODEL": {"input": 1.25, "output": 10, "cached_input": 0.125}}; --prices FILE (the same as JSON) overrides it.`},
		{Name: "rate_limits", Type: "dict | None", Default: "None", Doc: `Rate limits of model upstreams, shared by every metered session of the process: {"api.openai.com": {"concurrent": 4, "rpm": 500, "tpm": 200000}} (a host or a base URL); a call waits for room.`},
		{Name: "rate_limit_retry", Type: "dict | None", Default: "None", Keys: retryKeys, Doc: `How a model's rate limit (429, 503) is retried, once: each model call at the model gateway, or an unmetered session that a rate limit ended, run again from its start: {"attempts": 5, "max_wait_s": 120} (the defaults).`},
	}, limitParams...),
	Returns: "None",
	Example: `configure(agent_provider = deterministic_agent(), max_agent_calls = 8)`,
	Impl:    configureImpl,
}

// ConfigureNotTopLevel is the error of a configure() call that is not a
// top-level statement of the entry file.
const ConfigureNotTopLevel = "configure() is only valid at top level of the entry file; move it out of functions and loaded modules"

// ConfigureTwice is the error of a second configure() call; first is
// where the first one is.
func ConfigureTwice(first string) string {
	return fmt.Sprintf("configure() may be called only once (first call at %s); merge the options into one call", first)
}

func configureImpl(c *Call) (starlark.Value, error) {
	e := envOf(c.thread)
	chain, _ := c.thread.Local(keyModule).([]string)
	if e == nil || len(chain) != 1 || c.thread.CallStackDepth() != 2 || componentOf(c.thread) != nil {
		return nil, errors.New(ConfigureNotTopLevel)
	}
	if e.configured {
		return nil, errors.New(ConfigureTwice(e.config.Pos.String()))
	}
	cfg := Config{Pos: c.pos}
	if p, ok := c.Value("agent_provider").(*AgentProviderValue); ok {
		cfg.AgentProvider = p.Provider
	}
	if p, ok := c.Value("sandbox_provider").(*SandboxProviderValue); ok {
		cfg.SandboxProvider = p.Provider
	}
	if p, ok := c.Value("workspace_provider").(*WorkspaceProviderValue); ok {
		cfg.WorkspaceProvider = p.Provider
	}
	if c.Has("system") {
		s := c.Str("system")
		cfg.System = &s
	}
	for _, f := range []struct {
		name string
		dst  *[]string
	}{{"allowed_tools", &cfg.AllowedTools}, {"allowed_mcp_servers", &cfg.AllowedMCPServers}} {
		if v := c.Value(f.name); v != nil {
			names, err := stringList(v)
			if err != nil {
				return nil, c.Errorf("%s %v", f.name, err)
			}
			*f.dst = names
		}
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{
		{"max_agent_calls", &cfg.MaxAgentCalls},
		{"max_concurrent_agents", &cfg.MaxConcurrentAgents},
		{"max_depth", &cfg.MaxDepth},
		{"max_turns_per_agent", &cfg.MaxTurnsPerAgent},
		{"max_steps", &cfg.MaxSteps},
		{"max_prompt_bytes", &cfg.MaxPromptBytes},
	} {
		n, set, err := c.Int(f.name)
		if err != nil {
			return nil, err
		}
		if !set {
			continue
		}
		if n < 0 || n > 1<<31 {
			return nil, c.Errorf("%s must be a non-negative integer (0 disables the limit), got %d", f.name, n)
		}
		v := int(n)
		*f.dst = &v
	}
	if v := c.Value("budget"); v != nil && v != starlark.None {
		b, err := budgetDict("budget", v, false)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		cfg.Budget = b
	}
	if v := c.Value("rate_limits"); v != nil && v != starlark.None {
		l, err := rateLimitsDict(v)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		cfg.RateLimits = l
	}
	if v := c.Value("rate_limit_retry"); v != nil && v != starlark.None {
		r, err := retryDict(v)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		cfg.RateLimitRetry = r
	}
	if v := c.Value("prices"); v != nil && v != starlark.None {
		p, err := pricesDict(v)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		cfg.Prices = p
	}
	e.config = cfg
	e.configured = true
	return starlark.None, nil
}

// stringList converts a list or tuple of strings.
func stringList(v starlark.Value) ([]string, error) {
	seq, ok := v.(starlark.Indexable)
	if !ok {
		return nil, fmt.Errorf("must be a list of strings, got %s", v.Type())
	}
	out := make([]string, seq.Len())
	for i := range out {
		s, ok := seq.Index(i).(starlark.String)
		if !ok {
			return nil, fmt.Errorf("must be a list of strings, element %d is %s", i, seq.Index(i).Type())
		}
		out[i] = string(s)
	}
	return out, nil
}

var envBuiltin = &Builtin{
	Name:  "env",
	Group: "runtime",
	Doc: `Returns an environment variable, or default when it is not set.

The CLI reads .env, .env.local, .env.<mode> and .env.<mode>.local beside the workflow file first (mode is AML_ENV, else development); variables of the process win over those files, and --runtime-env-file applies last.`,
	Params: []Param{
		{Name: "name", Type: "str", Positional: true, Doc: "Variable name."},
		{Name: "default", Type: "str | None", Default: "None", Positional: true, Doc: "Value when the variable is not set."},
	},
	Returns: "str or the default",
	Example: `channel = env("RELEASE_CHANNEL", "preview")`,
	Impl: func(c *Call) (starlark.Value, error) {
		e := envOf(c.thread)
		name := c.Str("name")
		if name == "" {
			return nil, c.Errorf("name must be a non-empty string")
		}
		var (
			v   string
			set bool
		)
		if e != nil {
			v, set = e.lookupEnv(name)
			if set {
				e.addSecret(v)
			}
			r := eval.RecordedRead{Kind: "env", Name: name, Pos: c.pos, Digest: envDigest(e.opts.EnvDigestKey, v, set)}
			if cc := componentOf(c.thread); cc != nil {
				if err := cc.Read(r); err != nil {
					return nil, err
				}
			} else {
				e.mu.Lock()
				e.reads = append(e.reads, r)
				e.mu.Unlock()
			}
		}
		if set {
			return starlark.String(v), nil
		}
		if d := c.Value("default"); d != nil {
			return d, nil
		}
		return starlark.None, nil
	},
}

// ComponentValue is the Starlark value returned by component(): calling
// it builds a lazy component node.
type ComponentValue struct {
	fn   starlark.Callable
	name string
	pos  eval.Position
}

var _ starlark.Callable = (*ComponentValue)(nil)

// String implements starlark.Value.
func (v *ComponentValue) String() string { return fmt.Sprintf("<component %s>", v.name) }

// Type implements starlark.Value.
func (v *ComponentValue) Type() string { return "component" }

// Freeze implements starlark.Value; the body was frozen by component().
func (v *ComponentValue) Freeze() {}

// Truth implements starlark.Value.
func (v *ComponentValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *ComponentValue) Hash() (uint32, error) { return identityHash(v), nil }

// Name implements starlark.Callable.
func (v *ComponentValue) Name() string { return v.name }

// CallInternal builds the component node; the body does not run yet. The
// arguments are frozen because the body may run on another goroutine.
func (v *ComponentValue) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	e := envOf(thread)
	if e == nil {
		return nil, fmt.Errorf("component %s called outside an AML workflow", v.name)
	}
	args.Freeze()
	for _, kv := range kwargs {
		kv.Freeze()
	}
	pos := callerPos(thread)
	return nodeValue(&eval.Component{Name: v.name, Position: pos, Fn: e.componentBody(v.fn, args, kwargs, v.name, pos),
		Args: func() []string { return describeArgs(v.fn, args, kwargs) }}), nil
}

// argRunes is the longest an argument's description gets.
const argRunes = 40

// describeArgs describes a call of fn for eval.Component.Args: each
// argument as name=value (positional ones named after fn's parameters
// when fn is a Starlark function), the value as Starlark prints it,
// shortened to argRunes; a node is named by its type.
func describeArgs(fn starlark.Callable, args starlark.Tuple, kwargs []starlark.Tuple) []string {
	f, _ := fn.(*starlark.Function)
	out := make([]string, 0, len(args)+len(kwargs))
	short := func(v starlark.Value) string {
		s := v.String()
		if _, ok := v.(starlark.String); !ok {
			if _, ok := v.(*NodeValue); ok {
				s = v.Type()
			}
		}
		if r := []rune(s); len(r) > argRunes {
			s = string(r[:argRunes-1]) + "…"
		}
		return s
	}
	positional := 0
	if f != nil {
		positional = f.NumParams() - f.NumKwonlyParams()
		if f.HasVarargs() {
			positional--
		}
		if f.HasKwargs() {
			positional--
		}
	}
	for i, a := range args {
		if i < positional {
			name, _ := f.Param(i)
			out = append(out, name+"="+short(a))
			continue
		}
		out = append(out, short(a))
	}
	for _, kv := range kwargs {
		out = append(out, string(kv[0].(starlark.String))+"="+short(kv[1]))
	}
	return out
}
