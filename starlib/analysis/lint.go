package analysis

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bazelbuild/buildtools/build"
	"github.com/bazelbuild/buildtools/warn"
	"go.starlark.net/syntax"
)

// LintWarnings are the buildtools warnings reported for workflow files:
// the generic Starlark ones (the others concern Bazel).
var LintWarnings = lintWarnings()

func lintWarnings() []string {
	var out []string
	for _, w := range []string{
		"load", "unused-variable", "uninitialized", "unreachable", "no-effect",
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

// lint reports the buildtools warnings of src. A file buildtools cannot
// parse (it parses a little differently) gets none: the syntax error, if
// any, was reported already.
func (a *analyzer) lint(path string, src []byte) {
	var findings []*warn.Finding
	if err := guard(func() error {
		f, err := build.ParseDefault(path, src)
		if err != nil {
			return err
		}
		findings = warn.FileWarnings(f, LintWarnings, nil, warn.ModeWarn, nil)
		return nil
	}); err != nil {
		return
	}
	var errs []Diagnostic // a warning inside an error's range is left out
	for _, d := range a.file.Diagnostics {
		if d.Severity == Error {
			errs = append(errs, d)
		}
	}
	for _, fd := range findings {
		p := syntax.MakePosition(&a.file.Path, int32(fd.Start.Line), int32(fd.Start.LineRune))
		if slices.ContainsFunc(errs, func(d Diagnostic) bool { return !before(p, d.Start) && (p == d.Start || before(p, d.End)) }) {
			continue
		}
		msg, _, _ := strings.Cut(fd.Message, "\n") // the first line; the rest is buildifier advice
		d := Diagnostic{
			Severity: Warning,
			Code:     fd.Category,
			Message:  strings.TrimSpace(msg),
			Start:    syntax.MakePosition(&a.file.Path, int32(fd.Start.Line), int32(fd.Start.LineRune)),
			End:      syntax.MakePosition(&a.file.Path, int32(fd.End.Line), int32(fd.End.LineRune)),
		}
		if fd.Replacement != nil {
			d.Edit = &Edit{Description: fd.Replacement.Description, Start: fd.Replacement.Start, End: fd.Replacement.End, Text: fd.Replacement.Content}
		}
		a.report(d)
	}
}

// Format returns src formatted by buildtools (as buildifier formats a
// generic Starlark file).
func Format(path string, src []byte) (out []byte, err error) {
	if i := firstInvalidUTF8(src); i >= 0 {
		return nil, fmt.Errorf("%s is not UTF-8 text: invalid byte at offset %d", path, i)
	}
	err = guard(func() error {
		f, err := build.ParseDefault(path, src)
		if err != nil {
			return err
		}
		out = build.Format(f)
		return nil
	})
	return out, err
}

// guard runs fn, turning a panic of buildtools (which has a few on odd
// input) into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the formatter failed on this input: %v", r)
		}
	}()
	return fn()
}
