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
}

// Context returns the evaluation's context; it is done when the
// evaluation is cancelled.
func (cc *ComponentContext) Context() context.Context { return cc.ctx }

// RunID returns the evaluation's run identity.
func (cc *ComponentContext) RunID() string { return cc.d.runID }

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
	cc.wg.Add(1)
	defer cc.wg.Done()
	return cc.d.evaluate(cc.ctx, value, cc.sc, false)
}

// EvaluateAll resolves values concurrently (bounded only by the agent
// scheduler), waits for all of them, and returns their texts in authored
// order. If any fail, it returns a *ParallelError listing every failure.
// pos is the position reported by that error.
func (cc *ComponentContext) EvaluateAll(values []any, pos Position) ([]string, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: errDetached.Error(), Pos: cc.node.Position}
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	return cc.d.evaluateAll(cc.ctx, values, cc.sc, pos)
}

// evaluateAll runs every value on its own goroutine in scope sc.
func (d *domain) evaluateAll(ctx context.Context, values []any, sc scope, pos Position) ([]string, error) {
	texts := make([]string, len(values))
	errs := make([]error, len(values))
	var wg sync.WaitGroup
	wg.Add(len(values))
	for i, v := range values {
		go func() {
			defer wg.Done()
			texts[i], errs[i] = d.evaluate(ctx, v, sc, false)
		}()
	}
	wg.Wait()
	var pe *ParallelError
	for i, err := range errs {
		if err != nil {
			if pe == nil {
				pe = &ParallelError{Branches: len(values), Pos: pos}
			}
			pe.Failures = append(pe.Failures, BranchFailure{Index: i, Err: err})
		}
	}
	if pe != nil {
		return nil, pe
	}
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
	cc.wg.Wait()
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
	)
	switch {
	case errors.As(err, &ee), errors.As(err, &pe), errors.As(err, &ti), errors.As(err, &to):
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
