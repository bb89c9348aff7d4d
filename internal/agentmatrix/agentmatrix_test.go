package agentmatrix_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/agentmatrix"
)

// root is the module root, from this package's directory.
const root = "../.."

// TestEveryCellHasATest: every agent has a proof for every capability,
// and each proof names a test function declared in the agent's package
// (a subtest's parent, for "TestName/sub").
func TestEveryCellHasATest(t *testing.T) {
	for _, a := range agentmatrix.Agents {
		dir := filepath.Join(root, strings.TrimPrefix(a.Package, "github.com/aml-go/aml/"))
		tests := declaredTests(t, dir)
		for _, c := range agentmatrix.Capabilities {
			p, ok := a.Cells[c.Key]
			if !ok || p.Test == "" {
				t.Errorf("%s: no proof of %q", a.Name, c.Key)
				continue
			}
			name, _, _ := strings.Cut(p.Test, "/")
			if !tests[name] {
				t.Errorf("%s, %s: %s is not a test of %s", a.Name, c.Key, name, dir)
			}
		}
		if len(a.Cells) != len(agentmatrix.Capabilities) {
			t.Errorf("%s: %d cells for %d capabilities", a.Name, len(a.Cells), len(agentmatrix.Capabilities))
		}
	}
}

// declaredTests are the Test functions of the _test.go files in dir.
func declaredTests(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s: %v", dir, err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				out[fn.Name.Name] = true
			}
		}
	}
	return out
}

// TestTableInDocs: docs/agents.md holds the table as Markdown renders it,
// between its two marker comments.
func TestTableInDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- agent matrix: begin -->\n", "<!-- agent matrix: end -->"
	_, rest, ok := strings.Cut(string(b), begin)
	doc, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("docs/agents.md has no %q ... %q section", strings.TrimSpace(begin), end)
	}
	if want := agentmatrix.Markdown(); doc != want {
		t.Fatalf("docs/agents.md's agent table differs from the one the tests prove; put this between its markers:\n%s", want)
	}
}

// TestCheck: the log's results land in their cells; a failed or absent
// test is a problem, a skipped one is shown but is not.
func TestCheck(t *testing.T) {
	var log strings.Builder
	for _, a := range agentmatrix.Agents {
		log.WriteString("=== RUN   TestSomething\n")
		seen := map[string]bool{}
		for _, c := range agentmatrix.Capabilities {
			name := a.Cells[c.Key].Test
			if seen[name] {
				continue
			}
			seen[name] = true
			result := "PASS"
			switch {
			case a.Name == "Codex" && c.Key == "docker":
				result = "SKIP"
			case a.Name == "GLM" && c.Key == "cancel":
				result = "FAIL"
			case a.Name == "Pi" && c.Key == "mcp-http":
				continue // absent
			}
			indent := ""
			if strings.Contains(name, "/") {
				indent = "    "
			}
			log.WriteString(indent + "--- " + result + ": " + name + " (1.00s)\n")
		}
		log.WriteString("ok  \t" + a.Package + "\t12.3s\n")
	}
	table, problems, err := agentmatrix.Check(strings.NewReader(log.String()))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Pi, mcp-http: TestMCPGrants/http absent in github.com/aml-go/aml/providers/agent/pi",
		"GLM, cancel: TestCancelEndsTheProcessTree failed in github.com/aml-go/aml/providers/agent/glm",
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{"skipped `TestInDockerSandbox`", "FAILED `TestCancelEndsTheProcessTree`", "NOT RUN `TestMCPGrants/http`", "✓ `TestTurns`"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table lacks %q:\n%s", s, table)
		}
	}
}
