package starlib

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

// NodeValue is the Starlark value of an AML node. It is immutable and
// hashable by identity.
type NodeValue struct {
	Node eval.Node
}

var (
	_ starlark.Value    = (*NodeValue)(nil)
	_ starlark.HasAttrs = (*NodeValue)(nil)
)

// String implements starlark.Value.
func (v *NodeValue) String() string {
	return fmt.Sprintf("<%s at %s>", v.Node.Kind(), v.Node.Pos())
}

// Type implements starlark.Value: the builtin name of the node ("agent").
func (v *NodeValue) Type() string { return v.Node.Kind() }

// Freeze implements starlark.Value; nodes are immutable.
func (v *NodeValue) Freeze() {}

// Truth implements starlark.Value; nodes are always true.
func (v *NodeValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *NodeValue) Hash() (uint32, error) { return identityHash(v.Node), nil }

// Attr exposes the node's kind and source position for introspection.
func (v *NodeValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "kind":
		return starlark.String(v.Node.Kind()), nil
	case "source":
		return starlark.String(v.Node.Pos().String()), nil
	}
	return nil, nil
}

// AttrNames implements starlark.HasAttrs.
func (v *NodeValue) AttrNames() []string { return []string{"kind", "source"} }

// AgentProviderValue is the Starlark value of an agent provider, as
// returned by deterministic_agent() and the other provider factories.
type AgentProviderValue struct {
	Provider eval.AgentProvider
}

// String implements starlark.Value.
func (v *AgentProviderValue) String() string {
	return fmt.Sprintf("<agent_provider %q>", v.Provider.Name())
}

// Type implements starlark.Value.
func (v *AgentProviderValue) Type() string { return "agent_provider" }

// Freeze implements starlark.Value; providers are immutable values.
func (v *AgentProviderValue) Freeze() {}

// Truth implements starlark.Value.
func (v *AgentProviderValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *AgentProviderValue) Hash() (uint32, error) {
	return identityHash(v.Provider), nil
}

// Attr exposes the provider's name.
func (v *AgentProviderValue) Attr(name string) (starlark.Value, error) {
	if name == "name" {
		return starlark.String(v.Provider.Name()), nil
	}
	return nil, nil
}

// AttrNames implements starlark.HasAttrs.
func (v *AgentProviderValue) AttrNames() []string { return []string{"name"} }

// identityHash hashes the address of a pointer value.
func identityHash(x any) uint32 {
	p := fmt.Sprintf("%p", x)
	var h uint32 = 2166136261
	for i := 0; i < len(p); i++ {
		h = (h ^ uint32(p[i])) * 16777619
	}
	return h
}

// errUnrenderable is wrapped by renderability errors.
var errUnrenderable = errors.New("is not renderable")

// toRenderable converts a Starlark value to an eval renderable: strings as
// they are, ints and floats as their str(), None and bools as nothing,
// lists and tuples recursively, nodes as nodes. Anything else is an error
// that names the type and suggests json.encode(). what is the subject of
// the message: "agent() argument", "component main returned a value that".
func toRenderable(v starlark.Value, what string) (any, error) {
	return convertCtx(context.Background(), v, what)
}

// toRenderableCtx is toRenderable for a value whose conversion may be
// long (a deeply nested list): it stops with ctx's cause once ctx is done.
func toRenderableCtx(ctx context.Context, v starlark.Value, what string) (any, error) {
	return convertCtx(ctx, v, what)
}

// toRenderables converts each value of a tuple.
func toRenderables(vs starlark.Tuple, what string) ([]any, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		r, err := convertCtx(context.Background(), v, what)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// convertStep is one sequence being converted: its elements, the
// converted values, and the next element.
type convertStep struct {
	list *starlark.List // nil for a tuple
	seq  starlark.Indexable
	out  []any
	i    int
}

// convertCtx converts v with an explicit stack (no Go recursion, linear
// in the size of the value however deep it nests). The lists being
// converted are kept in a set, so a list that contains itself is found
// in constant time per level. With a non-nil ctx, the conversion stops
// once ctx is done.
func convertCtx(ctx context.Context, v starlark.Value, what string) (any, error) {
	if r, ok, err := convertScalar(v, what); ok || err != nil {
		return r, err
	}
	onPath := map[*starlark.List]bool{}
	var stack []convertStep
	push := func(v starlark.Value) error {
		st := convertStep{}
		switch v := v.(type) {
		case *starlark.List:
			if onPath[v] {
				return fmt.Errorf("%s %w: cycle: a list contains itself, so its text would never end; build a new list instead of appending a list to itself", what, errUnrenderable)
			}
			onPath[v] = true
			st.list, st.seq = v, v
		case starlark.Tuple:
			// Tuples are immutable, so only a list inside one can close a cycle.
			st.seq = v
		}
		st.out = make([]any, st.seq.Len())
		stack = append(stack, st)
		return nil
	}
	if err := push(v); err != nil {
		return nil, err
	}
	steps := 0
	for {
		top := &stack[len(stack)-1]
		if top.i == len(top.out) {
			done := stack[len(stack)-1]
			if done.list != nil {
				delete(onPath, done.list)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return done.out, nil
			}
			parent := &stack[len(stack)-1]
			parent.out[parent.i-1] = done.out
			continue
		}
		if steps++; ctx != nil && steps%4096 == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		elem := top.seq.Index(top.i)
		top.i++
		r, ok, err := convertScalar(elem, what)
		if err != nil {
			return nil, err
		}
		if ok {
			top.out[top.i-1] = r
			continue
		}
		if err := push(elem); err != nil {
			return nil, err
		}
	}
}

// convertScalar converts a value that is not a list or tuple; ok is false
// for lists and tuples.
func convertScalar(v starlark.Value, what string) (r any, ok bool, err error) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), true, nil
	case starlark.NoneType, starlark.Bool:
		return nil, true, nil
	case starlark.Int, starlark.Float:
		return v.String(), true, nil
	case *NodeValue:
		return v.Node, true, nil
	case *starlark.List, starlark.Tuple:
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("%s %w: %s cannot be rendered as text (only strings, numbers, None, booleans, lists and AML nodes can); turn data into text first, e.g. json.encode(value)", what, errUnrenderable, article(v.Type()))
}

func nodeValue(n eval.Node) *NodeValue { return &NodeValue{Node: n} }

// article prefixes a type name with "a" or "an".
func article(typ string) string {
	if typ != "" && strings.ContainsRune("aeiou", rune(typ[0])) {
		return "an " + typ
	}
	return "a " + typ
}
