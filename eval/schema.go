package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a compiled JSON Schema (draft 2020-12) that validates
// structured agent results and tool input and output. It is immutable and
// safe for concurrent use.
type Schema struct {
	doc      map[string]any
	resolved *jsonschema.Resolved
	fast     *fastSchema
	text     string
	output   *OutputRequest
}

// NewSchema compiles a JSON Schema document held as JSON-like Go values
// (map[string]any, []any, string, float64/int64, bool, nil). A document
// that is not a valid JSON Schema is rejected with an error naming the
// offending keyword and its location.
func NewSchema(doc map[string]any) (*Schema, error) {
	text, err := CanonicalJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON data: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	if err := checkSchema(&s, "#"); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	var copyDoc map[string]any
	if err := json.Unmarshal([]byte(text), &copyDoc); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	sc := &Schema{doc: copyDoc, resolved: resolved, fast: compileFast(copyDoc), text: text}
	sc.output = &OutputRequest{JSONSchema: copyDoc, schema: sc}
	return sc, nil
}

// Document returns the schema document. Callers must not modify it.
func (s *Schema) Document() map[string]any { return s.doc }

// JSON returns the canonical JSON text of the document (sorted keys).
func (s *Schema) JSON() string { return s.text }

// RootTypeObject reports whether the schema's root accepts only objects,
// as providers that pass tool input as named arguments require.
func (s *Schema) RootTypeObject() bool {
	switch t := s.doc["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return len(t) == 1 && t[0] == "object"
	}
	return false
}

// Validate reports whether v satisfies the schema. The error lists the
// failing location and rule.
func (s *Schema) Validate(v any) error {
	if s.fast != nil && s.fast.valid(v) {
		return nil
	}
	if err := s.resolved.Validate(v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "validating root: ")
		return errors.New(strings.ReplaceAll(msg, "validating /", "/"))
	}
	return nil
}

var validTypes = map[string]bool{"null": true, "boolean": true, "object": true, "array": true, "number": true, "string": true, "integer": true}

// checkSchema rejects structurally invalid keywords the JSON decoding lets
// through: unknown type names, negative counts and bad patterns.
func checkSchema(s *jsonschema.Schema, at string) error {
	if s == nil {
		return nil
	}
	types := s.Types
	if s.Type != "" {
		types = append(types, s.Type)
	}
	for _, t := range types {
		if !validTypes[t] {
			return fmt.Errorf(`%s: "type" %q is not a JSON Schema type (want one of array, boolean, integer, null, number, object, string)`, at, t)
		}
	}
	for name, p := range map[string]*int{
		"minLength": s.MinLength, "maxLength": s.MaxLength, "minItems": s.MinItems, "maxItems": s.MaxItems,
		"minProperties": s.MinProperties, "maxProperties": s.MaxProperties, "minContains": s.MinContains, "maxContains": s.MaxContains,
	} {
		if p != nil && *p < 0 {
			return fmt.Errorf("%s: %q must be a non-negative integer, got %d", at, name, *p)
		}
	}
	if s.MultipleOf != nil && *s.MultipleOf <= 0 {
		return fmt.Errorf(`%s: "multipleOf" must be greater than 0`, at)
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			return fmt.Errorf(`%s: "pattern" %q is not a valid regular expression: %w`, at, s.Pattern, err)
		}
	}
	seen := map[string]bool{}
	for _, r := range s.Required {
		if seen[r] {
			return fmt.Errorf(`%s: "required" lists %q twice`, at, r)
		}
		seen[r] = true
	}
	for _, sub := range []struct {
		key string
		s   *jsonschema.Schema
	}{
		{"items", s.Items}, {"additionalProperties", s.AdditionalProperties}, {"not", s.Not}, {"if", s.If},
		{"then", s.Then}, {"else", s.Else}, {"contains", s.Contains}, {"propertyNames", s.PropertyNames},
		{"additionalItems", s.AdditionalItems}, {"unevaluatedItems", s.UnevaluatedItems}, {"unevaluatedProperties", s.UnevaluatedProperties},
	} {
		if err := checkSchema(sub.s, at+"/"+sub.key); err != nil {
			return err
		}
	}
	for _, list := range []struct {
		key string
		ss  []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}, {"prefixItems", s.PrefixItems}, {"items", s.ItemsArray}} {
		for i, sub := range list.ss {
			if err := checkSchema(sub, fmt.Sprintf("%s/%s/%d", at, list.key, i)); err != nil {
				return err
			}
		}
	}
	for _, m := range []struct {
		key string
		ss  map[string]*jsonschema.Schema
	}{{"properties", s.Properties}, {"patternProperties", s.PatternProperties}, {"$defs", s.Defs}, {"definitions", s.Definitions}, {"dependentSchemas", s.DependentSchemas}} {
		keys := make([]string, 0, len(m.ss))
		for k := range m.ss {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if m.key == "patternProperties" {
				if _, err := regexp.Compile(k); err != nil {
					return fmt.Errorf(`%s/patternProperties: %q is not a valid regular expression: %w`, at, k, err)
				}
			}
			if err := checkSchema(m.ss[k], at+"/"+m.key+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateCanonical validates v and returns its canonical JSON text.
func (s *Schema) ValidateCanonical(v any) (string, error) {
	var small [256]byte
	b, err := s.appendValidCanonical(small[:0], v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendValidCanonical validates v and appends its canonical JSON to dst.
func (s *Schema) appendValidCanonical(dst []byte, v any) ([]byte, error) {
	if s.fast != nil {
		if b, ok := s.fast.encodeValid(dst, v); ok {
			return b, nil
		}
	}
	if err := s.Validate(v); err != nil {
		return dst, err
	}
	text, err := CanonicalJSON(v)
	if err != nil {
		return dst, err
	}
	return append(dst, text...), nil
}

// CanonicalJSON encodes JSON-like Go values with sorted object keys and no
// HTML escaping, the form structured results take in prompt text. NaN and
// infinities, and values that are not JSON data, are errors.
func CanonicalJSON(v any) (string, error) {
	var small [256]byte
	if b, ok := appendJSON(small[:0], v); ok {
		return string(b), nil
	}
	if err := checkJSONValue(v, 0); err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// maxJSONDepth bounds nesting of JSON values, so hostile data cannot
// exhaust the stack.
const maxJSONDepth = 1000

// checkJSONValue accepts exactly the JSON-like Go values.
func checkJSONValue(v any, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("value is nested deeper than %d levels", maxJSONDepth)
	}
	switch v := v.(type) {
	case nil, bool, string, int, int64, int32, uint, uint32, uint64, json.Number:
		return nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%v is not a JSON number", v)
		}
		return nil
	case float32:
		return checkJSONValue(float64(v), depth)
	case map[string]any:
		for _, x := range v {
			if err := checkJSONValue(x, depth+1); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for _, x := range v {
			if err := checkJSONValue(x, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("a %T is not JSON data", v)
}
