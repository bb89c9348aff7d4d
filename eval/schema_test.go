package eval_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

func TestNewSchemaRejectsInvalidDocuments(t *testing.T) {
	cases := map[string]struct {
		doc  map[string]any
		want string
	}{
		"unknown type":       {map[string]any{"type": "objekt"}, `"type" "objekt" is not a JSON Schema type`},
		"nested type":        {map[string]any{"properties": map[string]any{"a": map[string]any{"type": "str"}}}, `#/properties/a: "type" "str"`},
		"negative length":    {map[string]any{"minLength": int64(-1)}, `"minLength" must be a non-negative integer`},
		"bad pattern":        {map[string]any{"pattern": "("}, `"pattern" "(" is not a valid regular expression`},
		"wrong keyword type": {map[string]any{"minimum": "x"}, "invalid JSON Schema"},
		"dangling ref":       {map[string]any{"$ref": "#/nope"}, "invalid JSON Schema"},
		"duplicate required": {map[string]any{"required": []any{"a", "a"}}, `"required" lists "a" twice`},
		"not JSON":           {map[string]any{"const": math.NaN()}, "not JSON data"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := eval.NewSchema(c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestSchemaValidate(t *testing.T) {
	s, err := eval.NewSchema(map[string]any{
		"type":     "object",
		"required": []any{"n"},
		"properties": map[string]any{
			"n":    map[string]any{"type": "integer", "minimum": 0},
			"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.RootTypeObject() {
		t.Fatal("root type object not detected")
	}
	for _, ok := range []any{map[string]any{"n": int64(3)}, map[string]any{"n": 3.0, "tags": []any{"a"}}} {
		if err := s.Validate(ok); err != nil {
			t.Errorf("Validate(%v): %v", ok, err)
		}
	}
	for v, want := range map[string]any{
		"/properties/n: minimum": map[string]any{"n": int64(-1)},
		"/properties/n: type":    map[string]any{"n": "3"},
		"required":               map[string]any{},
		"/properties/tags/items": map[string]any{"n": int64(1), "tags": []any{int64(1)}},
	} {
		if err := s.Validate(want); err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("Validate(%v) = %v, want an error mentioning %q", want, err, v)
		}
	}
	if got := s.JSON(); !strings.HasPrefix(got, `{"properties":`) {
		t.Errorf("canonical JSON %s", got)
	}
}

func TestCanonicalJSON(t *testing.T) {
	got, err := eval.CanonicalJSON(map[string]any{"b": []any{int64(1), 2.5, nil, true}, "a": "<&>"})
	if err != nil || got != `{"a":"<&>","b":[1,2.5,null,true]}` {
		t.Fatalf("%s %v", got, err)
	}
	for _, bad := range []any{math.Inf(1), map[string]any{"x": struct{}{}}, []any{func() {}}} {
		if _, err := eval.CanonicalJSON(bad); err == nil {
			t.Errorf("CanonicalJSON(%v) accepted", bad)
		}
	}
}

// FuzzSchemaFastPath checks the fast validator never accepts a value the
// full JSON Schema validator rejects, and that the fast canonical encoder
// matches encoding/json's output.
func FuzzSchemaFastPath(f *testing.F) {
	f.Add([]byte(`{"n": 3, "s": "ab", "t": ["x"], "e": "low"}`))
	f.Add([]byte(`{"n": 3.0, "s": "\u2028<&>", "t": [], "e": null}`))
	f.Add([]byte(`{"n": -1.5e-7, "s": "\u00e9\u00e9\u00e9", "x": 1}`))
	f.Add([]byte(`[1, 2.5, "a", true, null, {"b": {}}]`))
	schemas := []map[string]any{
		{"type": "object", "required": []any{"n", "s"}, "additionalProperties": false, "properties": map[string]any{
			"n": map[string]any{"type": "integer", "minimum": 0, "maximum": 10},
			"s": map[string]any{"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z\u00e9]+$"},
			"t": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 2},
			"e": map[string]any{"anyOf": []any{map[string]any{"enum": []any{"low", "high", 1}}, map[string]any{"type": "null"}}},
		}},
		{"type": []any{"array", "number"}, "items": map[string]any{"const": 1}},
		{"enum": []any{1, "1", true, nil}},
	}
	compiled := make([]*eval.Schema, len(schemas))
	for i, d := range schemas {
		s, err := eval.NewSchema(d)
		if err != nil {
			f.Fatal(err)
		}
		compiled[i] = s
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		got, err := eval.CanonicalJSON(v)
		if err != nil {
			t.Fatalf("CanonicalJSON(%s): %v", data, err)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // encoding/json sorts map keys too
		if want := strings.TrimSuffix(b.String(), "\n"); got != want {
			t.Fatalf("CanonicalJSON = %s, encoding/json = %s", got, want)
		}
		for i, s := range compiled {
			fast := s.Validate(v) == nil
			full := eval.FullValidateForTest(s, v) == nil
			if fast != full {
				t.Fatalf("schema %d: fast path says %v, full validator says %v for %s", i, fast, full, data)
			}
			text, err := s.ValidateCanonical(v)
			if (err == nil) != full {
				t.Fatalf("schema %d: ValidateCanonical error %v, full validator valid=%v for %s", i, err, full, data)
			}
			if err == nil && text != got {
				t.Fatalf("schema %d: ValidateCanonical = %s, CanonicalJSON = %s", i, text, got)
			}
		}
	})
}
