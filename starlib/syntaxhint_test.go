package starlib_test

import (
	"errors"
	"testing"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
)

// TestExplainSyntax: a syntax error names the bracket left open before
// it, ignoring brackets in strings and comments, and only one that is
// never closed.
func TestExplainSyntax(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"a call left open", "def main():\n    return agent(\"x\", provider = deterministic_agent()\n",
			"x.star:3:1: got outdent, want ','; the ( at 2:17 is never closed"},
		{"a list left open", "x = [1, 2\ny = 3\n", "; the [ at 1:5 is never closed"},
		{"brackets in strings and comments do not count", "x = {\"(\": ')', # ) ]\n  'a': \"\"\"[\n)\"\"\",\ny = 1\n", "; the { at 1:5 is never closed"},
		{"a closed bracket is not named", "x = (1 +)\n", ""},
	} {
		_, err := starlib.FileOptions.Parse("x.star", c.src, 0)
		var se syntax.Error
		if !errors.As(err, &se) {
			t.Fatalf("%s: %v is not a syntax error", c.name, err)
		}
		got := starlib.ExplainSyntax(se, c.src).Error()
		switch {
		case c.want == "" && got != se.Error():
			t.Errorf("%s: %q, want the parser's own %q", c.name, got, se.Error())
		case c.want != "" && len(got) < len(c.want) || c.want != "" && got[len(got)-len(c.want):] != c.want:
			t.Errorf("%s: %q, want it to end with %q", c.name, got, c.want)
		}
	}
}
