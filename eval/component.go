package eval

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ComponentContext is the capability handed to a running component body.
// Through it the body evaluates nested values in the current evaluation
// domain (evaluate to collect). It is valid only while the body runs:
// every method fails with "evaluate() is only available while an AML
// component is active" once the body returned.
//
// Evaluate and EvaluateAll may be called from several goroutines at once.
type ComponentContext struct {
	d      *domain
	ctx    context.Context
	node   *Component
	sc     scope
	active atomic.Bool
	// wg joins nested evaluations still running when the body returns.
	wg sync.WaitGroup

	mu sync.Mutex
	// spans are the open application spans (with_trace_span), innermost
	// last; nested work started inside one is traced beneath it.
	spans []string
	// static is set for the context of Expand: every effect fails.
	static bool
}

// scope returns the scope for nested work started now: beneath the
// innermost open application span, if any.
func (cc *ComponentContext) scope() scope {
	sc := cc.sc
	cc.mu.Lock()
	if n := len(cc.spans); n > 0 {
		sc.span = cc.spans[n-1]
	}
	cc.mu.Unlock()
	return sc
}

// TraceSpan runs fn inside an application span named name, beneath the
// component or the enclosing application span; work fn starts
// (evaluate(), tools) is traced beneath it. The span ends with fn's
// outcome; fn's result is not changed.
func (cc *ComponentContext) TraceSpan(name string, pos Position, fn func() error) error {
	if !cc.active.Load() {
		return &EvaluationError{Msg: "with_trace_span() is only available while an AML component is active", Pos: pos}
	}
	if name == "" {
		return newError(pos, "with_trace_span() needs a non-empty span name")
	}
	if cc.static {
		return cc.staticErr("with_trace_span()", pos)
	}
	sp := cc.d.trace.startSpan(cc.scope().span, "application", name, pos, nil, nil)
	if sp != nil {
		cc.mu.Lock()
		cc.spans = append(cc.spans, sp.ID())
		cc.mu.Unlock()
		defer func() {
			cc.mu.Lock()
			cc.spans = cc.spans[:len(cc.spans)-1]
			cc.mu.Unlock()
		}()
	}
	err := fn()
	sp.end(err, nil, nil)
	return err
}

// Context returns the evaluation's context; it is done when the
// evaluation is cancelled.
func (cc *ComponentContext) Context() context.Context { return cc.ctx }

// RunID returns the evaluation's run identity.
func (cc *ComponentContext) RunID() string {
	if cc.d == nil {
		return ""
	}
	return cc.d.runID
}

// Name returns the component's name.
func (cc *ComponentContext) Name() string { return cc.node.Name }

// Active reports whether the component body is still running.
func (cc *ComponentContext) Active() bool { return cc.active.Load() }

// Evaluate resolves value inside the current domain (inheriting scopes,
// limits, tracing and cancellation) and returns its text. Resources owned
// by the nested value are released before it returns.
func (cc *ComponentContext) Evaluate(value any) (string, error) {
	if !cc.active.Load() {
		return "", &EvaluationError{Msg: errDetached.Error(), Pos: cc.node.Position}
	}
	if cc.static {
		return "", cc.staticErr("evaluate()", Position{})
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	return cc.d.evaluate(cc.ctx, value, cc.scope())
}

// EvaluateStructured resolves value, which must resolve to exactly one
// agent() (possibly inside components or lists, with no other text), asks
// that agent for a structured result satisfying schema, and returns the
// validated value as JSON-like Go data. pos is the authored position of
// the call, used in errors.
func (cc *ComponentContext) EvaluateStructured(value any, schema *Schema, pos Position) (any, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: errDetached.Error(), Pos: cc.node.Position}
	}
	if cc.static {
		return nil, cc.staticErr("evaluate(schema=...)", pos)
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	return cc.d.evaluateStructured(cc.ctx, value, cc.scope(), schema, pos)
}

// EvaluateAllStructured is EvaluateStructured for several values, run
// concurrently; results keep authored order, and failures are reported
// together as a *ParallelError.
func (cc *ComponentContext) EvaluateAllStructured(values []any, schema *Schema, pos Position) ([]any, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: errDetached.Error(), Pos: cc.node.Position}
	}
	if cc.static {
		return nil, cc.staticErr("evaluate_all(schema=...)", pos)
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	out := make([]any, len(values))
	sc := cc.scope()
	fan := sc.path.child("p")
	fan.expect(len(values))
	err := cc.d.fanOut(cc.ctx, len(values), pos, func(ctx context.Context, i int) error {
		bsc := sc
		bsc.path = fan.branch(i)
		v, err := cc.d.evaluateStructured(ctx, values[i], bsc, schema, pos)
		out[i] = v
		if err == nil {
			bsc.path.finish()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	fan.finish()
	return out, nil
}

// EvaluateAll resolves values concurrently (bounded only by the agent
// scheduler), waits for all of them, and returns their texts in authored
// order. If any fail, it returns a *ParallelError listing every failure.
// pos is the position reported by that error.
func (cc *ComponentContext) EvaluateAll(values []any, pos Position) ([]string, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: errDetached.Error(), Pos: cc.node.Position}
	}
	if cc.static {
		return nil, cc.staticErr("evaluate_all()", pos)
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	sc := cc.scope()
	sc.path = sc.path.child("p")
	return cc.d.evaluateAll(cc.ctx, values, sc, pos, false)
}

// evaluateAll resolves every value in scope sc as one fan-out (see
// fanOut); sc.path is the fan-out's context, whose branch i each value
// gets. checked says the values were already checked as part of the
// tree that holds them (the branches of a parallel()).
func (d *domain) evaluateAll(ctx context.Context, values []any, sc scope, pos Position, checked bool) ([]string, error) {
	texts := make([]string, len(values))
	sc.path.expect(len(values))
	err := d.fanOut(ctx, len(values), pos, func(ctx context.Context, i int) error {
		var err error
		bsc := sc.branch(i)
		if checked {
			texts[i], err = d.evaluateUnchecked(ctx, values[i], bsc)
		} else {
			texts[i], err = d.evaluate(ctx, values[i], bsc)
		}
		if err == nil {
			bsc.path.finish()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sc.path.finish()
	return texts, nil
}

// runComponent invokes the component body with a fresh context and
// returns the value it composes.
func (d *domain) runComponent(ctx context.Context, n *Component, sc scope) (any, error) {
	if n.Fn == nil {
		return nil, newError(n.Position, "component "+n.Name+" has no body")
	}
	cc := &ComponentContext{d: d, ctx: ctx, node: n, sc: sc}
	cc.active.Store(true)
	v, err := callComponent(cc, n)
	cc.active.Store(false)
	// Join nested evaluations the body started but did not wait for, so
	// that no branch outlives the scopes it inherited.
	unblock := d.workers.block()
	cc.wg.Wait()
	unblock()
	if err != nil {
		return nil, componentFailure(ctx, n, err)
	}
	return v, nil
}

// componentFailure keeps errors that already name an authored position or
// branch and gives any other error the component's position.
func componentFailure(ctx context.Context, n *Component, err error) error {
	var (
		ee *EvaluationError
		pe *ParallelError
		ti *ToolInputError
		to *ToolOutputError
		de *DivergenceError
	)
	switch {
	case errors.As(err, &ee), errors.As(err, &pe), errors.As(err, &ti), errors.As(err, &to), errors.As(err, &de):
		return err
	case ctx.Err() != nil:
		return &EvaluationError{Msg: "evaluation cancelled in component " + n.Name, Pos: n.Position, Err: err}
	}
	return &EvaluationError{Msg: "component " + n.Name + " failed", Pos: n.Position, Err: err}
}

func callComponent(cc *ComponentContext, n *Component) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newError(n.Position, "component "+n.Name+" panicked: "+panicText(r))
		}
	}()
	return n.Fn(cc)
}
