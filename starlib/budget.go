package starlib

import (
	"fmt"
	"math"
	"time"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
)

// budgetKeys are the keys of a budget dict: configure(budget=),
// agent(budget=) and the keyword parameters of budget().
var budgetKeys = []Key{
	{Name: "tokens", Type: "int", Doc: "Input and output tokens together."},
	{Name: "cost_usd", Type: "int | float", Doc: "Cost in US dollars, from the agents' reports or configure(prices=)."},
	{Name: "model_calls", Type: "int", Doc: "Model calls (an agent turn counts as one unless its usage report says how many it made)."},
	{Name: "tool_calls", Type: "int", Doc: "Calls of define_tool() tools."},
	{Name: "wall_s", Type: "int | float", Doc: "Elapsed seconds."},
	{Name: "on_exceed", Type: "str", Enum: []string{"fail", "ask"}, Doc: `The run's budget only: "fail" (the default) fails the run when a budget runs out; "ask" asks for a new limit (question "budget"; a journaled run suspends until aml resume RUN --answer budget=AMOUNT).`},
}

// usageKeys are the keys of deterministic_agent(usage=) dicts.
var usageKeys = []Key{
	{Name: "input_tokens", Type: "int", Doc: "Input tokens, cached ones included."},
	{Name: "output_tokens", Type: "int", Doc: "Output tokens, reasoning included."},
	{Name: "cached_input_tokens", Type: "int", Doc: "The part of the input read from a cache."},
	{Name: "reasoning_tokens", Type: "int", Doc: "The part of the output spent on reasoning."},
	{Name: "model_calls", Type: "int", Doc: "Model calls the session made (default: one per turn)."},
	{Name: "cost_usd", Type: "int | float", Doc: "What the session cost, in US dollars (then no price is needed)."},
}

// priceKeys are the keys of one model's entry in configure(prices=).
var priceKeys = []Key{
	{Name: "input", Type: "int | float", Doc: "US dollars per million input tokens."},
	{Name: "output", Type: "int | float", Doc: "US dollars per million output tokens."},
	{Name: "cached_input", Type: "int | float", Doc: "US dollars per million cached input tokens (default: input)."},
}

// number reads a non-negative finite int or float.
func number(what string, v starlark.Value) (float64, error) {
	var f float64
	switch v := v.(type) {
	case starlark.Int:
		n, ok := v.Int64()
		if !ok {
			return 0, fmt.Errorf("%s is out of range", what)
		}
		f = float64(n)
	case starlark.Float:
		f = float64(v)
	default:
		return 0, fmt.Errorf("%s must be a number, got %s", what, v.Type())
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s must be a non-negative number, got %s", what, v.String())
	}
	return f, nil
}

// count reads a non-negative int.
func count(what string, v starlark.Value) (int64, error) {
	i, ok := v.(starlark.Int)
	if !ok {
		return 0, fmt.Errorf("%s must be an int, got %s", what, v.Type())
	}
	n, ok := i.Int64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %s", what, v.String())
	}
	return n, nil
}

// keyNames lists the names of keys.
func keyNames(keys []Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	return out
}

// unknownKey is the error of a key a dict does not take, with the nearest
// valid one.
func unknownKey(what, key string, keys []Key) error {
	names := keyNames(keys)
	msg := fmt.Sprintf("unknown %s key %q", what, key)
	if s := nearestName(key, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return fmt.Errorf("%s; valid keys are %s", msg, joinNames(names))
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// budgetFrom reads a budget from named values (a dict's items, or the
// keyword arguments of budget()); what names the dict in errors.
func budgetFrom(what string, items []starlark.Tuple) (eval.Budget, error) {
	var b eval.Budget
	for _, item := range items {
		k, ok := item[0].(starlark.String)
		if !ok {
			return b, fmt.Errorf("%s keys must be strings, got %s", what, item[0].Type())
		}
		name := fmt.Sprintf("%s[%q]", what, string(k))
		var err error
		switch string(k) {
		case "tokens":
			b.Tokens, err = count(name, item[1])
		case "model_calls":
			b.ModelCalls, err = count(name, item[1])
		case "tool_calls":
			b.ToolCalls, err = count(name, item[1])
		case "cost_usd":
			b.CostUSD, err = number(name, item[1])
		case "wall_s":
			var s float64
			if s, err = number(name, item[1]); err == nil {
				if s > float64(math.MaxInt64)/float64(time.Second) {
					err = fmt.Errorf("%s is out of range", name)
				}
				b.Wall = time.Duration(s * float64(time.Second))
			}
		case "on_exceed":
			v, ok := item[1].(starlark.String)
			switch {
			case !ok:
				err = fmt.Errorf("%s must be \"fail\" or \"ask\", got %s", name, item[1].Type())
			case v != "fail" && v != "ask":
				err = fmt.Errorf("%s must be \"fail\" or \"ask\", got %q", name, string(v))
			default:
				b.OnExceed = string(v)
			}
		default:
			err = unknownKey(what, string(k), budgetKeys)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// scopeBudget reads the budget of a budget() or an agent(budget=), which
// cannot ask for more: only the run's budget can.
func scopeBudget(what string, items []starlark.Tuple) (eval.Budget, error) {
	b, err := budgetFrom(what, items)
	if err == nil && b.OnExceed == "ask" {
		err = fmt.Errorf("%s: on_exceed = \"ask\" is for the run's budget only (configure(budget = {...})); a budget() or an agent's budget fails when it runs out", what)
	}
	return b, err
}

// budgetDict reads a budget dict: the run's (configure()), or with scope
// set an agent's.
func budgetDict(what string, v starlark.Value, scope bool) (*eval.Budget, error) {
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("%s must be a dict such as {\"tokens\": 100000, \"cost_usd\": 2}, got %s", what, v.Type())
	}
	read := budgetFrom
	if scope {
		read = scopeBudget
	}
	b, err := read(what, d.Items())
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// pricesDict reads configure(prices=): {"MODEL": {"input": ..., "output":
// ..., "cached_input": ...}}.
func pricesDict(v starlark.Value) (map[string]eval.Price, error) {
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("prices must be a dict of models, such as {\"gpt-5\": {\"input\": 1.25, \"output\": 10}}, got %s", v.Type())
	}
	out := make(map[string]eval.Price, d.Len())
	for _, item := range d.Items() {
		model, ok := item[0].(starlark.String)
		if !ok || model == "" {
			return nil, fmt.Errorf("prices keys must be model names, got %s", item[0].String())
		}
		entry, ok := item[1].(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("prices[%q] must be a dict {\"input\": ..., \"output\": ...} (US dollars per million tokens), got %s", string(model), item[1].Type())
		}
		var p eval.Price
		seen := map[string]bool{}
		for _, kv := range entry.Items() {
			k, _ := kv[0].(starlark.String)
			name := fmt.Sprintf("prices[%q][%q]", string(model), string(k))
			f, err := number(name, kv[1])
			switch string(k) {
			case "input":
				p.Input = f
			case "output":
				p.Output = f
			case "cached_input":
				p.CachedInput = f
			default:
				err = unknownKey(fmt.Sprintf("prices[%q]", string(model)), string(k), priceKeys)
			}
			if err != nil {
				return nil, err
			}
			seen[string(k)] = true
		}
		for _, req := range []string{"input", "output"} {
			if !seen[req] {
				return nil, fmt.Errorf("prices[%q] has no %q: give both \"input\" and \"output\" (US dollars per million tokens)", string(model), req)
			}
		}
		out[string(model)] = p
	}
	return out, nil
}

// usageDict reads a deterministic_agent usage dict; cost says whether it
// gave cost_usd.
func usageDict(what string, v starlark.Value) (u eval.Usage, cost bool, err error) {
	d, ok := v.(*starlark.Dict)
	if !ok {
		return u, false, fmt.Errorf("%s must be a dict such as {\"input_tokens\": 100, \"output_tokens\": 50}, got %s", what, v.Type())
	}
	for _, item := range d.Items() {
		k, ok := item[0].(starlark.String)
		if !ok {
			return u, false, fmt.Errorf("%s keys must be strings, got %s", what, item[0].Type())
		}
		name := fmt.Sprintf("%s[%q]", what, string(k))
		switch string(k) {
		case "input_tokens":
			u.InputTokens, err = count(name, item[1])
		case "output_tokens":
			u.OutputTokens, err = count(name, item[1])
		case "cached_input_tokens":
			u.CachedInputTokens, err = count(name, item[1])
		case "reasoning_tokens":
			u.ReasoningTokens, err = count(name, item[1])
		case "model_calls":
			u.ModelCalls, err = count(name, item[1])
		case "cost_usd":
			u.CostUSD, err = number(name, item[1])
			cost = true
		default:
			err = unknownKey(what, string(k), usageKeys)
		}
		if err != nil {
			return u, false, err
		}
	}
	if u.CachedInputTokens > u.InputTokens {
		return u, false, fmt.Errorf("%s: cached_input_tokens (%d) is part of input_tokens (%d) and cannot exceed it", what, u.CachedInputTokens, u.InputTokens)
	}
	if u.ReasoningTokens > u.OutputTokens {
		return u, false, fmt.Errorf("%s: reasoning_tokens (%d) is part of output_tokens (%d) and cannot exceed it", what, u.ReasoningTokens, u.OutputTokens)
	}
	return u, cost, nil
}

var budgetBuiltin = &Builtin{
	Name:   "budget",
	Static: true,
	Group:  "nodes",
	Doc: `Bounds what its children spend: tokens, cost, model calls, tool calls and elapsed time.

Every agent session and tool call inside counts toward this budget and toward the budgets around it (agent(budget=), other budget() scopes, configure(budget=) and the --max-* flags). A model call is refused once a budget has nothing left, and a session whose turn crosses a budget fails; the run then fails with a budget error (exit code 5, --json code AML_BUDGET_EXCEEDED). Its children are evaluated like one parallel() branch.`,
	Params: []Param{
		childrenParam,
		{Name: "tokens", Type: "int | None", Default: "None", NonNegative: true, Doc: "Input and output tokens together."},
		{Name: "cost_usd", Type: "int | float | None", Default: "None", Doc: "Cost in US dollars (from the agents' reports or configure(prices=))."},
		{Name: "model_calls", Type: "int | None", Default: "None", NonNegative: true, Doc: "Model calls."},
		{Name: "tool_calls", Type: "int | None", Default: "None", NonNegative: true, Doc: "Calls of define_tool() tools."},
		{Name: "wall_s", Type: "int | float | None", Default: "None", Doc: "Elapsed seconds."},
	},
	Returns: "a budget node",
	Example: `budget(parallel([agent("Review " + f) for f in files]), cost_usd = 2)`,
	Impl: func(c *Call) (starlark.Value, error) {
		kids, err := c.Children()
		if err != nil {
			return nil, err
		}
		var items []starlark.Tuple
		for _, k := range budgetKeys {
			if k.Name == "on_exceed" {
				continue // the run's budget only: not a parameter
			}
			if v := c.Value(k.Name); v != nil && v != starlark.None {
				items = append(items, starlark.Tuple{starlark.String(k.Name), v})
			}
		}
		b, err := scopeBudget("budget", items)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		if b.IsZero() {
			return nil, c.Errorf("budget() bounds nothing: give at least one of %s (0 is no bound)", joinNames(eval.BudgetKeys))
		}
		return nodeValue(&eval.BudgetScope{Children: kids, Budget: b, Position: c.pos}), nil
	},
}

// retryKeys are the keys of configure(rate_limit_retry=).
var retryKeys = []Key{
	{Name: "attempts", Type: "int", Doc: "Tries of one model call (at the gateway) or one unmetered session, the first included; 1 turns retries off (default 5)."},
	{Name: "max_wait_s", Type: "int | float", Doc: "Seconds one call or session may spend waiting between tries (default 120)."},
}

// retryDict reads configure(rate_limit_retry=).
func retryDict(v starlark.Value) (*eval.RateLimitRetry, error) {
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("rate_limit_retry must be a dict such as {\"attempts\": 5, \"max_wait_s\": 120}, got %s", v.Type())
	}
	var r eval.RateLimitRetry
	for _, kv := range d.Items() {
		k, _ := kv[0].(starlark.String)
		name := fmt.Sprintf("rate_limit_retry[%q]", string(k))
		switch k {
		case "attempts":
			n, err := count(name, kv[1])
			if err != nil {
				return nil, err
			}
			if n < 1 {
				return nil, fmt.Errorf("%s must be at least 1 (1 turns retries off), got %d", name, n)
			}
			r.Attempts = int(min(n, 1000))
		case "max_wait_s":
			f, err := number(name, kv[1])
			if err != nil {
				return nil, err
			}
			if f == 0 {
				r.Attempts = 1 // no waiting is no retry
				r.MaxWait = time.Nanosecond
				continue
			}
			r.MaxWait = time.Duration(min(f, 1e9) * float64(time.Second))
		default:
			return nil, unknownKey("rate_limit_retry", kv[0].String(), retryKeys)
		}
	}
	w := r.WithDefaults()
	return &w, nil
}

// rateLimitKeys are the keys of one upstream's entry in
// configure(rate_limits=).
var rateLimitKeys = []Key{
	{Name: "concurrent", Type: "int", Doc: "Calls at once."},
	{Name: "rpm", Type: "int", Doc: "Calls started in any minute."},
	{Name: "tpm", Type: "int", Doc: "Tokens spent in any minute."},
}

// rateLimitsDict reads configure(rate_limits=): {"UPSTREAM": {"concurrent":
// N, "rpm": N, "tpm": N}}, UPSTREAM a host or a base URL.
func rateLimitsDict(v starlark.Value) (map[string]gateway.Limit, error) {
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("rate_limits must be a dict of upstreams, such as {\"api.openai.com\": {\"concurrent\": 4, \"rpm\": 500}}, got %s", v.Type())
	}
	out := make(map[string]gateway.Limit, d.Len())
	for _, item := range d.Items() {
		up, ok := item[0].(starlark.String)
		if !ok || up == "" {
			return nil, fmt.Errorf("rate_limits keys must be upstream hosts or base URLs, got %s", item[0].String())
		}
		entry, ok := item[1].(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("rate_limits[%q] must be a dict {\"concurrent\": N, \"rpm\": N, \"tpm\": N}, got %s", string(up), item[1].Type())
		}
		var l gateway.Limit
		for _, kv := range entry.Items() {
			k, _ := kv[0].(starlark.String)
			name := fmt.Sprintf("rate_limits[%q][%q]", string(up), string(k))
			n, err := count(name, kv[1])
			switch {
			case err != nil && (k == "concurrent" || k == "rpm" || k == "tpm"):
				return nil, err
			case k == "concurrent":
				l.Concurrent = int(min(n, 1<<30))
			case k == "rpm":
				l.RPM = int(min(n, 1<<30))
			case k == "tpm":
				l.TPM = n
			default:
				return nil, unknownKey(fmt.Sprintf("rate_limits[%q]", string(up)), string(k), rateLimitKeys)
			}
		}
		out[string(up)] = l
	}
	return out, nil
}
