package analysis_test

import (
	"testing"
	"time"

	"github.com/aml-go/aml/starlib/analysis"
)

// FuzzAnalyze: any text, valid or not, is analyzed without a panic and
// in bounded time, and every diagnostic lies within the file.
func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{
		"def main():\n    return agent(\"x\", follow_up(\"y\"))\n",
		"load(\"@std/text\", \"dedent\")\nconfigure(max_depth = -1)\n",
		"def main(:\n", "x = {\"a\": [1, 2, (3,)]}\n", "sandbox(access = \"rw\", **{})\n",
		"agent(permissions = {1: 2, \"filesystem\": \"x\"})\n", "\xff\xfe", "",
		"\"\\\xea", // once panicked inside the formatter
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		file := analysis.Analyze("fuzz.star", []byte(src), nil)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("analysis took %v", d)
		}
		lines := int32(1) // the scanner ends a line at \n, \r\n and \r
		for i := 0; i < len(src); i++ {
			if src[i] == '\n' || src[i] == '\r' && (i+1 == len(src) || src[i+1] != '\n') {
				lines++
			}
		}
		for _, d := range file.Diagnostics {
			if d.Start.Line < 1 || d.Start.Line > lines+1 || d.End.Line < d.Start.Line && d.End.Line != 0 {
				t.Fatalf("diagnostic outside the file: %v (end %v)", d, d.End)
			}
		}
		_, _ = analysis.Format("fuzz.star", []byte(src)) // must not panic
	})
}
