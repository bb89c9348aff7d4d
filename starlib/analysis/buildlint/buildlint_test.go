package buildlint_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib/analysis/buildlint"
)

// TestFindings: a buildtools warning arrives with its category, its
// span and its fix, and the source is not written (not even its spare
// capacity, which a language server's other requests read).
func TestFindings(t *testing.T) {
	text := "load(\"@std/text\", \"dedent\")\n\nx = 1\n"
	src := make([]byte, len(text), len(text)+8)
	copy(src, text)
	spare := src[len(src):cap(src)]
	for i := range spare {
		spare[i] = '#'
	}
	fs := buildlint.Findings("w.star", src)
	if len(fs) != 1 || fs[0].Category != "load" || fs[0].StartLine != 1 || fs[0].EndLine != 1 || !strings.Contains(fs[0].Message, "dedent") {
		t.Fatalf("findings %+v", fs)
	}
	if string(src) != text || strings.Trim(string(spare), "#") != "" {
		t.Errorf("the source was written: %q, spare %q", src, spare)
	}
	if got := buildlint.Findings("w.star", []byte("def f(:\n")); got != nil {
		t.Errorf("a file buildtools cannot parse: %+v", got)
	}
}
