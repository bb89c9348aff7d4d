package starlib

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

// Thread-local keys. State is reached through thread locals, never through
// mutable package globals.
const (
	keyEnv       = "aml.env"
	keyComponent = "aml.component"
	keyModule    = "aml.module"
)

// envOf returns the workflow environment of a thread.
func envOf(thread *starlark.Thread) *env {
	e, _ := thread.Local(keyEnv).(*env)
	return e
}

// componentOf returns the active component of a thread, or nil when the
// thread runs no component body (module top level, provider callbacks).
func componentOf(thread *starlark.Thread) *eval.ComponentContext {
	cc, _ := thread.Local(keyComponent).(*eval.ComponentContext)
	return cc
}

// newThread returns a thread for one component body or callback. It
// inherits print and load from the environment; cancel it with the
// returned stop function's counterpart: the thread is cancelled when ctx
// is done, until stop is called.
func (e *env) newThread(ctx context.Context, name string) (*starlark.Thread, func() bool) {
	th := &starlark.Thread{Name: name, Print: e.print, Load: e.load}
	if p, ok := ctx.Value(printKey{}).(func(string)); ok {
		th.Print = func(th *starlark.Thread, msg string) {
			if cc := componentOf(th); cc != nil && eval.DryRun(cc.Context()) {
				return
			}
			p(msg)
		}
	}
	th.SetLocal(keyEnv, e)
	// A paced evaluation (workflow code) stops its threads at a step
	// count (eval.TakeSteps below), where a replay stops them again; any
	// other stops them at once.
	cancelled := func() bool { return false }
	if !eval.Paced(ctx) {
		cancelled = context.AfterFunc(ctx, func() {
			reason := "evaluation cancelled"
			if cause := context.Cause(ctx); cause != nil {
				reason = cause.Error()
			}
			th.Cancel(reason)
		})
	}
	// The evaluation's max_steps budget (eval.Limits.MaxSteps) is charged
	// a quantum at a time while the thread runs, and the rest when it
	// ends; without a budget the charges are free.
	settle := meter(th, ctx)
	stop := func() bool {
		settle()
		return cancelled()
	}
	return th, stop
}

// meter charges th's steps to the evaluation of ctx (eval.TakeSteps) a
// quantum at a time, and cancels th with the error TakeSteps reports;
// the returned function charges the rest, when th is done.
func meter(th *starlark.Thread, ctx context.Context) func() {
	var charged uint64
	th.SetMaxExecutionSteps(stepQuantum)
	th.OnMaxSteps = func(th *starlark.Thread) {
		n := th.ExecutionSteps()
		if err := eval.TakeSteps(ctx, int(n-charged)); err != nil {
			th.Cancel(err.Error())
			return
		}
		charged = n
		th.SetMaxExecutionSteps(n + stepQuantum)
	}
	return func() { _ = eval.TakeSteps(ctx, int(th.ExecutionSteps()-charged)) }
}

// printKey carries the print function of WithPrint.
type printKey struct{}

// WithPrint returns a context under which the Starlark code that the
// evaluation runs (component bodies, respond functions, tools' execute
// functions) prints with print instead of LoadOptions.Print: a worker
// that runs a tool for an agent session collects the lines the tool
// prints and returns them with the session. print must be safe for
// concurrent use.
func WithPrint(ctx context.Context, print func(msg string)) context.Context {
	return context.WithValue(ctx, printKey{}, print)
}

// stepQuantum is how many steps a thread runs between charges of the
// evaluation's max_steps budget.
const stepQuantum = 10_000

// fromStarlark converts an error from Starlark code into an evaluation
// error. Errors that already carry an authored position (evaluation errors
// from nested nodes, parallel errors, tool errors) pass through unchanged;
// other Starlark errors get the position of the innermost Starlark frame
// and the backtrace. A cancelled context yields its cause.
func fromStarlark(ctx context.Context, err error, fallback eval.Position) error {
	if ctx != nil && ctx.Err() != nil {
		var ee *eval.EvaluationError
		if errors.As(err, &ee) {
			return ee
		}
		cause := context.Cause(ctx)
		return &eval.EvaluationError{Msg: "evaluation cancelled", Pos: fallback, Err: cause}
	}
	var (
		ee *eval.EvaluationError
		pe *eval.ParallelError
		ti *eval.ToolInputError
		to *eval.ToolOutputError
		de *eval.DivergenceError
	)
	var (
		se *starlark.EvalError
		st *eval.StaticError
	)
	switch {
	case errors.As(err, &st):
		// eval.Expand: name the Starlark call that needs a run.
		c := *st
		if errors.As(err, &se) {
			c.Pos = starlarkPos(se, st.Pos)
		}
		return &c
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &de):
		return de
	case errors.As(err, &ee):
		return ee
	case errors.As(err, &ti), errors.As(err, &to):
		// Tool errors carry no position: name the Starlark call site.
		pos := fallback
		if errors.As(err, &se) {
			pos = starlarkPos(se, fallback)
		}
		var cause error = ti
		if ti == nil {
			cause = to
		}
		return &eval.EvaluationError{Msg: "tool call failed", Pos: pos, Err: cause}
	}
	if errors.As(err, &se) {
		if limit := stepsExceeded(ctx, se); limit != nil {
			// meter cancelled the thread: report the limit itself.
			return &eval.EvaluationError{Msg: limit.Error(), Pos: starlarkPos(se, fallback), Backtrace: se.Backtrace(), Err: limit}
		}
		return &eval.EvaluationError{Msg: se.Msg, Pos: starlarkPos(se, fallback), Backtrace: se.Backtrace(), Err: unwrapCause(se)}
	}
	return &eval.EvaluationError{Msg: err.Error(), Pos: fallback}
}

// stepsExceeded returns the max_steps error of the evaluation of ctx
// when se is the cancellation meter gave a thread for it, else nil.
func stepsExceeded(ctx context.Context, se *starlark.EvalError) error {
	if ctx == nil || !strings.HasPrefix(se.Msg, "Starlark computation cancelled: ") {
		return nil
	}
	limit := eval.StepsExceeded(ctx)
	if limit == nil || se.Msg != "Starlark computation cancelled: "+limit.Error() {
		return nil
	}
	return limit
}

// starlarkPos is the position of the innermost Starlark (not builtin)
// frame of a Starlark error.
func starlarkPos(se *starlark.EvalError, fallback eval.Position) eval.Position {
	for i := len(se.CallStack) - 1; i >= 0; i-- {
		if p := se.CallStack[i].Pos; p.Filename() != "<builtin>" && p.IsValid() {
			return toPos(p)
		}
	}
	return fallback
}

// innermost follows the causes of a Starlark error to the deepest Starlark
// error, which is where a failure inside a loaded module happened.
func innermost(se *starlark.EvalError) *starlark.EvalError {
	for {
		var inner *starlark.EvalError
		cause := se.Unwrap()
		if cause == nil || !errors.As(cause, &inner) || inner == se {
			return se
		}
		se = inner
	}
}

// unwrapCause returns the Go error behind a Starlark error when it is not
// just the message itself.
func unwrapCause(se *starlark.EvalError) error {
	cause := se.Unwrap()
	if cause == nil || cause.Error() == se.Msg {
		return nil
	}
	return cause
}

// componentBody adapts a Starlark callable to an eval.Component body. The
// body runs on its own thread whose component local is the active
// component, so evaluate() works inside it.
func (e *env) componentBody(fn starlark.Callable, args starlark.Tuple, kwargs []starlark.Tuple, name string, pos eval.Position) func(cc *eval.ComponentContext) (any, error) {
	return func(cc *eval.ComponentContext) (any, error) {
		th, stop := e.newThread(cc.Context(), "component "+name)
		defer stop()
		th.SetLocal(keyComponent, cc)
		v, err := starlark.Call(th, fn, args, kwargs)
		if err != nil {
			return nil, fromStarlark(cc.Context(), err, pos)
		}
		r, err := toRenderableCtx(cc.Context(), v, fmt.Sprintf("component %s returned a value that", name))
		if err != nil {
			if cc.Context().Err() != nil {
				return nil, &eval.EvaluationError{Msg: "evaluation cancelled in component " + name, Pos: pos, Err: err}
			}
			return nil, &eval.EvaluationError{Msg: err.Error(), Pos: pos}
		}
		return r, nil
	}
}
