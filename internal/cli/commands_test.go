package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCommandsTable fails when the table of commands and what aml help
// prints disagree: a command listed that Main does not run, or runs but
// the list leaves out, a word that names two commands, or a command
// whose help does not open with its usage.
func TestCommandsTable(t *testing.T) {
	words := map[string]bool{}
	for _, c := range commands {
		for _, w := range append([]string{c.name}, c.aliases...) {
			if words[w] {
				t.Errorf("%q names two commands", w)
			}
			words[w] = true
		}
	}

	// The list of aml help, and the commands it names.
	var listed []string
	for _, l := range strings.Split(usageSummary, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") {
			name := strings.Fields(l)[0]
			if len(listed) == 0 || listed[len(listed)-1] != name {
				listed = append(listed, name)
			}
			if c := lookupCommand(name); c == nil || c.name != name || c.hidden {
				t.Errorf("aml help lists %q, which is not a command of the table", name)
			}
		}
	}
	var inTable []string
	for _, c := range commands {
		if len(c.lines) > 0 {
			inTable = append(inTable, c.name)
			for _, l := range c.lines {
				if !strings.Contains(usageSummary, "\n  "+l.synopsis(c.name)+" ") && !strings.Contains(usageSummary, "\n  "+l.synopsis(c.name)+"\n") {
					t.Errorf("aml help has no line %q", l.synopsis(c.name))
				}
			}
		}
		if !c.hidden && c.help == nil {
			t.Errorf("aml help %s: the command has no help", c.name)
		}
	}
	if !slices.Equal(listed, inTable) {
		t.Errorf("aml help lists\n\t%v\nthe table has\n\t%v", listed, inTable)
	}

	// aml help NAME: the usage of the command, on stdout.
	for _, c := range commands {
		if c.help == nil || c.name == "help" {
			continue
		}
		var stdout, stderr strings.Builder
		if code := Main([]string{"help", c.name}, nil, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
			t.Errorf("aml help %s: exit %d, stderr %q", c.name, code, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "usage: aml "+c.name) {
			t.Errorf("aml help %s does not open with its usage:\n%s", c.name, stdout.String())
		}
	}
	var stdout, stderr strings.Builder
	if code := Main([]string{"help", "help"}, nil, &stdout, &stderr); code != exitOK || stdout.String() != usageSummary {
		t.Errorf("aml help help: exit %d, %q", code, stdout.String())
	}
}

// TestReadmeCommands fails when the table of commands in README.md and
// the commands of aml help disagree: a command the README names that aml
// does not have, or one aml help lists (bar those aml starts itself)
// that the README leaves out.
func TestReadmeCommands(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## Commands\n")
	if !ok {
		t.Fatal("README.md has no Commands section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	named := map[string]bool{}
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "| `aml ") {
			continue
		}
		cell := strings.Split(l, "|")[1]
		for _, m := range regexp.MustCompile("`aml ([a-z-]+)").FindAllStringSubmatch(cell, -1) {
			named[m[1]] = true
			if c := lookupCommand(m[1]); c == nil || len(c.lines) == 0 {
				t.Errorf("README.md names aml %s, which aml help does not list", m[1])
			}
		}
	}
	for _, c := range commands {
		if len(c.lines) > 0 && c.name != "mcp-relay" && !named[c.name] {
			t.Errorf("aml help lists aml %s, which the table of README.md leaves out", c.name)
		}
	}
}

// TestPackageDocListsCommands fails when the command list of the
// package doc (cmd/aml/main.go) and the commands aml help lists disagree.
func TestPackageDocListsCommands(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "cmd", "aml", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	for _, l := range strings.Split(string(src), "\n") {
		if l == "package main" {
			break
		}
		if f := strings.Fields(strings.TrimPrefix(l, "//")); strings.HasPrefix(l, "//\taml ") && len(f) > 1 {
			doc[f[1]] = true
		}
	}
	listed := map[string]bool{}
	for _, c := range commands {
		if len(c.lines) > 0 && !c.hidden {
			listed[c.name] = true
			if !doc[c.name] {
				t.Errorf("aml help lists %q, which the package doc of cmd/aml/main.go leaves out", c.name)
			}
		}
	}
	for name := range doc {
		if !listed[name] {
			t.Errorf("the package doc of cmd/aml/main.go lists %q, which aml help does not", name)
		}
	}
}
