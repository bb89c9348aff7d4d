package option_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/option"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"", true}, {"opencode", true}, {"a b", true},
		{" x", false}, {"x\n", false}, {"a\x00b", false}, {"\t", false},
	} {
		err := option.Check("f", "command", c.value, false)
		if (err == nil) != c.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", c.value, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "f: command must be a non-empty, trimmed string without NUL bytes") {
			t.Errorf("Check(%q) message: %v", c.value, err)
		}
	}
}

func TestCheckGiven(t *testing.T) {
	err := option.CheckGiven("local_sandbox", "setup", "", false)
	if err == nil || err.Error() != "local_sandbox: setup must be a non-empty, trimmed string without NUL bytes, got an empty string" {
		t.Fatalf("empty: %v", err)
	}
	if err := option.CheckGiven("f", "x", "ok", false); err != nil {
		t.Fatal(err)
	}
	err = option.CheckGiven("f", "api_key", " sk-secret", true)
	if err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("a secret value must not be quoted: %v", err)
	}
}

func TestCheckAll(t *testing.T) {
	if err := option.CheckAll("x_agent", map[string]string{"model": "m", "empty": ""}); err != nil {
		t.Fatal(err)
	}
	err := option.CheckAll("x_agent", map[string]string{"model": " m", "api_key": "k\x00"}, "api_key")
	if err == nil || !strings.HasPrefix(err.Error(), "x_agent: api_key must be") || strings.Contains(err.Error(), "k\x00") {
		t.Fatalf("first bad option in name order, unquoted secret: %v", err)
	}
}
