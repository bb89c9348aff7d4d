package starlib

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

var deterministicAgentBuiltin = &Builtin{
	Name:  "deterministic_agent",
	Group: "providers",
	Doc: `Returns a credential-free agent provider that answers with a Starlark function.

respond(req) receives the resolved request: req.prompt (str), req.follow_ups (list of str), req.system (str), req.model (str or None), req.name (str or None), req.tools, req.mcp_servers, req.skills (lists of names), req.output_schema (dict or None) and req.call_index (int, zero-based per provider). It returns a string, or a dict {"text": ..., "structured": ..., "messages": [...]}. Without respond the provider echoes the initial prompt. respond runs with the component capability masked: evaluate() is not available there. Every call is recorded (see the Go API of providers/deterministic).`,
	Params: []Param{
		{Name: "respond", Type: "callable | None", Default: "None", Doc: "Function computing the response from the request."},
		{Name: "name", Type: "str", Default: `"deterministic"`, Doc: "Provider name shown in traces."},
		{Name: "supports_sandbox", Type: "bool", Default: "False", Doc: "Accept an enclosing sandbox()."},
		{Name: "usage", Type: "dict | callable | None", Default: "None", Keys: usageKeys, Doc: `What each session reports it spent, for budgets and spend offline: {"input_tokens": N, "output_tokens": N, "cached_input_tokens": N, "reasoning_tokens": N, "model_calls": N, "cost_usd": X}, or a function of the request returning such a dict.`},
	},
	Returns: "an agent provider",
	Example: `echo = deterministic_agent(respond = lambda req: "Resolved: " + req.prompt)`,
	Impl:    deterministicAgentImpl,
}

func deterministicAgentImpl(c *Call) (starlark.Value, error) {
	opts := deterministic.Options{Name: c.Str("name"), SupportsSandbox: c.Bool("supports_sandbox", false)}
	if c.Has("name") && opts.Name == "" {
		return nil, c.Errorf("name must be a non-empty string")
	}
	if fn, ok := c.Value("respond").(starlark.Callable); ok {
		e := envOf(c.thread)
		if e == nil {
			return nil, c.Errorf("called outside an AML workflow")
		}
		fn.Freeze()
		opts.Respond = respondFunc(e, fn, c.pos)
	}
	switch v := c.Value("usage").(type) {
	case *starlark.Dict:
		u, cost, err := usageDict("usage", v)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		u.CostReported = cost
		opts.Usage = func(context.Context, *eval.AgentRequest, int) (eval.Usage, error) { return u, nil }
		opts.ReportsCost = cost
	case starlark.Callable:
		e := envOf(c.thread)
		if e == nil {
			return nil, c.Errorf("called outside an AML workflow")
		}
		v.Freeze()
		opts.Usage = usageFunc(e, v, c.pos)
	}
	p, err := deterministic.New(opts)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &AgentProviderValue{Provider: p}, nil
}

// usageFunc calls a Starlark usage function on its own thread, as
// respondFunc calls respond.
func usageFunc(e *env, fn starlark.Callable, pos eval.Position) deterministic.UsageFunc {
	return func(ctx context.Context, req *eval.AgentRequest, idx int) (eval.Usage, error) {
		th, stop := e.newThread(ctx, "usage")
		defer stop()
		v, err := starlark.Call(th, fn, starlark.Tuple{requestValue(ctx, req, idx)}, nil)
		if err != nil {
			return eval.Usage{}, fromStarlark(ctx, err, pos)
		}
		u, cost, err := usageDict("the value of the usage function", v)
		if err != nil {
			return eval.Usage{}, &eval.EvaluationError{Msg: err.Error(), Pos: pos}
		}
		u.CostReported = cost
		return u, nil
	}
}

// respondFunc calls a Starlark respond function on its own thread, with
// the component capability masked.
func respondFunc(e *env, fn starlark.Callable, pos eval.Position) deterministic.RespondFunc {
	return func(ctx context.Context, req *eval.AgentRequest, idx int) (*eval.AgentResponse, error) {
		th, stop := e.newThread(ctx, "respond")
		defer stop()
		v, err := starlark.Call(th, fn, starlark.Tuple{requestValue(ctx, req, idx)}, nil)
		if err != nil {
			return nil, fromStarlark(ctx, err, pos)
		}
		resp, err := responseOf(v)
		if err != nil {
			return nil, &eval.EvaluationError{Msg: "respond " + err.Error(), Pos: pos}
		}
		return resp, nil
	}
}

// requestValue builds the frozen req struct handed to respond. Its
// call_tool(name, input) runs a granted tool the way a model's call would.
func requestValue(ctx context.Context, req *eval.AgentRequest, idx int) starlark.Value {
	strs := func(ss []string) *starlark.List {
		vs := make([]starlark.Value, len(ss))
		for i, s := range ss {
			vs[i] = starlark.String(s)
		}
		return starlark.NewList(vs)
	}
	optional := func(s string) starlark.Value {
		if s == "" {
			return starlark.None
		}
		return starlark.String(s)
	}
	var schema starlark.Value = starlark.None
	if req.Output != nil {
		schema = fromGo(req.Output.JSONSchema)
	}
	v := starlarkstruct.FromStringDict(starlark.String("request"), starlark.StringDict{
		"prompt":        starlark.String(req.Prompt),
		"follow_ups":    strs(req.FollowUps),
		"system":        starlark.String(req.System),
		"model":         optional(req.Model),
		"name":          optional(req.Name),
		"tools":         strs(toolNames(req.Tools)),
		"mcp_servers":   strs(mcpNames(req.MCPServers)),
		"call_tool":     callToolBuiltin(ctx, req.Tools),
		"skills":        strs(skillNames(req.Skills)),
		"output_schema": schema,
		"call_index":    starlark.MakeInt(idx),
	})
	v.Freeze()
	return v
}

// responseOf converts what respond returned.
func responseOf(v starlark.Value) (*eval.AgentResponse, error) {
	switch v := v.(type) {
	case starlark.String:
		return &eval.AgentResponse{Text: string(v)}, nil
	case *starlark.Dict:
		resp := &eval.AgentResponse{}
		for _, item := range v.Items() {
			k, _ := item[0].(starlark.String)
			switch string(k) {
			case "text":
				s, ok := item[1].(starlark.String)
				if !ok {
					return nil, fmt.Errorf(`returned {"text": %s}; text must be a string`, item[1].Type())
				}
				resp.Text = string(s)
			case "structured":
				g, err := toGo(item[1])
				if err != nil {
					return nil, fmt.Errorf(`returned a "structured" value that is not JSON data: %w`, err)
				}
				resp.Structured = g
			case "messages":
				msgs, err := stringList(item[1])
				if err != nil {
					return nil, fmt.Errorf(`"messages" %w`, err)
				}
				resp.Messages = msgs
			default:
				return nil, fmt.Errorf("returned a dict with unknown key %s; valid keys are text, structured, messages", item[0].String())
			}
		}
		return resp, nil
	}
	return nil, fmt.Errorf(`must return a string or a dict {"text": ..., "structured": ..., "messages": [...]}, got %s`, v.Type())
}

// toGo converts Starlark data to JSON-like Go values: map[string]any,
// []any, string, int64 or float64 for numbers, bool and nil.
func toGo(v starlark.Value) (any, error) {
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(v), nil
	case starlark.String:
		return string(v), nil
	case starlark.Int:
		if n, ok := v.Int64(); ok {
			return n, nil
		}
		return nil, fmt.Errorf("integer %s is out of range", v)
	case starlark.Float:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s is not a JSON number", v)
		}
		return f, nil
	case *starlark.Dict:
		m := make(map[string]any, v.Len())
		for _, item := range v.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("dict key %s is not a string", item[0].String())
			}
			g, err := toGo(item[1])
			if err != nil {
				return nil, err
			}
			m[string(k)] = g
		}
		return m, nil
	case starlark.Indexable:
		if _, ok := v.(starlark.String); !ok {
			out := make([]any, v.Len())
			for i := range out {
				g, err := toGo(v.Index(i))
				if err != nil {
					return nil, err
				}
				out[i] = g
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("a %s is not JSON data", v.Type())
}

// fromGo converts JSON-like Go values to frozen Starlark values.
func fromGo(g any) starlark.Value {
	var v starlark.Value
	switch g := g.(type) {
	case nil:
		v = starlark.None
	case bool:
		v = starlark.Bool(g)
	case string:
		v = starlark.String(g)
	case int64:
		v = starlark.MakeInt64(g)
	case int:
		v = starlark.MakeInt(g)
	case float64:
		if g == math.Trunc(g) && math.Abs(g) < 1<<53 {
			v = starlark.MakeInt64(int64(g))
		} else {
			v = starlark.Float(g)
		}
	case map[string]any:
		d := starlark.NewDict(len(g))
		for _, k := range sortedKeys(g) {
			_ = d.SetKey(starlark.String(k), fromGo(g[k]))
		}
		v = d
	case []any:
		vs := make([]starlark.Value, len(g))
		for i, x := range g {
			vs[i] = fromGo(x)
		}
		v = starlark.NewList(vs)
	default:
		v = starlark.String(strings.TrimSpace(fmt.Sprint(g)))
	}
	v.Freeze()
	return v
}

// sortedKeys returns the keys of a string-keyed map, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func toolNames(ts []*eval.AgentTool) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

func mcpNames(ms []eval.AgentMCPServer) []string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return names
}

// callToolBuiltin is req.call_tool(name, input): it runs a tool granted to
// the agent through the agent-facing path (input normalization included),
// as a model's tool call would, and returns the result. Omitting input
// sends no input at all.
func callToolBuiltin(ctx context.Context, tools []*eval.AgentTool) *starlark.Builtin {
	return starlark.NewBuiltin("call_tool", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name string
		var input starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "input?", &input); err != nil {
			return nil, err
		}
		for _, t := range tools {
			if t.Name != name {
				continue
			}
			var raw any = eval.NoInput
			if input != nil {
				g, err := toGo(input)
				if err != nil {
					return nil, &eval.ToolInputError{Tool: name, Msg: "input is not JSON data", Err: err}
				}
				raw = g
			}
			out, err := t.Call(ctx, raw)
			if err != nil {
				return nil, err
			}
			return fromGo(out), nil
		}
		return nil, fmt.Errorf("call_tool: no tool named %q is granted to this agent (granted: %s); grant it with tool(t) inside the agent", name, strings.Join(toolNames(tools), ", "))
	})
}

func skillNames(ss []eval.AgentSkill) []string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	return names
}

var deterministicSandboxBuiltin = &Builtin{
	Name:  "deterministic_sandbox",
	Group: "providers",
	Doc: `Returns a credential-free sandbox provider that runs nothing.

Each lease has its own in-memory filesystem; commands answer with exec(command, args) when given (a string for stdout, or a dict {"stdout": ..., "stderr": ..., "exit_code": n}), else with the command line echoed. Acquisitions, commands, writes and releases are recorded (see the Go API of providers/deterministic).`,
	Params: []Param{
		{Name: "exec", Type: "callable | None", Default: "None", Doc: "exec(command, args) computing a command's result."},
		{Name: "name", Type: "str", Default: `"deterministic-sandbox"`, Doc: "Provider name shown in traces."},
	},
	Returns: "a sandbox provider",
	Example: `configure(sandbox_provider = deterministic_sandbox())`,
	Impl: func(c *Call) (starlark.Value, error) {
		opts := deterministic.SandboxOptions{Name: c.Str("name")}
		if fn, ok := c.Value("exec").(starlark.Callable); ok {
			e := envOf(c.thread)
			if e == nil {
				return nil, c.Errorf("called outside an AML workflow")
			}
			fn.Freeze()
			pos := c.pos
			opts.Exec = func(ctx context.Context, command string, args []string, _ eval.ExecOptions) (*eval.ExecResult, error) {
				th, stop := e.newThread(ctx, "exec")
				defer stop()
				argv := make([]starlark.Value, len(args))
				for i, a := range args {
					argv[i] = starlark.String(a)
				}
				v, err := starlark.Call(th, fn, starlark.Tuple{starlark.String(command), starlark.NewList(argv)}, nil)
				if err != nil {
					return nil, fromStarlark(ctx, err, pos)
				}
				return execResultOf(v)
			}
		}
		p, err := deterministic.NewSandbox(opts)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &SandboxProviderValue{Provider: p}, nil
	},
}

// execResultOf converts what a deterministic exec function returned.
func execResultOf(v starlark.Value) (*eval.ExecResult, error) {
	switch v := v.(type) {
	case starlark.String:
		return &eval.ExecResult{Stdout: []byte(v)}, nil
	case *starlark.Dict:
		r := &eval.ExecResult{}
		for _, kv := range v.Items() {
			k, _ := kv[0].(starlark.String)
			switch string(k) {
			case "stdout", "stderr":
				s, ok := kv[1].(starlark.String)
				if !ok {
					return nil, fmt.Errorf("exec returned %s = %s; it must be a string", k, kv[1].Type())
				}
				if k == "stdout" {
					r.Stdout = []byte(s)
				} else {
					r.Stderr = []byte(s)
				}
			case "exit_code":
				n, ok := kv[1].(starlark.Int)
				code, exact := n.Int64()
				if !ok || !exact {
					return nil, fmt.Errorf("exec returned exit_code = %s; it must be an int", kv[1].String())
				}
				r.ExitCode = int(code)
			default:
				return nil, fmt.Errorf("exec returned a dict with unknown key %s; valid keys are stdout, stderr, exit_code", kv[0].String())
			}
		}
		return r, nil
	}
	return nil, fmt.Errorf(`exec must return a string or a dict {"stdout": ..., "stderr": ..., "exit_code": n}, got %s`, v.Type())
}

var deterministicWorkspaceBuiltin = &Builtin{
	Name:  "deterministic_workspace",
	Group: "providers",
	Doc: `Returns a credential-free workspace provider with an in-memory revision store.

Each acquisition materializes into a fresh temporary directory (so file() and scripts work on real files); saves snapshot it into memory for the life of the process; one writer per id. Acquisitions, saves and releases are recorded (see the Go API of providers/deterministic).`,
	Params: []Param{
		{Name: "name", Type: "str", Default: `"deterministic-workspace"`, Doc: "Provider name shown in traces."},
	},
	Returns: "a workspace provider",
	Example: `configure(workspace_provider = deterministic_workspace())`,
	// It validates and builds; it starts nothing: aml check runs it on
	// literal arguments.
	Static: true,
	Impl: func(c *Call) (starlark.Value, error) {
		p, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{Name: c.Str("name")})
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &WorkspaceProviderValue{Provider: p}, nil
	},
}
