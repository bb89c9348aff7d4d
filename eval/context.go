package eval

import "fmt"

// ContextKey identifies a scoped value (create_context). Identity is the
// key pointer, not the name. A ContextKey is immutable.
type ContextKey struct {
	name       string
	hasDefault bool
	def        any
}

// NewContextKey returns a context. Without def it is required:
// use_context fails when no provide() encloses the caller. With one
// default value (which may be nil) that value is used then. More than one
// default panics.
func NewContextKey(name string, def ...any) *ContextKey {
	switch len(def) {
	case 0:
		return &ContextKey{name: name}
	case 1:
		return &ContextKey{name: name, hasDefault: true, def: def[0]}
	}
	panic("eval.NewContextKey: at most one default value")
}

// Name returns the context's name.
func (k *ContextKey) Name() string { return k.name }

// Provide makes Value the value of Key for its children (the nearest
// provide() wins). It contributes its children's text and nothing else.
// Value is handed to component code as is and must be immutable.
type Provide struct {
	Key      *ContextKey
	Value    any
	Children []any
	Position Position
}

// Kind implements Node.
func (*Provide) Kind() string { return "provide" }

// Pos implements Node.
func (n *Provide) Pos() Position { return n.Position }

// binding is one link of the immutable chain of provided values.
type binding struct {
	key    *ContextKey
	value  any
	parent *binding
}

func (b *binding) lookup(k *ContextKey) (any, bool) {
	for ; b != nil; b = b.parent {
		if b.key == k {
			return b.value, true
		}
	}
	return nil, false
}

// UseContext returns the value of k provided around the component, or
// k's default. A required context with no provider is an error naming it.
func (cc *ComponentContext) UseContext(k *ContextKey, pos Position) (any, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: "use_context() is only available while an AML component is active", Pos: pos}
	}
	if v, ok := cc.sc.ctx.lookup(k); ok {
		return v, nil
	}
	if k.hasDefault {
		return k.def, nil
	}
	return nil, newError(pos, fmt.Sprintf("context %q has no value here: wrap the component in provide(%s, value, ...) or create the context with a default", k.name, k.name))
}
