package lsp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib/analysis"
)

func hintText(hs []inlayHint) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%d:%d %s\n", h.Position.Line, h.Position.Character, h.Label)
	}
	return b.String()
}

// TestParameterHints: the names of the parameters that positional
// arguments of builtin calls fill, at the arguments' starts; nothing for
// children, keyword arguments, a same-named argument, spreads, calls of
// functions the file defines, or lines outside the range.
func TestParameterHints(t *testing.T) {
	text := "S = {\"type\": \"object\"}\n" + // line 0
		"t = define_tool(name = \"t\", description = \"d\", execute = lambda input: \"x\")\n" +
		"def evaluate_all(x):\n" +
		"    return x\n" +
		"def main():\n" + // line 4
		"    a = evaluate(agent(\"é🎉\", \"y\"), S)\n" +
		"    b = evaluate(value = agent(\"x\"), schema = S)\n" +
		"    c = agent(\"é\", tool(t))\n" +
		"    d = evaluate(*[agent(\"x\")])\n" +
		"    e = evaluate_all([agent(\"x\")])\n" + // the file's own function
		"    return [a, b, c, d, e, evaluate(\"é\", S)]\n"
	f := analysis.ParseFile("t.star", []byte(text))
	want16 := "5:17 value:\n5:36 schema:\n10:36 value:\n10:41 schema:\n"
	if got := hintText(parameterHints(f, nil, 1, 100, false)); got != want16 {
		t.Errorf("utf-16:\n%swant\n%s", got, want16)
	}
	want8 := "5:17 value:\n5:39 schema:\n10:36 value:\n10:42 schema:\n"
	if got := hintText(parameterHints(f, nil, 1, 100, true)); got != want8 {
		t.Errorf("utf-8:\n%swant\n%s", got, want8)
	}
	if got := hintText(parameterHints(f, nil, 11, 11, false)); got != "10:36 value:\n10:41 schema:\n" {
		t.Errorf("line 11 only:\n%s", got)
	}
	if got := parameterHints(analysis.ParseFile("t.star", []byte("def (\n")), nil, 1, 10, false); len(got) != 0 {
		t.Errorf("a text that never parsed: %v", got)
	}
}
