package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib/analysis"
)

// TestLoadOnTop: a load() after a statement other than the module
// docstring is a warning at the load, saying where it belongs; loads at
// the top, after the docstring and comments, are not reported.
func TestLoadOnTop(t *testing.T) {
	for _, c := range []struct {
		src  string
		want string // "line:col above N" of each warning
	}{
		{"load(\"@std/text\", \"dedent\")\nx = dedent(\"a\")\n", ""},
		{"\"\"\"Doc.\"\"\"\n\n# Comment.\nload(\"@std/text\", \"dedent\")\nload(\"@std/path\", \"join\")\nx = dedent(join(\"a\"))\n", ""},
		{"print(1)\nload(\"@std/text\", \"dedent\")\nx = dedent(\"a\")\n", "2:1 above 1"},
		{"\"\"\"Doc.\"\"\"\nload(\"@std/text\", \"dedent\")\nx = 1\n\nload(\"@std/path\", \"join\")\nload(\"@std/path\", j = \"join\")\ny = dedent(join(j(\"a\")))\n", "5:1 above 3,6:1 above 3"},
		{"\"\"\"Doc.\"\"\"\n\"\"\"Not a docstring.\"\"\"\nload(\"@std/text\", \"dedent\")\nx = dedent(\"a\")\n", "3:1 above 2"},
		{"print(1)\nload(\"@std/text\", \"dedent\")  # buildifier: disable=load-on-top\nx = dedent(\"a\")\n", ""},
	} {
		f := analysis.Analyze("w.star", []byte(c.src), nil)
		var got []string
		for _, d := range f.Diagnostics {
			if d.Code != analysis.CodeLoadOnTop {
				continue
			}
			if d.Severity != analysis.Warning {
				t.Errorf("%q: %v is not a warning", c.src, d)
			}
			var above int
			if i := strings.Index(d.Message, "above line "); i >= 0 {
				fmt.Sscanf(d.Message[i:], "above line %d", &above)
			}
			got = append(got, fmt.Sprintf("%d:%d above %d", d.Start.Line, d.Start.Col, above))
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("%q: warnings %v, want %s\n%v", c.src, got, c.want, f.Diagnostics)
		}
	}
}
