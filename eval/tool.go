package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Tool is an application-owned capability that runs in the host process.
// Component code may call it directly; tool() grants it to one agent so
// the model may call it. A Tool is immutable and safe for concurrent use.
type Tool struct {
	name        string
	description string
	input       *Schema
	output      *Schema
	execute     func(ctx context.Context, input any) (any, error)
	pos         Position
}

// ToolOptions define a tool.
type ToolOptions struct {
	// Name is the tool's exact name: non-empty, without surrounding
	// whitespace; unique within one agent and the key of allow-lists.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Input validates input; nil accepts any JSON object.
	Input *Schema
	// Output, when set, validates the result.
	Output *Schema
	// Execute runs the tool. input is the validated input value (a
	// map[string]any for the usual object schema); the result must be a
	// string or JSON-like data. ctx is cancelled with the evaluation.
	Execute func(ctx context.Context, input any) (any, error)
	// Position is where the tool was defined.
	Position Position
}

// anyObject is the input schema of a tool defined without one, made on
// first use: compiling a schema is work every start of a program that
// links eval would otherwise pay.
var anyObject = sync.OnceValue(func() *Schema {
	s, err := NewSchema(map[string]any{"type": "object"})
	if err != nil {
		panic(err)
	}
	return s
})

// NewTool validates a tool definition.
func NewTool(o ToolOptions) (*Tool, error) {
	switch {
	case o.Name == "" || strings.TrimSpace(o.Name) != o.Name:
		return nil, fmt.Errorf("tool name must be non-empty and without surrounding whitespace, got %q", o.Name)
	case strings.TrimSpace(o.Description) == "" || strings.TrimSpace(o.Description) != o.Description:
		return nil, fmt.Errorf("tool %q: description must be non-empty and without surrounding whitespace", o.Name)
	case o.Execute == nil:
		return nil, fmt.Errorf("tool %q: execute is required", o.Name)
	}
	in := o.Input
	if in == nil {
		in = anyObject()
	}
	return &Tool{name: o.Name, description: o.Description, input: in, output: o.Output, execute: o.Execute, pos: o.Position}, nil
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.name }

// Description returns the tool's description.
func (t *Tool) Description() string { return t.description }

// InputSchema returns the input schema.
func (t *Tool) InputSchema() *Schema { return t.input }

// OutputSchema returns the output schema, or nil.
func (t *Tool) OutputSchema() *Schema { return t.output }

// Pos returns where the tool was defined.
func (t *Tool) Pos() Position { return t.pos }

// NoInput stands for tool input the caller omitted entirely, as opposed
// to an explicit JSON null.
var NoInput any = noInput{}

type noInput struct{}

// normalizeInput applies the transport input rules shared by every call
// path: a value the schema accepts is kept as is; omitted input becomes {}
// only when {} is accepted; a string the schema rejects is parsed as JSON
// exactly once and kept only if the decoded value is accepted; anything
// else is a ToolInputError and the tool does not run.
func (t *Tool) normalizeInput(raw any) (any, error) {
	if _, omitted := raw.(noInput); omitted {
		empty := map[string]any{}
		if t.input.Validate(empty) == nil {
			return empty, nil
		}
		return nil, &ToolInputError{Tool: t.name, Msg: "input is required: the input schema does not accept an empty object", Err: t.input.Validate(empty)}
	}
	v, err := snapshot(raw)
	if err != nil {
		return nil, &ToolInputError{Tool: t.name, Msg: "input is not JSON data", Err: err}
	}
	verr := t.input.Validate(v)
	if verr == nil {
		return v, nil
	}
	if s, ok := v.(string); ok {
		var decoded any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&decoded); err == nil && !dec.More() {
			decoded = normalizeNumbers(decoded)
			if t.input.Validate(decoded) == nil {
				return decoded, nil
			}
		}
	}
	return nil, &ToolInputError{Tool: t.name, Msg: "input does not match the input schema", Err: verr}
}

// finishOutput checks and snapshots a tool result.
func (t *Tool) finishOutput(out any) (any, error) {
	v, err := snapshot(out)
	if err != nil {
		return nil, &ToolOutputError{Tool: t.name, Msg: "result is not a string or JSON data", Err: err}
	}
	if t.output != nil {
		if err := t.output.Validate(v); err != nil {
			return nil, &ToolOutputError{Tool: t.name, Msg: "result does not match the output schema", Err: err}
		}
	}
	return v, nil
}

// snapshot deep-copies JSON-like data so that neither side of a boundary
// can change what the other received. Integers stay int64.
func snapshot(v any) (any, error) {
	if err := checkJSONValue(v, 0); err != nil {
		return nil, err
	}
	return copyJSON(v), nil
}

func copyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = copyJSON(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = copyJSON(e)
		}
		return s
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case json.Number:
		return numberValue(x)
	}
	return v
}

// normalizeNumbers turns json.Number values into int64 or float64.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case json.Number:
		return numberValue(x)
	}
	return v
}

func numberValue(n json.Number) any {
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, _ := n.Float64()
	return f
}

// invoke runs one tool call through the shared path: input
// normalization, execution, output checks, tracing. via is "component" or
// "agent".
func (d *domain) invoke(ctx context.Context, t *Tool, raw any, parentSpan string, via string) (any, error) {
	var content attrs
	if d.trace.captures() {
		if s, err := CanonicalJSON(raw); err == nil {
			content = attrs{"input", s}
		}
	}
	if be := d.spendOf(ctx).reserveTool(); be != nil {
		return nil, budgetStop(t.pos, be)
	}
	sp := d.trace.startSpan(parentSpan, "tool", t.name, t.pos, attrs{"tool.caller", via}, content)
	out, err := d.runTool(ctx, t, raw)
	var endContent attrs
	if err == nil && d.trace.captures() {
		if s, e := CanonicalJSON(out); e == nil {
			endContent = attrs{"output", s}
		}
	}
	sp.end(err, nil, endContent)
	return out, err
}

func (d *domain) runTool(ctx context.Context, t *Tool, raw any) (out any, err error) {
	return t.Run(ctx, raw)
}

// Run runs the tool outside an evaluation, as a model's call runs it: raw
// is the transport input (JSON-like data, a JSON string, or NoInput); it
// is normalized and validated, the tool executes, and its result is
// checked against the output schema. Errors are *ToolInputError,
// *ToolOutputError, or an *EvaluationError naming the tool's definition.
// A worker that runs an agent session away from its evaluation (package
// temporal) calls a granted tool this way. Run is safe for concurrent use
// when the tool's Execute is.
func (t *Tool) Run(ctx context.Context, raw any) (out any, err error) {
	if ctx.Err() != nil {
		return nil, canceled(ctx, t.pos)
	}
	in, err := t.normalizeInput(raw)
	if err != nil {
		return nil, err
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("tool %q panicked: %s", t.name, panicText(r))
			}
		}()
		out, err = t.execute(ctx, in)
	}()
	if err != nil {
		var ti *ToolInputError
		var to *ToolOutputError
		var ee *EvaluationError
		if errors.As(err, &ti) || errors.As(err, &to) || errors.As(err, &ee) {
			return nil, err
		}
		return nil, &EvaluationError{Msg: fmt.Sprintf("tool %q failed", t.name), Pos: t.pos, Err: err}
	}
	return t.finishOutput(out)
}

// CallTool runs t from component code: the input goes through the same
// normalization and validation as an agent's call, the call is traced
// under the component, and it is cancelled with the evaluation. Calling
// never grants the tool to a model.
func (cc *ComponentContext) CallTool(t *Tool, input any) (any, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: "Tools can only be called while an AML component is active", Pos: t.pos}
	}
	if cc.static {
		return nil, cc.staticErr("calling tool "+t.name, t.pos)
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	sc := cc.scope()
	if cc.d.journal == nil {
		return cc.d.invoke(cc.ctx, t, input, sc.span, "component")
	}
	label := "tool(" + strconv.Quote(t.name) + ")"
	// The journal keys the call by its input: an omitted input (t())
	// has a key of its own, which no JSON text can be; input that is not
	// JSON data is left to the tool's own input checks, which say why.
	canon := noInputKey
	if _, omitted := input.(noInput); !omitted {
		var err error
		if canon, err = CanonicalJSON(input); err != nil {
			if _, ierr := t.normalizeInput(input); ierr != nil {
				return nil, ierr
			}
			return nil, &ToolInputError{Tool: t.name, Msg: "input cannot be recorded in the journal", Err: err}
		}
	}
	at := sc.path.next("tool")
	e := &Effect{ID: at.id, Order: at.order, Kind: "tool", Pos: cc.d.journal.relPos(t.pos), Label: label, Request: fp("input", canon, "tool", t.name)}
	rec, err := cc.d.replay(at, e.Kind, t.pos, label, e.Request)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		var r toolResult
		if err := decodeJSON(rec.Result, &r); err != nil {
			return nil, &EvaluationError{Msg: "the journal's record of " + label + " cannot be read", Pos: t.pos, Err: err}
		}
		if err := cc.d.replayedFiles(cc.ctx, sc.res.ws, rec); err != nil {
			return nil, err
		}
		return r.Output, nil
	}
	if err := cc.d.beforeLive(cc.ctx, sc.res.ws, t.pos, true); err != nil {
		return nil, err
	}
	out, err := cc.d.invoke(cc.ctx, t, input, sc.span, "component")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(toolResult{Output: out})
	if err != nil {
		return nil, &EvaluationError{Msg: "cannot record " + label + " in the journal", Pos: t.pos, Err: err}
	}
	e.Result = b
	if err := cc.d.recordIn(cc.ctx, sc.res.ws, e, true); err != nil {
		return nil, err
	}
	return out, nil
}

// noInputKey is the journal's key for the input of a call that gave none.
const noInputKey = "(no input)"

// toolResult is the recorded result of a tool call from component code.
type toolResult struct {
	Output any `json:"output"`
}

// ToolGrant grants a tool to the nearest enclosing agent. It contributes no
// text.
type ToolGrant struct {
	Tool     *Tool
	Position Position
}

// Kind implements Node.
func (*ToolGrant) Kind() string { return "tool" }

// Pos implements Node.
func (n *ToolGrant) Pos() Position { return n.Position }

// AgentTool is a granted tool as a provider sees it: its declaration and
// a Call port that runs it through AML's validation path. It is safe for
// concurrent use.
type AgentTool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the input; providers must not
	// modify it.
	InputSchema map[string]any
	call        func(ctx context.Context, input any) (any, error)
	tool        *Tool
}

// NewAgentTool grants t as a provider sees it, outside an evaluation:
// its calls run t.Run (no trace, no journal). The evaluator grants tools
// itself; a worker that runs a session away from its evaluation uses this.
func NewAgentTool(t *Tool) *AgentTool {
	return &AgentTool{Name: t.Name(), Description: t.Description(), InputSchema: t.InputSchema().Document(), call: t.Run, tool: t}
}

// Gated returns a grant of the same tool whose every call first asks
// gate, and is refused with gate's error (as the tool's failure) when it
// gives one: a worker that runs a session away from its evaluation counts
// its tool calls against the run's budgets so.
func (t *AgentTool) Gated(gate func() error) *AgentTool {
	c := *t
	call := t.call
	c.call = func(ctx context.Context, input any) (any, error) {
		if err := gate(); err != nil {
			return nil, err
		}
		return call(ctx, input)
	}
	return &c
}

// Tool returns the tool this grant calls.
func (t *AgentTool) Tool() *Tool { return t.tool }

// Call runs the tool as a model-selected call. input is the transport
// value: JSON-like data, a JSON string, or NoInput when the model sent
// none. The result is JSON-like data or a string. Errors are
// *ToolInputError (the tool did not run), *ToolOutputError, or the tool's
// own failure.
func (t *AgentTool) Call(ctx context.Context, input any) (any, error) {
	return t.call(ctx, input)
}

// NewCallTool grants a tool whose calls run call: a tool of an evaluation
// that runs elsewhere (a Temporal worker relays a model's calls to the
// workflow code that defined the tool in a component body). name,
// description and inputSchema are what the provider shows the model; call
// receives the transport value, as AgentTool.Call does.
func NewCallTool(name, description string, inputSchema map[string]any, call func(ctx context.Context, input any) (any, error)) *AgentTool {
	return &AgentTool{Name: name, Description: description, InputSchema: inputSchema, call: call}
}
