package starlib

import (
	"fmt"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/aml-go/aml/eval"
)

// The schema module builds JSON Schema (draft 2020-12) documents as plain
// frozen dicts; any hand-written JSON Schema dict works wherever these do.

var schemaModule = sync.OnceValue(func() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "schema", Members: starlark.StringDict{}}
	for _, b := range core {
		if name, ok := strings.CutPrefix(b.Name, "schema."); ok {
			m.Members[name] = b.value()
		}
	}
	m.Members.Freeze()
	return m
})

func descriptionParam() Param {
	return Param{Name: "description", Type: "str | None", Default: "None", Doc: "Describes the value to the model."}
}

// schemaDict builds a frozen dict from ordered key/value pairs, skipping
// nil values.
func schemaDict(kv ...any) *starlark.Dict {
	d := starlark.NewDict(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			continue
		}
		var v starlark.Value
		switch x := kv[i+1].(type) {
		case starlark.Value:
			v = x
		case string:
			v = starlark.String(x)
		}
		if v == nil {
			continue
		}
		_ = d.SetKey(starlark.String(kv[i].(string)), v)
	}
	d.Freeze()
	return d
}

// optArg returns the argument or nil when omitted.
func optArg(c *Call, name string) starlark.Value {
	if v := c.Value(name); v != nil {
		return v
	}
	return nil
}

func optStr(c *Call, name string) any {
	if c.Has(name) {
		return c.Str(name)
	}
	return nil
}

func nonNegative(c *Call, names ...string) error {
	for _, n := range names {
		if v, set, err := c.Int(n); err != nil {
			return err
		} else if set && v < 0 {
			return c.Errorf("%s must be a non-negative integer, got %d", n, v)
		}
	}
	return nil
}

var schemaString = &Builtin{
	Name:  "schema.string",
	Group: "schema",
	Doc:   "Returns a JSON Schema for a string.",
	Params: []Param{
		descriptionParam(),
		{Name: "min_length", Type: "int | None", Default: "None", Doc: "Minimum length in characters."},
		{Name: "max_length", Type: "int | None", Default: "None", Doc: "Maximum length in characters."},
		{Name: "pattern", Type: "str | None", Default: "None", Doc: "Regular expression the string must match (anywhere, unless anchored)."},
		{Name: "format", Type: "str | None", Default: "None", Doc: `Format annotation such as "date-time" or "uri" (not enforced).`},
	},
	Returns: "dict",
	Example: `schema.string(min_length = 1)`,
	Impl: func(c *Call) (starlark.Value, error) {
		if err := nonNegative(c, "min_length", "max_length"); err != nil {
			return nil, err
		}
		return schemaDict("type", "string", "description", optStr(c, "description"), "minLength", optArg(c, "min_length"),
			"maxLength", optArg(c, "max_length"), "pattern", optStr(c, "pattern"), "format", optStr(c, "format")), nil
	},
}

func numericBuiltin(name, typ string) *Builtin {
	return &Builtin{
		Name:  "schema." + name,
		Group: "schema",
		Doc:   fmt.Sprintf("Returns a JSON Schema for %s.", map[string]string{"integer": "an integer", "number": "a number (integer or float)"}[typ]),
		Params: []Param{
			descriptionParam(),
			{Name: "minimum", Type: "int | float | None", Default: "None", Doc: "Inclusive lower bound."},
			{Name: "maximum", Type: "int | float | None", Default: "None", Doc: "Inclusive upper bound."},
		},
		Returns: "dict",
		Example: "schema." + name + "(minimum = 0)",
		Impl: func(c *Call) (starlark.Value, error) {
			for _, n := range []string{"minimum", "maximum"} {
				if v := c.Value(n); v != nil {
					switch v.(type) {
					case starlark.Int, starlark.Float:
					default:
						return nil, c.Errorf("%s must be a number, got %s", n, v.Type())
					}
				}
			}
			return schemaDict("type", typ, "description", optStr(c, "description"), "minimum", optArg(c, "minimum"), "maximum", optArg(c, "maximum")), nil
		},
	}
}

var (
	schemaInteger = numericBuiltin("integer", "integer")
	schemaNumber  = numericBuiltin("number", "number")
)

var schemaBoolean = &Builtin{
	Name:    "schema.boolean",
	Group:   "schema",
	Doc:     "Returns a JSON Schema for True or False.",
	Params:  []Param{descriptionParam()},
	Returns: "dict",
	Example: `schema.boolean()`,
	Impl: func(c *Call) (starlark.Value, error) {
		return schemaDict("type", "boolean", "description", optStr(c, "description")), nil
	},
}

var schemaArray = &Builtin{
	Name:  "schema.array",
	Group: "schema",
	Doc:   "Returns a JSON Schema for a list whose elements all satisfy items.",
	Params: []Param{
		{Name: "items", Type: "dict", Positional: true, Doc: "Schema of every element."},
		descriptionParam(),
		{Name: "min_items", Type: "int | None", Default: "None", Doc: "Minimum number of elements."},
		{Name: "max_items", Type: "int | None", Default: "None", Doc: "Maximum number of elements."},
	},
	Returns: "dict",
	Example: `schema.array(schema.string(), min_items = 1)`,
	Impl: func(c *Call) (starlark.Value, error) {
		if err := nonNegative(c, "min_items", "max_items"); err != nil {
			return nil, err
		}
		return schemaDict("type", "array", "items", c.Value("items"), "description", optStr(c, "description"),
			"minItems", optArg(c, "min_items"), "maxItems", optArg(c, "max_items")), nil
	},
}

var schemaEnum = &Builtin{
	Name:    "schema.enum",
	Group:   "schema",
	Doc:     "Returns a JSON Schema accepting exactly one of the given values (strings, numbers, booleans or None).",
	Params:  []Param{{Name: "values", Type: "any", Variadic: true, Doc: "The accepted values."}, descriptionParam()},
	Returns: "dict",
	Example: `schema.enum("low", "high")`,
	Impl: func(c *Call) (starlark.Value, error) {
		if len(c.rest) == 0 {
			return nil, c.Errorf("needs at least one value")
		}
		allStrings := true
		for _, v := range c.rest {
			switch v.(type) {
			case starlark.String:
			case starlark.Int, starlark.Float, starlark.Bool, starlark.NoneType:
				allStrings = false
			default:
				return nil, c.Errorf("values must be strings, numbers, booleans or None, got %s", v.Type())
			}
		}
		vals := starlark.NewList(append([]starlark.Value(nil), c.rest...))
		vals.Freeze()
		var typ any
		if allStrings {
			typ = "string"
		}
		return schemaDict("type", typ, "enum", vals, "description", optStr(c, "description")), nil
	},
}

var schemaLiteral = &Builtin{
	Name:    "schema.literal",
	Group:   "schema",
	Doc:     "Returns a JSON Schema accepting exactly one value (JSON Schema const).",
	Params:  []Param{{Name: "value", Type: "any", Positional: true, Doc: "The only accepted value."}, descriptionParam()},
	Returns: "dict",
	Example: `schema.literal("paid")`,
	Impl: func(c *Call) (starlark.Value, error) {
		if _, err := toGo(c.Value("value")); err != nil {
			return nil, c.Errorf("value must be JSON data: %v", err)
		}
		return schemaDict("const", c.Value("value"), "description", optStr(c, "description")), nil
	},
}

var schemaNullable = &Builtin{
	Name:    "schema.nullable",
	Group:   "schema",
	Doc:     "Returns a JSON Schema accepting None or a value satisfying s.",
	Params:  []Param{{Name: "s", Type: "dict", Positional: true, Doc: "Schema of the non-null value."}},
	Returns: "dict",
	Example: `schema.nullable(schema.string())`,
	Impl: func(c *Call) (starlark.Value, error) {
		alts := starlark.NewList([]starlark.Value{c.Value("s"), schemaDict("type", "null")})
		alts.Freeze()
		return schemaDict("anyOf", alts), nil
	},
}

var schemaDescribe = &Builtin{
	Name:  "schema.describe",
	Group: "schema",
	Doc:   "Returns a copy of schema s with a description for the model.",
	Params: []Param{
		{Name: "s", Type: "dict", Positional: true, Doc: "The schema."},
		{Name: "description", Type: "str", Positional: true, Doc: "The description."},
	},
	Returns: "dict",
	Example: `schema.describe(schema.string(), "One-sentence summary.")`,
	Impl: func(c *Call) (starlark.Value, error) {
		src := c.Value("s").(*starlark.Dict)
		d := starlark.NewDict(src.Len() + 1)
		for _, kv := range src.Items() {
			_ = d.SetKey(kv[0], kv[1])
		}
		_ = d.SetKey(starlark.String("description"), starlark.String(c.Str("description")))
		d.Freeze()
		return d, nil
	},
}

// optionalSchema marks an object property that may be omitted. It is only
// valid as a property of schema.object().
type optionalSchema struct{ s *starlark.Dict }

func (o *optionalSchema) String() string        { return "schema.optional(" + o.s.String() + ")" }
func (o *optionalSchema) Type() string          { return "schema.optional" }
func (o *optionalSchema) Freeze()               {}
func (o *optionalSchema) Truth() starlark.Bool  { return starlark.True }
func (o *optionalSchema) Hash() (uint32, error) { return identityHash(o), nil }

var schemaOptional = &Builtin{
	Name:    "schema.optional",
	Group:   "schema",
	Doc:     "Marks a property of schema.object() as optional (left out of required).",
	Params:  []Param{{Name: "s", Type: "dict", Positional: true, Doc: "Schema of the property when present."}},
	Returns: "an optional marker, valid only as a schema.object() property",
	Example: `schema.object(id = schema.integer(), note = schema.optional(schema.string()))`,
	Impl: func(c *Call) (starlark.Value, error) {
		return &optionalSchema{s: c.Value("s").(*starlark.Dict)}, nil
	},
}

var schemaObject = &Builtin{
	Name:  "schema.object",
	Group: "schema",
	Doc: `Returns a JSON Schema for a dict with the given properties.

Every keyword argument is one property; all properties are required unless wrapped in schema.optional(). Property names that are not valid identifiers can be passed in a dict as the positional argument. Other keys are allowed; use a hand-written dict with "additionalProperties": False to forbid them.`,
	Params: []Param{
		{Name: "properties", Type: "dict | None", Default: "None", Positional: true, Doc: "Properties by name, merged before the keyword arguments."},
		{Name: "fields", Type: "dict", Kwargs: true, Doc: "Properties as keyword arguments (name = schema)."},
	},
	Returns: "dict",
	Example: `schema.object(severity = schema.enum("low", "high"), summary = schema.string())`,
	raw:     objectValue,
}

// objectValue implements schema.object: it accepts arbitrary keyword
// arguments, so it bypasses the catalog's keyword check.
func objectValue(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pairs [][2]starlark.Value
	if len(args) > 1 {
		return nil, fmt.Errorf("schema.object: got %d positional arguments, want at most 1 (a dict of properties)", len(args))
	}
	if len(args) == 1 {
		d, ok := args[0].(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("schema.object: the positional argument must be a dict of properties, got %s", args[0].Type())
		}
		for _, kv := range d.Items() {
			pairs = append(pairs, [2]starlark.Value{kv[0], kv[1]})
		}
	}
	for _, kv := range kwargs {
		pairs = append(pairs, [2]starlark.Value{kv[0], kv[1]})
	}
	props := starlark.NewDict(len(pairs))
	var required []starlark.Value
	for _, p := range pairs {
		name, ok := p[0].(starlark.String)
		if !ok {
			return nil, fmt.Errorf("schema.object: property names must be strings, got %s", p[0].Type())
		}
		if _, found, _ := props.Get(name); found {
			return nil, fmt.Errorf("schema.object: property %q is given twice", string(name))
		}
		switch s := p[1].(type) {
		case *optionalSchema:
			_ = props.SetKey(name, s.s)
		case *starlark.Dict:
			_ = props.SetKey(name, s)
			required = append(required, name)
		default:
			return nil, fmt.Errorf("schema.object: property %q must be a schema dict (such as schema.string()), got %s", string(name), p[1].Type())
		}
	}
	props.Freeze()
	req := starlark.NewList(required)
	req.Freeze()
	var reqVal starlark.Value = req
	if len(required) == 0 {
		reqVal = nil
	}
	if reqVal == nil {
		return schemaDict("type", "object", "properties", props), nil
	}
	return schemaDict("type", "object", "properties", props, "required", reqVal), nil
}

// schemaCache holds compiled schemas by their canonical JSON text, so a
// schema shared by many nodes is compiled once.
var schemaCache struct {
	sync.Mutex
	m map[string]*eval.Schema
}

const schemaCacheSize = 256

// compileSchema turns a Starlark schema dict into an eval.Schema.
func compileSchema(v starlark.Value) (*eval.Schema, error) {
	if _, ok := v.(*optionalSchema); ok {
		return nil, fmt.Errorf("schema.optional() is only valid as a property of schema.object()")
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("schema must be a dict holding a JSON Schema, got %s", v.Type())
	}
	g, err := toGo(d)
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON data: %w", err)
	}
	key, err := eval.CanonicalJSON(g)
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON data: %w", err)
	}
	schemaCache.Lock()
	s, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		return s, nil
	}
	s, err = eval.NewSchema(g.(map[string]any))
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if schemaCache.m == nil || len(schemaCache.m) >= schemaCacheSize {
		schemaCache.m = map[string]*eval.Schema{}
	}
	schemaCache.m[key] = s
	schemaCache.Unlock()
	return s, nil
}
