package eval

import (
	"context"
	"errors"
	"fmt"
)

// Expand runs component c's body to get the tree it returns, without
// running anything else: the body's component context refuses every
// effect (Evaluate and its variants, CallTool, Ask, TraceSpan) with a
// *StaticError, and DryRun reports true on its context, so bindings keep
// print() quiet. Reads (Read) are allowed and recorded nowhere. The tree
// returned is the one an evaluation would descend into; components in it
// are not expanded. A body that needs a run to build its tree (it calls
// evaluate(), say) fails with a *StaticError naming the call. Expand is
// for pictures and checks of a workflow (aml graph); it is safe for
// concurrent use when c's body is.
func Expand(ctx context.Context, c *Component) (any, error) {
	if c == nil || c.Fn == nil {
		return nil, errors.New("Expand needs a component with a body")
	}
	cc := &ComponentContext{ctx: context.WithValue(ctx, dryKey{}, true), node: c, static: true}
	cc.active.Store(true)
	defer cc.active.Store(false)
	return c.Fn(cc)
}

// StaticError is what an effect fails with inside Expand: building the
// tree needs a run.
type StaticError struct {
	// Op is what was asked, as the workflow spells it ("evaluate()").
	Op string
	// Pos is where; it may be invalid when the binding passed none.
	Pos Position
	// Component is the name of the component whose body asked.
	Component string
}

func (e *StaticError) Error() string {
	where := ""
	if e.Pos.IsValid() {
		where = e.Pos.String() + ": "
	}
	return fmt.Sprintf("%s%s in component %s needs a run: the component's tree is only known when it runs", where, e.Op, e.Component)
}

// staticErr is the error of effect op at pos in an Expand body.
func (cc *ComponentContext) staticErr(op string, pos Position) error {
	if !pos.IsValid() {
		pos = cc.node.Position
	}
	return &StaticError{Op: op, Pos: pos, Component: cc.node.Name}
}
