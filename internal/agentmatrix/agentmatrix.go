// Package agentmatrix is the table of what the end-to-end tests prove
// against each real agent: for every agent profile and every capability,
// the test that proves it, or why none can. docs/agents.md shows the
// table as Markdown renders it (TestTableInDocs keeps the two equal), and
// .ci/run checks it against the log of the test run (Check, through
// cmd/agentmatrix), printing the table it proved.
package agentmatrix

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Capability is one column of the table.
type Capability struct {
	// Key names the capability in Agent.Cells.
	Key string
	// Title is the column heading.
	Title string
}

// Capabilities are the columns, in order.
var Capabilities = []Capability{
	{"turns", "two turns, system text"},
	{"bridge", "host tool through the bridge, once"},
	{"structured", "structured result"},
	{"mcp-stdio", "`mcp()` over stdio"},
	{"mcp-http", "`mcp()` over streamable HTTP"},
	{"read-only", "read-only refuses writes and shell"},
	{"cancel", "cancel ends the process tree"},
	{"docker", "Docker sandbox, tool and structured result"},
}

// Proof is one cell: the test that proves the capability (a top-level
// test name, or "TestName/subtest"), and a note on how it proves it.
type Proof struct {
	Test string
	// Note qualifies the proof (for example where an agent offers the
	// same tools under every permission and the refusal is its own).
	Note string
}

// Agent is one row: an agent profile and its proofs.
type Agent struct {
	// Name is the agent as the docs name it.
	Name string
	// Factory is its Starlark builtin.
	Factory string
	// Package is the Go package of its end-to-end tests.
	Package string
	// Cells are its proofs by Capability.Key; every capability has one.
	Cells map[string]Proof
}

// mod is the module path the packages are below.
const mod = "github.com/aml-go/aml/"

// Agents are the rows, in the order of the docs.
var Agents = []Agent{
	{"OpenCode", "opencode_agent", mod + "providers/agent/opencode", map[string]Proof{
		"turns": {Test: "TestToolAndFollowUp", Note: "system text as the first turn's prelude"}, "bridge": {Test: "TestToolAndFollowUp"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrant/stdio"}, "mcp-http": {Test: "TestMCPGrant/http"},
		"read-only": {Test: "TestReadOnlyConfig", Note: "edit and write denied in its permission configuration"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
	{"Codex", "codex_agent", mod + "providers/agent/codex", map[string]Proof{
		"turns": {Test: "TestTurnsAndSystem", Note: "system text as developer instructions"}, "bridge": {Test: "TestBridgeTool"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrants/stdio"}, "mcp-http": {Test: "TestMCPGrants/http"},
		"read-only": {Test: "TestReadOnlyRefusesWrites", Note: "same tools under every permission; its read-only sandbox refuses the write"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
	{"Pi", "pi_agent", mod + "providers/agent/pi", map[string]Proof{
		"turns": {Test: "TestTurns", Note: "system text as the first turn's prelude"}, "bridge": {Test: "TestToolThroughMCPAdapter", Note: "through pi-mcp-adapter"},
		"structured": {Test: "TestToolThroughMCPAdapter"}, "mcp-stdio": {Test: "TestMCPGrants/stdio"}, "mcp-http": {Test: "TestMCPGrants/http"},
		"read-only": {Test: "TestBannerAndPermissions", Note: "only the reading tools offered"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
	{"Copilot", "copilot_agent", mod + "providers/agent/copilot", map[string]Proof{
		"turns": {Test: "TestTurns", Note: "chat completions and Responses API"}, "bridge": {Test: "TestBridgeTool"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrantStdio"}, "mcp-http": {Test: "TestMCPGrant"},
		"read-only": {Test: "TestReadOnly", Note: "checked on the model's tool list"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox", Note: "the bridge from its own MCP configuration"},
	}},
	{"GLM", "glm_agent", mod + "providers/agent/glm", map[string]Proof{
		"turns": {Test: "TestTurns", Note: "system text as the first turn's prelude"}, "bridge": {Test: "TestBridgeTool"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrants/stdio"}, "mcp-http": {Test: "TestMCPGrants/http"},
		"read-only": {Test: "TestReadOnlyRefusesWrites", Note: "its write_file and run_command ask, and are refused"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
	{"Qwen Code", "qwen_agent", mod + "providers/agent/qwen", map[string]Proof{
		"turns": {Test: "TestTurns", Note: "system text in the system prompt"}, "bridge": {Test: "TestBridgeTool"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrants/stdio"}, "mcp-http": {Test: "TestMCPGrants/http"},
		"read-only": {Test: "TestReadOnly", Note: "checked on the model's tool list"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
	{"Claude Code", "claude_agent", mod + "providers/agent/claude", map[string]Proof{
		"turns": {Test: "TestTurns", Note: "system text in the system prompt"}, "bridge": {Test: "TestBridgeTool"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrants/stdio"}, "mcp-http": {Test: "TestMCPGrants/http"},
		"read-only": {Test: "TestReadOnly", Note: "checked on the model's tool list"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
	{"Gemini CLI", "gemini_agent", mod + "providers/agent/gemini", map[string]Proof{
		"turns": {Test: "TestTurns", Note: "system text in the system instruction"}, "bridge": {Test: "TestBridgeTool"},
		"structured": {Test: "TestStructuredResult"}, "mcp-stdio": {Test: "TestMCPGrants/stdio"}, "mcp-http": {Test: "TestMCPGrants/http"},
		"read-only": {Test: "TestReadOnly", Note: "checked on the model's tool list"},
		"cancel":    {Test: "TestCancelEndsTheProcessTree"}, "docker": {Test: "TestInDockerSandbox"},
	}},
}

// Markdown renders the table: a row per agent, a column per capability,
// each cell the test that proves it and its note.
func Markdown() string {
	return render(func(a Agent, c Capability) string {
		p := a.Cells[c.Key]
		cell := "`" + p.Test + "`"
		if p.Note != "" {
			cell += " (" + p.Note + ")"
		}
		return cell
	})
}

// render writes the table with cell for each cell.
func render(cell func(Agent, Capability) string) string {
	var b strings.Builder
	b.WriteString("| agent |")
	for _, c := range Capabilities {
		b.WriteString(" " + c.Title + " |")
	}
	b.WriteString("\n| --- |")
	for range Capabilities {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, a := range Agents {
		b.WriteString("| " + a.Name + " (`" + a.Factory + "`) |")
		for _, c := range Capabilities {
			b.WriteString(" " + cell(a, c) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Result is what a test log says of one test.
type Result string

// The results a log can give a test.
const (
	Passed  Result = "passed"
	Skipped Result = "skipped"
	Failed  Result = "failed"
	// Absent: the package ran, or did not, and the test is not in the log.
	Absent Result = "absent"
)

var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) `)
var packageLine = regexp.MustCompile(`^(?:ok|FAIL|\?)\s+(\S+)`)

// ParseLog reads the output of "go test -v" over several packages (each
// package's lines end with its "ok" or "FAIL" line, as go test prints
// them) and returns each test's result by package and test name.
func ParseLog(r io.Reader) (map[string]map[string]Result, error) {
	out := map[string]map[string]Result{}
	block := map[string]Result{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if m := resultLine.FindStringSubmatch(line); m != nil {
			block[m[2]] = map[string]Result{"PASS": Passed, "FAIL": Failed, "SKIP": Skipped}[m[1]]
			continue
		}
		if m := packageLine.FindStringSubmatch(line); m != nil && strings.Contains(m[1], "/") {
			if out[m[1]] == nil {
				out[m[1]] = map[string]Result{}
			}
			for k, v := range block {
				out[m[1]][k] = v
			}
			block = map[string]Result{}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the test log: %w", err)
	}
	return out, nil
}

// Check returns the table as the log proved it, each cell the result of
// its test, and the cells whose test failed or is absent from the log
// (a skipped test is reported in the table, not as a failure: it says
// what is missing on the machine).
func Check(log io.Reader) (table string, problems []string, err error) {
	results, err := ParseLog(log)
	if err != nil {
		return "", nil, err
	}
	table = render(func(a Agent, c Capability) string {
		p := a.Cells[c.Key]
		r, ok := results[a.Package][p.Test]
		if !ok {
			r = Absent
		}
		if r == Failed || r == Absent {
			problems = append(problems, fmt.Sprintf("%s, %s: %s %s in %s", a.Name, c.Key, p.Test, r, a.Package))
		}
		mark := map[Result]string{Passed: "✓", Skipped: "skipped", Failed: "FAILED", Absent: "NOT RUN"}[r]
		return mark + " `" + p.Test + "`"
	})
	return table, problems, nil
}
