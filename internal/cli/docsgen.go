package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/stdlib"
)

// The generated pages of docs/reference: the builtin reference from the
// catalog aml doc prints, and the command reference from the commands'
// own help text and the exit-code and --json code tables. A test in
// this package fails when a page in docs/ differs from what these
// functions write (go test ./internal/cli -run TestGeneratedDocs -update-docs
// rewrites them).

// generatedHeader opens every generated page.
const generatedHeader = "<!-- Generated from the source by `go test ./internal/cli -run TestGeneratedDocs -update-docs`; do not edit. -->\n\n"

// builtinsMarkdown writes docs/reference/builtins.md.
func builtinsMarkdown() []byte {
	var b bytes.Buffer
	b.WriteString(generatedHeader)
	b.WriteString("# Builtin reference\n\n")
	b.WriteString("Every builtin, predeclared value and `@std` module a workflow can use, from the catalog the runtime itself uses (`aml doc` prints the same text; `aml doc NAME` one entry). The [language guide](../language.md) explains how they fit together.\n\n")
	catalog := starlib.Catalog(extensions()...)
	group := ""
	for _, bi := range catalog {
		if bi.Group != group {
			group = bi.Group
			fmt.Fprintf(&b, "- %s:", group)
			sep := " "
			for _, other := range catalog {
				if other.Group == group {
					fmt.Fprintf(&b, "%s[`%s`](#%s)", sep, other.Name, anchor(other.Name))
					sep = ", "
				}
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("- values: [`schema`](#schema), [`json`](#json), [`struct`](#struct)\n")
	b.WriteString("- standard modules:")
	for i, m := range stdlib.Names() {
		sep := ", "
		if i == 0 {
			sep = " "
		}
		fmt.Fprintf(&b, "%s[`%s`](#%s)", sep, m, anchor(m))
	}
	b.WriteString("\n")
	group = ""
	for _, bi := range catalog {
		if bi.Group != group {
			group = bi.Group
			fmt.Fprintf(&b, "\n## %s\n", titleCase(group))
		}
		fmt.Fprintf(&b, "\n### %s\n\n```python\n%s\n```\n\n%s\n", bi.Name, bi.Signature(), bi.Doc)
		if len(bi.Params) > 0 {
			b.WriteString("\n| parameter | type | default | meaning |\n| --- | --- | --- | --- |\n")
			for _, p := range bi.Params {
				name := paramName(p)
				doc := p.Doc
				if !p.OpenKeys {
					for _, k := range p.Keys {
						doc += fmt.Sprintf("<br>`%q` (%s): %s", k.Name, k.Type, k.Doc)
					}
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, cell(p.Type), code(p.Default), cell(doc))
			}
		}
		if bi.Returns != "" {
			fmt.Fprintf(&b, "\nReturns: %s\n", bi.Returns)
		}
		if bi.Example != "" {
			fmt.Fprintf(&b, "\n```python\n%s\n```\n", bi.Example)
		}
	}
	b.WriteString("\n## Values\n")
	for _, v := range values {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n", v.name, v.doc)
		if len(v.members) > 0 {
			b.WriteString("\n| function | meaning |\n| --- | --- |\n")
			for _, m := range v.members {
				fmt.Fprintf(&b, "| `%s` | %s |\n", m[0], cell(m[1]))
			}
		}
	}
	b.WriteString("\n## Standard modules\n\nLoaded with `load(\"@std/NAME\", \"symbol\")`.\n")
	for _, m := range stdlib.Names() {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n", m, stdlib.Doc(m))
		if ms := stdlib.Members(m); len(ms) > 0 {
			b.WriteString("\n| function | meaning |\n| --- | --- |\n")
			for _, mm := range ms {
				fmt.Fprintf(&b, "| `%s` | %s |\n", mm.Signature, cell(mm.Doc))
			}
		}
	}
	return b.Bytes()
}

// cliMarkdown writes docs/reference/cli.md.
func cliMarkdown() []byte {
	var b bytes.Buffer
	b.WriteString(generatedHeader)
	b.WriteString("# Command reference\n\n")
	b.WriteString("What `aml help` and `aml help COMMAND` print, for every command, then the exit codes every command follows and the codes of `--json` output.\n\n")
	b.WriteString("```text\n$ aml help\n")
	b.WriteString(usageSummary)
	b.WriteString("```\n")
	for _, c := range cliCommands() {
		name := strings.Join(c, " ")
		var out bytes.Buffer
		helpOf(c, &out)
		fmt.Fprintf(&b, "\n## aml %s\n\n```text\n%s", name, out.String())
		if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			b.WriteString("\n")
		}
		b.WriteString("```\n")
	}
	b.WriteString("\n## aml and aml-full\n\n" + companionDoc + "\n")
	b.WriteString("\n## Exit codes\n\nEvery command exits with one of these.\n\n| code | meaning |\n| --- | --- |\n")
	for _, e := range exitCodeTable {
		fmt.Fprintf(&b, "| `%d` | %s |\n", e.code, cell(e.meaning))
	}
	b.WriteString("\n## `--json` codes\n\nThe `code` of `aml run --json` (and of the other commands' `--json` output that reports a run), for programs that decide what to do next.\n\n| code | meaning |\n| --- | --- |\n")
	for _, c := range jsonCodeTable {
		fmt.Fprintf(&b, "| `%s` | %s |\n", c.code, cell(c.meaning))
	}
	return b.Bytes()
}

// cliCommands are the commands whose help the CLI reference prints, in
// the order of aml help: those aml help lists, each subcommand on a line
// of its own apart; each is the argument list of its help.
func cliCommands() [][]string {
	var out [][]string
	for _, c := range commands {
		if len(c.lines) > 0 && c.lines[0].sub == "" {
			out = append(out, []string{c.name})
			continue
		}
		for _, l := range c.lines {
			out = append(out, []string{c.name, l.sub})
		}
	}
	return out
}

// helpOf writes the help of the command args names.
func helpOf(args []string, w io.Writer) {
	if len(args) == 1 {
		cmdHelp(args, nil, w, w)
		return
	}
	lookupCommand(args[0]).run([]string{args[1], "-h"}, nil, w, w)
}

// anchor is GitHub's anchor of a heading whose text is s.
func anchor(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// cell makes s fit in one Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.ReplaceAll(s, "\n", "<br>")
}

// code renders a default value as code, or a dash for none.
func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + strings.ReplaceAll(s, "|", "\\|") + "`"
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
