package starlib

import (
	"go.starlark.net/starlark"
)

var withTraceSpanBuiltin = &Builtin{
	Name:             "with_trace_span",
	OutsideComponent: "with_trace_span() is only available while an AML component is active; call it inside a component body",
	Group:            "components",
	Doc: `Calls fn() inside an application trace span named name and returns its result unchanged.

Only available while a component body runs. The span sits beneath the component (or the enclosing with_trace_span), and work fn starts — evaluate(), evaluate_all(), tool calls — is traced beneath it. The span ends when fn returns or fails; only its name and timing are traced, never fn's arguments or result.`,
	Params: []Param{
		{Name: "name", Type: "str", Positional: true, Doc: "The span name."},
		{Name: "fn", Type: "callable", Positional: true, Doc: "A function called with no arguments."},
	},
	Returns: "what fn returns",
	Example: `checked = with_trace_span("review.validate", lambda: validate(findings))`,
	Impl: func(c *Call) (starlark.Value, error) {
		cc := componentOf(c.thread)
		if cc == nil {
			return nil, c.outsideComponent()
		}
		var result starlark.Value
		err := cc.TraceSpan(c.Str("name"), c.pos, func() error {
			v, err := starlark.Call(c.thread, c.Value("fn"), nil, nil)
			result = v
			return err
		})
		if err != nil {
			return nil, err
		}
		return result, nil
	},
}
