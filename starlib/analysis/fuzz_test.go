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

// oneFile is a Program of one file.
type oneFile struct{ f *analysis.File }

func (p oneFile) File(path string) *analysis.File {
	if path == p.f.Path {
		return p.f
	}
	return nil
}

func (oneFile) Loaders(string) []string { return nil }

// FuzzQueries: every editor query, at any offset of any text, and again
// after an insertion with the old parse standing for the new text (as
// while typing), returns without a panic.
func FuzzQueries(f *testing.F) {
	for _, s := range []string{
		"load(\"@std/text\", \"dedent\")\ndef main(x, y = 1):\n    \"\"\"Doc.\"\"\"\n    return agent(x, sandbox(access = \"read-only\"), model = \"m\")\n",
		"x = schema.object(a = schema.string())\n", "agent(\"🎉\", acc", "load(\"", "def f(:\n", "\"\"\"unterminated",
	} {
		f.Add(s, 10, "x")
		f.Add(s, 0, "(")
	}
	f.Fuzz(func(t *testing.T, src string, off int, insert string) {
		file := analysis.ParseFile("f.star", []byte(src))
		q := &analysis.Query{Program: oneFile{file}}
		if off < 0 {
			off = -off
		}
		off %= len(src) + 1
		run := func(text string, at int) {
			q.Complete("f.star", file, []byte(text), at)
			q.Signature(file, []byte(text), at)
			p := analysis.NewLines([]byte(text)).Position(&file.Path, at)
			q.Hover(file, p)
			q.Definition(file, p)
			q.References(file, p, true)
			_, _ = q.Rename(file, p, "renamed")
			analysis.Symbols(file)
		}
		run(src, off)
		run(src[:off]+insert+src[off:], off+len(insert))
	})
}
