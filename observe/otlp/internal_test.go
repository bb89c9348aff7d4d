package otlp

import (
	"errors"
	"math"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		in       string
		insecure bool
		host     string
		path     string
		plain    bool
	}{
		{"http://localhost:4318", false, "localhost:4318", "/v1/traces", true},
		{"http://localhost:4318/", false, "localhost:4318", "/v1/traces", true},
		{"https://collector.example:4318", true, "collector.example:4318", "/v1/traces", false},
		{"localhost:4318", false, "localhost:4318", "/v1/traces", false},
		{"localhost:4318", true, "localhost:4318", "/v1/traces", true},
		{"http://c:4318/v1/traces", false, "c:4318", "/v1/traces", true},
		{"http://c:4318/prefix/", false, "c:4318", "/prefix/v1/traces", true},
		{"c:4318/prefix", false, "c:4318", "/prefix/v1/traces", false},
		{" http://[::1]:4318 ", false, "[::1]:4318", "/v1/traces", true},
	} {
		host, path, plain, err := parseEndpoint(c.in, c.insecure)
		if err != nil || host != c.host || path != c.path || plain != c.plain {
			t.Errorf("parseEndpoint(%q, %v) = %q %q %v %v; want %q %q %v", c.in, c.insecure, host, path, plain, err, c.host, c.path, c.plain)
		}
	}
	for _, in := range []string{"ftp://h:1", "http://", "http://u:p@h:1", "http://h:1/#x", "://h"} {
		if _, _, _, err := parseEndpoint(in, false); err == nil {
			t.Errorf("parseEndpoint(%q): no error", in)
		}
	}
}

type stringer struct{}

func (stringer) String() string { return "str" }

func TestToAttribute(t *testing.T) {
	for _, c := range []struct {
		in   any
		want attribute.Value
	}{
		{true, attribute.BoolValue(true)},
		{int64(-3), attribute.Int64Value(-3)},
		{1.5, attribute.Float64Value(1.5)},
		{"s", attribute.StringValue("s")},
		{[]string{"a", "b"}, attribute.StringSliceValue([]string{"a", "b"})},
		{7, attribute.Int64Value(7)},
		{int32(7), attribute.Int64Value(7)},
		{uint64(math.MaxUint64), attribute.StringValue("18446744073709551615")},
		{float32(0.5), attribute.Float64Value(0.5)},
		{[]any{"x", "y"}, attribute.StringSliceValue([]string{"x", "y"})},
		{[]any{"x", 1}, attribute.StringValue(`["x",1]`)},
		{[]int64{1, 2}, attribute.Int64SliceValue([]int64{1, 2})},
		{errors.New("boom"), attribute.StringValue("boom")},
		{stringer{}, attribute.StringValue("str")},
		{map[string]int{"a": 1}, attribute.StringValue(`{"a":1}`)},
	} {
		kv, ok := toAttribute("k", c.in)
		if !ok || kv.Key != "k" || kv.Value != c.want {
			t.Errorf("toAttribute(%#v) = %v %v, want %v", c.in, kv.Value.String(), ok, c.want.String())
		}
	}
	if _, ok := toAttribute("k", nil); ok {
		t.Error("nil kept")
	}
}
