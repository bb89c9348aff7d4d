package starlib

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

var createContextBuiltin = &Builtin{
	Name:  "create_context",
	Group: "components",
	Doc: `Creates a scoped value that components read with use_context().

create_context(name) makes a required context: use_context() fails, naming it, unless a provide() encloses the component. create_context(name, default = v) makes a defaulted one; an explicit default = None is a default too. Identity is the returned value, not the name.`,
	Params: []Param{
		{Name: "name", Type: "str", Positional: true, Doc: "Name used in errors."},
		{Name: "default", Type: "any", Default: "<omitted>", Positional: true, Doc: "Value when no provide() encloses the reader; omit it for a required context."},
	},
	Returns: "a context",
	Example: `Reviewer = create_context("reviewer", default = "general")`,
	Impl: func(c *Call) (starlark.Value, error) {
		name := c.Str("name")
		if name == "" {
			return nil, c.Errorf("name must be a non-empty string")
		}
		if v := c.Value("default"); v != nil {
			v.Freeze()
			return &ContextValue{Key: eval.NewContextKey(name, v)}, nil
		}
		return &ContextValue{Key: eval.NewContextKey(name)}, nil
	},
}

var provideBuiltin = &Builtin{
	Name:  "provide",
	Group: "components",
	Doc: `Provides a value of a context to its children; the nearest provide() wins.

Components evaluated inside the children (also through evaluate(), parallel() branches and evaluate_all()) read it with use_context(). The value is frozen, because components may run on other goroutines. provide() adds no text of its own.`,
	Params: []Param{
		{Name: "ctx", Type: "context", Positional: true, Doc: "The context from create_context()."},
		{Name: "value", Type: "any", Positional: true, Doc: "The value."},
		childrenParam,
	},
	Returns: "a provide node",
	Example: `provide(Reviewer, "security", Review())`,
	Impl: func(c *Call) (starlark.Value, error) {
		cv := c.Value("ctx").(*ContextValue)
		v := c.Value("value")
		v.Freeze()
		kids, err := c.Children()
		if err != nil {
			return nil, err
		}
		return nodeValue(&eval.Provide{Key: cv.Key, Value: v, Children: kids, Position: c.pos}), nil
	},
}

var useContextBuiltin = &Builtin{
	Name:             "use_context",
	OutsideComponent: "use_context() is only available while an AML component is active; call it inside a component body",
	Group:            "components",
	Doc: `Returns the value of a context provided around the running component, or its default.

Only available while a component body runs; a required context without a provide() around the component is an error naming it.`,
	Params:  []Param{{Name: "ctx", Type: "context", Positional: true, Doc: "The context from create_context()."}},
	Returns: "the provided value",
	Example: `kind = use_context(Reviewer)`,
	Impl: func(c *Call) (starlark.Value, error) {
		cc := componentOf(c.thread)
		if cc == nil {
			return nil, c.outsideComponent()
		}
		v, err := cc.UseContext(c.Value("ctx").(*ContextValue).Key, c.pos)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return starlark.None, nil
		}
		return v.(starlark.Value), nil
	},
}

// ContextValue is the Starlark value of create_context().
type ContextValue struct {
	Key *eval.ContextKey
}

// String implements starlark.Value.
func (v *ContextValue) String() string { return fmt.Sprintf("<context %s>", v.Key.Name()) }

// Type implements starlark.Value.
func (v *ContextValue) Type() string { return "context" }

// Freeze implements starlark.Value; contexts are immutable.
func (v *ContextValue) Freeze() {}

// Truth implements starlark.Value.
func (v *ContextValue) Truth() starlark.Bool { return starlark.True }

// Hash implements starlark.Value by identity.
func (v *ContextValue) Hash() (uint32, error) { return identityHash(v.Key), nil }

// Attr exposes the context's name.
func (v *ContextValue) Attr(name string) (starlark.Value, error) {
	if name == "name" {
		return starlark.String(v.Key.Name()), nil
	}
	return nil, nil
}

// AttrNames implements starlark.HasAttrs.
func (v *ContextValue) AttrNames() []string { return []string{"name"} }
