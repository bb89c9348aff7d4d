package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestVSCodeGrammarBuiltins: the VS Code extension's grammar colours as
// AML builtins exactly the names the index of aml doc lists, so a new
// builtin cannot be left plain and a removed one cannot stay coloured.
func TestVSCodeGrammarBuiltins(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "editors", "vscode", "syntaxes", "starlark.tmLanguage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Repository map[string]struct {
			Match string `json:"match"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^\\b\(([a-z0-9_|]+)\)\\b`).FindStringSubmatch(g.Repository["aml-builtin"].Match)
	if m == nil {
		t.Fatalf("the grammar's aml-builtin pattern %q is not \\b(name|...)\\b", g.Repository["aml-builtin"].Match)
	}
	grammar := strings.Split(m[1], "|")
	slices.Sort(grammar)
	var index, errs strings.Builder
	if code := Main([]string{"doc"}, nil, &index, &errs); code != exitOK {
		t.Fatalf("aml doc: exit %d: %s", code, errs.String())
	}
	var names []string
	for _, line := range strings.Split(index.String(), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) > 0 && !strings.HasPrefix(f[0], "@") && !strings.Contains(f[0], ".") {
			names = append(names, f[0])
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if _, found := slices.BinarySearch(grammar, n); !found {
			t.Errorf("aml doc lists %s, which editors/vscode/syntaxes/starlark.tmLanguage.json does not colour as a builtin", n)
		}
	}
	for _, n := range grammar {
		if _, found := slices.BinarySearch(names, n); !found {
			t.Errorf("the grammar colours %s as an AML builtin, which aml doc does not list", n)
		}
	}
}
