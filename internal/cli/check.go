package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

const checkUsage = `usage: aml check [flags] FILE|DIR...

Checks workflow files without running them: syntax, undefined names,
unknown builtins and keyword arguments, wrong arity, literal values a
builtin rejects (access = "rw", a negative max_depth, an unknown
permissions key), load() of a missing file or symbol and load cycles,
configure() placement, the placement rules of the evaluator for the node
trees the entry function returns literally (tool() outside agent(), text
after follow_up(), file() with no scope, ...), and lint warnings
(unused load, unused variable, ...). Nothing is evaluated and no provider
is constructed: what only exists at run time (computed values, the
nodes functions build) is checked when the workflow runs. A DIR means
every .star file below it.

Output: one "file:line:col: severity: message [code]" line per problem,
or with --json one JSON array of {file, line, col, endLine, endCol,
severity, code, message, suggestion}. Columns count runes from 1.

Exit status: 1 when any error was found (warnings alone do not fail), 2
for usage errors and unreadable paths, 0 otherwise.

Flags:
`

// checkDiagnostic is the --json form of a diagnostic.
type checkDiagnostic struct {
	File       string `json:"file"`
	Line       int32  `json:"line"`
	Col        int32  `json:"col"`
	EndLine    int32  `json:"endLine"`
	EndCol     int32  `json:"endCol"`
	Severity   string `json:"severity"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion,omitempty"`
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", checkUsage, stderr)
	asJSON := fs.Bool("json", false, "print one JSON array of diagnostics")
	entry := fs.String("entry", "main", "entry function whose returned trees get the placement check")
	noLint := fs.Bool("no-lint", false, "leave out the lint warnings")
	paths, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(paths) == 0 {
		fmt.Fprint(stderr, checkUsage)
		return exitUsage
	}
	files, err := analysis.Files(paths)
	if err != nil {
		fmt.Fprintf(stderr, "aml check: %v\n", err)
		return exitUsage
	}
	opts := &analysis.Options{Extensions: extensions(), Entry: *entry, NoLint: *noLint, Lint: linked.Lint}
	var out []checkDiagnostic
	failed := false
	for _, file := range files {
		src, err := starlib.ReadSource(file)
		if err != nil {
			fmt.Fprintf(stderr, "aml check: %v\n", err)
			return exitUsage
		}
		for _, d := range analysis.Analyze(file, src, opts).Diagnostics {
			failed = failed || d.Severity == analysis.Error
			if !*asJSON {
				fmt.Fprintln(stdout, d.String())
				continue
			}
			at := d.At()
			out = append(out, checkDiagnostic{File: d.File, Line: at.Line, Col: at.Col, EndLine: d.End.Line, EndCol: d.End.Col,
				Severity: d.Severity.String(), Code: d.Code, Message: d.Message, Suggestion: d.Suggestion})
		}
	}
	if *asJSON {
		if out == nil {
			out = []checkDiagnostic{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	}
	if failed {
		return exitFailure
	}
	return exitOK
}

const fmtUsage = `usage: aml fmt [-w] [-d] [-l] FILE|DIR...

Formats workflow files the way buildifier formats Starlark, changing
layout only: statements (load() included) and call arguments keep their
order. Without flags the formatted source is printed; -w writes it back
to files whose formatting differs, -d prints a unified diff, -l lists the
files whose formatting differs. A DIR means every .star file below it.

Exit status: 1 when a file cannot be parsed or formatted (nothing is
written for it), 2 for usage errors and unreadable paths, 0 otherwise.

Flags:
`

func cmdFmt(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fmt", fmtUsage, stderr)
	write := fs.Bool("w", false, "write the result to the file instead of stdout")
	showDiff := fs.Bool("d", false, "print a diff instead of the formatted source")
	list := fs.Bool("l", false, "list the files whose formatting differs")
	paths, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(paths) == 0 {
		fmt.Fprint(stderr, fmtUsage)
		return exitUsage
	}
	files, err := analysis.Files(paths)
	if err != nil {
		fmt.Fprintf(stderr, "aml fmt: %v\n", err)
		return exitUsage
	}
	code = exitOK
	for _, file := range files {
		src, err := starlib.ReadSource(file)
		if err != nil {
			fmt.Fprintf(stderr, "aml fmt: %v\n", err)
			code = exitUsage
			continue
		}
		out, err := analysis.Format(file, src)
		if err != nil {
			fmt.Fprintf(stderr, "aml fmt: %v\n", err)
			if code == exitOK {
				code = exitFailure
			}
			continue
		}
		changed := !bytes.Equal(src, out)
		if *list && changed {
			fmt.Fprintln(stdout, file)
		}
		if *showDiff && changed {
			_, _ = stdout.Write(diff.Diff(file+".orig", src, file, out))
		}
		if *write && changed {
			info, err := os.Stat(file)
			if err != nil {
				fmt.Fprintf(stderr, "aml fmt: %v\n", err)
				code = exitUsage
				continue
			}
			// Whole or not at all: a kill or a full disk mid-write
			// leaves the source as it was.
			if err := durable.WriteFile(file, out, info.Mode().Perm()); err != nil {
				fmt.Fprintf(stderr, "aml fmt: %v\n", err)
				if code == exitOK {
					code = exitFailure
				}
				continue
			}
		}
		if !*write && !*showDiff && !*list {
			_, _ = stdout.Write(out)
		}
	}
	return code
}
