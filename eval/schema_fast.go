package eval

import (
	"github.com/aml-go/aml/internal/jsonstr"
	"math"
	"regexp"
	"sort"
	"strconv"
	"unicode/utf8"
)

// fastSchema is a compiled form of the common subset of JSON Schema
// (type, properties, required, additionalProperties: false, items, enum,
// const, numeric and length bounds, pattern, anyOf). It only ever
// reports "valid" for values the full validator also accepts: when it
// rejects a value, the full validator decides and explains. Schemas using
// any other keyword get no fast form.
type fastSchema struct {
	types     uint8 // bit set of fastType*; 0 accepts every type
	enum      []any
	hasConst  bool
	constV    any
	props     map[string]*fastSchema
	propNames []string // sorted
	propReq   []bool   // propReq[i]: propNames[i] is required
	propKeys  [][]byte // propKeys[i]: the encoded `"name":` of propNames[i]
	// enumStrings holds the enum when every member is a string.
	enumStrings map[string]bool
	required    []string
	// reqOutside counts required names that are not properties.
	reqOutside int
	closed     bool // additionalProperties: false
	items      *fastSchema
	anyOf      []*fastSchema
	minLen     int
	maxLen     int
	pattern    *regexp.Regexp
	min, max   float64
	hasMin     bool
	hasMax     bool
	minItems   int
	maxItems   int
	hasMaxItem bool
}

const (
	fastNull uint8 = 1 << iota
	fastBool
	fastObject
	fastArray
	fastNumber
	fastString
	fastInteger
)

var fastTypeBits = map[string]uint8{"null": fastNull, "boolean": fastBool, "object": fastObject, "array": fastArray, "number": fastNumber, "string": fastString, "integer": fastInteger}

// annotation keywords do not affect validation.
var fastAnnotations = map[string]bool{"description": true, "title": true, "examples": true, "default": true, "$schema": true, "$comment": true, "format": true, "deprecated": true, "readOnly": true, "writeOnly": true}

// compileFast returns the fast form of doc, or nil when doc uses a keyword
// outside the subset.
func compileFast(doc map[string]any) *fastSchema {
	f := &fastSchema{maxLen: -1}
	for k, v := range doc {
		switch {
		case fastAnnotations[k]:
		case k == "type":
			switch t := v.(type) {
			case string:
				f.types |= fastTypeBits[t]
			case []any:
				for _, x := range t {
					s, _ := x.(string)
					f.types |= fastTypeBits[s]
				}
			}
			if f.types == 0 {
				return nil
			}
		case k == "enum":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			f.enum = list
		case k == "const":
			f.hasConst, f.constV = true, v
		case k == "properties":
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			f.props = make(map[string]*fastSchema, len(m))
			for name, sub := range m {
				sm, ok := sub.(map[string]any)
				if !ok {
					return nil
				}
				if f.props[name] = compileFast(sm); f.props[name] == nil {
					return nil
				}
				f.propNames = append(f.propNames, name)
			}
			sort.Strings(f.propNames)
		case k == "required":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, x := range list {
				s, ok := x.(string)
				if !ok {
					return nil
				}
				f.required = append(f.required, s)
			}
		case k == "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			f.closed = !b
		case k == "items":
			sm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			if f.items = compileFast(sm); f.items == nil {
				return nil
			}
		case k == "anyOf":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, x := range list {
				sm, ok := x.(map[string]any)
				if !ok {
					return nil
				}
				sub := compileFast(sm)
				if sub == nil {
					return nil
				}
				f.anyOf = append(f.anyOf, sub)
			}
		case k == "minLength", k == "maxLength", k == "minItems", k == "maxItems":
			n, ok := toFloat(v)
			if !ok || n < 0 || n != math.Trunc(n) {
				return nil
			}
			switch k {
			case "minLength":
				f.minLen = int(n)
			case "maxLength":
				f.maxLen = int(n)
			case "minItems":
				f.minItems = int(n)
			case "maxItems":
				f.maxItems, f.hasMaxItem = int(n), true
			}
		case k == "minimum", k == "maximum":
			n, ok := toFloat(v)
			if !ok {
				return nil
			}
			if k == "minimum" {
				f.min, f.hasMin = n, true
			} else {
				f.max, f.hasMax = n, true
			}
		case k == "pattern":
			s, ok := v.(string)
			if !ok {
				return nil
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil
			}
			f.pattern = re
		default:
			return nil
		}
	}
	for _, name := range f.propNames {
		f.propReq = append(f.propReq, contains(f.required, name))
		f.propKeys = append(f.propKeys, append(jsonstr.Append(nil, name), ':'))
	}
	if len(f.enum) > 0 {
		f.enumStrings = make(map[string]bool, len(f.enum))
		for _, e := range f.enum {
			s, ok := e.(string)
			if !ok {
				f.enumStrings = nil
				break
			}
			f.enumStrings[s] = true
		}
	}
	for _, r := range f.required {
		if f.props[r] == nil {
			f.reqOutside++
		}
	}
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// encodeValid appends the canonical JSON of v when v certainly satisfies
// the schema, validating and encoding in one pass. ok is false when v
// fails (or may fail) the schema or is not plain JSON data.
func (f *fastSchema) encodeValid(b []byte, v any) ([]byte, bool) {
	if str, ok := v.(string); ok && !f.hasConst && len(f.anyOf) == 0 && (f.enum == nil || f.enumStrings != nil) {
		// Strings are checked and written directly: the common case of
		// structured results.
		if f.types != 0 && f.types&fastString == 0 {
			return b, false
		}
		if f.enumStrings != nil && !f.enumStrings[str] {
			return b, false
		}
		if f.minLen > 0 || f.maxLen >= 0 {
			n := utf8.RuneCountInString(str)
			if n < f.minLen || (f.maxLen >= 0 && n > f.maxLen) {
				return b, false
			}
		}
		if f.pattern != nil && !f.pattern.MatchString(str) {
			return b, false
		}
		return jsonstr.Append(b, str), true
	}
	x, isObj := v.(map[string]any)
	if !isObj || len(f.anyOf) > 0 || f.enum != nil || f.hasConst || f.reqOutside > 0 || (f.types != 0 && f.types&fastObject == 0) {
		if !f.valid(v) {
			return b, false
		}
		return appendJSONWith(b, v, f)
	}
	start := len(b)
	b = append(b, '{')
	matched, reqFound := 0, 0
	for i, name := range f.propNames {
		pv, ok := x[name]
		if !ok {
			continue
		}
		if matched > 0 {
			b = append(b, ',')
		}
		matched++
		if f.propReq[i] {
			reqFound++
		}
		b = append(b, f.propKeys[i]...)
		if b, ok = f.props[name].encodeValid(b, pv); !ok {
			return b[:start], false
		}
	}
	if reqFound != len(f.required) || (f.closed && matched != len(x)) {
		return b[:start], false
	}
	if matched != len(x) {
		// Extra keys are allowed: encode the whole object in key order.
		return appendJSON(b[:start], x)
	}
	return append(b, '}'), true
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

func fastTypeOf(v any) uint8 {
	switch n := v.(type) {
	case nil:
		return fastNull
	case bool:
		return fastBool
	case string:
		return fastString
	case map[string]any:
		return fastObject
	case []any:
		return fastArray
	case int, int64:
		return fastInteger | fastNumber
	case float64:
		if n == math.Trunc(n) && !math.IsInf(n, 0) {
			return fastInteger | fastNumber
		}
		return fastNumber
	}
	return 0
}

// valid reports true only when v certainly satisfies the schema.
func (f *fastSchema) valid(v any) bool {
	t := fastTypeOf(v)
	if t == 0 || (f.types != 0 && f.types&t == 0) {
		return false
	}
	if f.enum != nil {
		found := false
		for _, e := range f.enum {
			if fastEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if f.hasConst && !fastEqual(f.constV, v) {
		return false
	}
	for _, sub := range f.anyOf {
		if sub.valid(v) {
			goto anyOK
		}
	}
	if len(f.anyOf) > 0 {
		return false
	}
anyOK:
	switch x := v.(type) {
	case string:
		if f.minLen > 0 || f.maxLen >= 0 {
			n := utf8.RuneCountInString(x)
			if n < f.minLen || (f.maxLen >= 0 && n > f.maxLen) {
				return false
			}
		}
		if f.pattern != nil && !f.pattern.MatchString(x) {
			return false
		}
	case map[string]any:
		for _, r := range f.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		// Look the schema's properties up in the value instead of ranging
		// over the value: lookups are cheaper than map iteration.
		matched := 0
		for _, name := range f.propNames {
			pv, ok := x[name]
			if !ok {
				continue
			}
			matched++
			if !f.props[name].valid(pv) {
				return false
			}
		}
		if f.closed && matched != len(x) {
			return false
		}
	case []any:
		if len(x) < f.minItems || (f.hasMaxItem && len(x) > f.maxItems) {
			return false
		}
		if f.items != nil {
			for _, e := range x {
				if !f.items.valid(e) {
					return false
				}
			}
		}
	}
	if f.hasMin || f.hasMax {
		n, ok := toFloat(v)
		if ok && ((f.hasMin && n < f.min) || (f.hasMax && n > f.max)) {
			return false
		}
	}
	return true
}

// fastEqual compares scalars only; composite values are never "certainly
// equal" here, so they go to the full validator.
func fastEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	fa, ok1 := toFloat(a)
	fb, ok2 := toFloat(b)
	return ok1 && ok2 && fa == fb
}

// appendJSON appends the canonical JSON of v (sorted keys, no HTML
// escaping, encoding/json's number and string forms). ok is false for
// values outside the JSON-like Go types, which callers encode the slow way.
func appendJSON(b []byte, v any) ([]byte, bool) { return appendJSONWith(b, v, nil) }

// appendJSONWith is appendJSON guided by a fast schema: an object whose
// keys are all schema properties is written in the schema's sorted
// property order without collecting and sorting its keys.
func appendJSONWith(b []byte, v any, f *fastSchema) ([]byte, bool) {
	if x, ok := v.(map[string]any); ok && f != nil && len(f.propNames) >= len(x) {
		matched := 0
		for _, name := range f.propNames {
			if _, ok := x[name]; ok {
				matched++
			}
		}
		if matched == len(x) {
			b = append(b, '{')
			first := true
			for _, name := range f.propNames {
				pv, ok := x[name]
				if !ok {
					continue
				}
				if !first {
					b = append(b, ',')
				}
				first = false
				b = jsonstr.Append(b, name)
				b = append(b, ':')
				if b, ok = appendJSONWith(b, pv, f.props[name]); !ok {
					return b, false
				}
			}
			return append(b, '}'), true
		}
	}
	if x, ok := v.([]any); ok && f != nil && f.items != nil {
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJSONWith(b, e, f.items); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return jsonstr.Append(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, false
		}
		return appendJSONFloat(b, x), true
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSON(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		var small [8]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendJSON(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendJSONFloat formats like encoding/json.
func appendJSONFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
