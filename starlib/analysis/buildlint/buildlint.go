// Package buildlint is the buildtools lint of workflow files: the
// generic Starlark warnings of buildifier (unused loads, uninitialized
// and redefined variables, unreachable code, ...), as analysis.Finding
// values for analysis.Options.Lint.
//
// It is a package of its own because buildtools brings protocol
// buffers with it, whose initialisation every start of a program that
// links them pays: aml-full links it (aml check, the language server),
// aml does not.
package buildlint

import (
	"fmt"

	"github.com/bazelbuild/buildtools/build"
	"github.com/bazelbuild/buildtools/warn"

	"github.com/aml-go/aml/starlib/analysis"
)

// Warnings are the buildtools warnings reported for workflow files: the
// generic Starlark ones (the others concern Bazel). unused-variable is
// reported by package analysis itself, over the resolver's bindings:
// buildtools' own takes time quadratic in the number of functions (a
// second for a 200 KB file).
var Warnings = warnings()

func warnings() []string {
	var out []string
	for _, w := range []string{
		"load", "uninitialized", "unreachable", "no-effect",
		"redefined-variable", "return-value", "integer-division", "list-append",
		"dict-concatenation", "string-iteration", "confusing-name",
	} {
		// An unknown name would make buildtools exit the process.
		if _, ok := warn.FileWarningMap[w]; ok {
			out = append(out, w)
		}
	}
	return out
}

// Findings returns the buildtools warnings of src, the text of the file
// path. A file buildtools cannot parse (it parses a little differently)
// gets none: the syntax error, if any, is reported by the analysis. It
// is safe to call concurrently, and it does not write into src.
func Findings(path string, src []byte) []analysis.Finding {
	var out []analysis.Finding
	err := guard(func() error {
		// buildtools appends a newline to the slice it is given: capped
		// at its length, the append copies instead of writing into
		// src's spare capacity (shared by the language server's
		// requests).
		f, err := build.ParseDefault(path, src[:len(src):len(src)])
		if err != nil {
			return err
		}
		for _, fd := range warn.FileWarnings(f, Warnings, nil, warn.ModeWarn, nil) {
			af := analysis.Finding{Category: fd.Category, Message: fd.Message,
				StartLine: fd.Start.Line, StartRune: fd.Start.LineRune, EndLine: fd.End.Line, EndRune: fd.End.LineRune}
			if r := fd.Replacement; r != nil {
				af.Replacement = &analysis.Edit{Description: r.Description, Start: r.Start, End: r.End, Text: r.Content}
			}
			out = append(out, af)
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

// guard runs fn, turning a panic of buildtools (which has a few on odd
// input) into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("buildtools failed on this input: %v", r)
		}
	}()
	return fn()
}
