package copilot_test

// End-to-end tests that drive the real GitHub Copilot CLI against the
// fake OpenAI-compatible model (internal/fakemodel), offline.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/copilot"
)

// The versions .ci/run installs.
const (
	copilotPkg    = "@github/copilot@1.0.80"
	everythingPkg = "@modelcontextprotocol/server-everything@2026.8.31"
)

// cli returns the installed Copilot CLI, or skips t saying what is
// missing: the npm package, or the Node.js its launcher runs on.
func cli(t testing.TB) string {
	t.Helper()
	bin := peers.Bin(t, "copilot", copilotPkg)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: the Copilot CLI's npm launcher runs on Node.js (install Node.js 20 or newer)")
	}
	return bin
}

// setup starts a fake model and returns it with a function that builds a
// Copilot provider wired to it. wire is "" for chat completions or
// "responses" for the Responses API.
func setup(t *testing.T, respond func(*fakemodel.Request) fakemodel.Reply, wire string) (*fakemodel.Server, func(copilot.Options) eval.AgentProvider) {
	t.Helper()
	bin := cli(t)
	model := fakemodel.Start(respond)
	t.Cleanup(model.Close)
	return model, providerFor(t, bin, model, wire, nil)
}

// providerFor returns a function that makes Copilot providers against
// model, with extra added to their environment.
func providerFor(t testing.TB, bin string, model *fakemodel.Server, wire string, extra map[string]string) func(copilot.Options) eval.AgentProvider {
	return func(o copilot.Options) eval.AgentProvider {
		if o.Command == "" {
			o.Command = bin
		}
		if o.Model == "" {
			o.Model = "fake-model"
		}
		o.WorkingDirectory = t.TempDir()
		o.Env = map[string]string{
			"COPILOT_OFFLINE":           "true",
			"COPILOT_PROVIDER_BASE_URL": model.URL,
			"COPILOT_PROVIDER_API_KEY":  "sk-fake",
		}
		if wire != "" {
			o.Env["COPILOT_PROVIDER_WIRE_API"] = wire
		}
		maps.Copy(o.Env, extra)
		p, err := copilot.New(o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// dump logs what the model received, for a failure's diagnosis.
func dump(t *testing.T, model *fakemodel.Server) {
	t.Helper()
	for i, r := range model.Requests() {
		t.Logf("request %d (%s, model %q): tools %v", i, r.API, r.Model, r.Tools)
		for _, m := range r.Messages {
			if m.Role != "system" {
				t.Logf("  %s %.300q %v", m.Role, m.Text, m.ToolCalls)
			}
		}
	}
}

// TestTurns: two turns of one real Copilot session, over chat
// completions and over the Responses API, with the system text as a
// first-turn prelude; the package is unpacked into the shared cache, not
// into the session's private home.
func TestTurns(t *testing.T) {
	cli(t)
	for _, wire := range []string{"completions", "responses"} {
		t.Run(wire, func(t *testing.T) {
			model, provider := setup(t, nil, wire)
			out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), System: "Answer tersely.", Children: []any{
				"first question", &eval.FollowUp{Children: []any{"second question"}},
			}}, nil)
			if err != nil {
				dump(t, model)
				t.Fatal(err)
			}
			if out != "FAKE-REPLY: second question" {
				dump(t, model)
				t.Fatalf("result = %q", out)
			}
			api := map[string]string{"completions": "chat", "responses": "responses"}[wire]
			var sawSystem bool
			for _, r := range model.Requests() {
				if r.API != api || r.Model != "fake-model" {
					t.Errorf("a %s request for model %q, want %s for fake-model", r.API, r.Model, api)
				}
				if strings.Contains(string(r.Raw), "Answer tersely.") {
					sawSystem = true
				}
			}
			if !sawSystem {
				t.Error("the system text never reached the model")
			}
		})
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return
	}
	cache := os.Getenv("COPILOT_PKG_CACHE_HOME")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no user cache directory: %v", err)
		}
		cache = filepath.Join(dir, "aml", "copilot")
	}
	var pkg struct{ Version string }
	raw, err := os.ReadFile(filepath.Join(peers.Dir(), "node_modules", "@github", "copilot", "package.json"))
	if err == nil {
		err = json.Unmarshal(raw, &pkg)
	}
	if err != nil || pkg.Version == "" {
		t.Fatalf("reading the installed Copilot's version: %v", err)
	}
	version := pkg.Version
	if _, err := os.Stat(filepath.Join(cache, "pkg", "linux-x64", version)); err != nil {
		t.Errorf("Copilot %s was not unpacked into the shared package cache %s: %v", version, cache, err)
	}
}

// lookupTool is a Starlark-style host tool that counts its calls.
func lookupTool(calls *atomic.Int64) *eval.Tool {
	in, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer"}}, "required": []any{"id"}})
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			return fmt.Sprintf("Record %v", input.(map[string]any)["id"]), nil
		}})
	return tool
}

// TestBridgeTool: a host tool called by Copilot through the AML bridge
// runs exactly once. Copilot announces the call as "aml-lookup" and asks
// permission for "lookup"; the permission is matched by the call's id.
func TestBridgeTool(t *testing.T) {
	model, provider := setup(t, nil, "")
	var calls atomic.Int64
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), Permissions: &eval.Permissions{Filesystem: "read-only"},
		Children: []any{&eval.ToolGrant{Tool: lookupTool(&calls)}, `CALL lookup {"id": 9}`}}, rec)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if calls.Load() != 1 || out != "RESULT: Record 9" {
		dump(t, model)
		t.Fatalf("calls %d, result %q", calls.Load(), out)
	}
	var granted int
	for _, e := range rec.Named("acp.session.permission") {
		if e.Attributes["granted"] == true && e.Attributes["decision"] == "allow_once" {
			granted++
		}
	}
	if granted != 1 {
		t.Fatalf("granted permission requests = %d, want 1", granted)
	}
}

// TestStructuredResult: Copilot submits the typed result through the
// bridge's aml_submit_result tool.
func TestStructuredResult(t *testing.T) {
	model, provider := setup(t, nil, "")
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), Schema: s, Children: []any{
		`CALL aml_submit_result {"result": {"verdict": "fail"}}`,
	}}, rec)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if out != `{"verdict":"fail"}` {
		t.Fatalf("result = %q", out)
	}
	if n := rec.Count("agent.output", eval.PointEvent); n != 1 {
		t.Fatalf("agent.output events = %d", n)
	}
}

// TestMCPGrant: a granted streamable-HTTP MCP server reaches Copilot,
// which calls its tools: echo, which Copilot runs without asking (the
// server marks it read-only), and toggle-simulated-logging, which it asks
// permission for under the tool's title ("Toggle Simulated Logging")
// after announcing "everything-toggle-simulated-logging".
func TestMCPGrant(t *testing.T) {
	model, provider := setup(t, nil, "")
	srv := &eval.MCPServer{Name: "everything", Transport: eval.MCPTransport{Type: "streamable-http", URL: peers.EverythingHTTP(t)}}
	rec := &tracetest.Recorder{}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), Permissions: &eval.Permissions{Filesystem: "read-only"}, Children: []any{
		&eval.MCPGrant{Server: srv}, `CALL echo {"message": "via-mcp"}`,
		&eval.FollowUp{Children: []any{`CALL toggle-simulated-logging {}`}},
	}}, rec)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	var results []string
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && !slices.Contains(results, m.Text) {
				results = append(results, m.Text)
			}
		}
	}
	if len(results) != 2 || results[0] != "Echo: via-mcp" || !strings.Contains(strings.ToLower(results[1]), "logging") || strings.Contains(results[1], "rejected") {
		dump(t, model)
		t.Fatalf("tool results %q, result %q", results, out)
	}
	t.Logf("tool results: %q", results)
	var granted int
	for _, e := range rec.Named("acp.session.permission") {
		if e.Attributes["granted"] == true {
			granted++
		}
	}
	if granted != 1 {
		t.Fatalf("granted permission requests = %d, want 1 (toggle-simulated-logging)", granted)
	}
}

// TestMCPGrantStdio: a granted stdio MCP server, which Copilot rejects
// from session/new, reaches it through its own configuration.
func TestMCPGrantStdio(t *testing.T) {
	model, provider := setup(t, nil, "")
	everything := peers.Bin(t, "mcp-server-everything", everythingPkg)
	srv := &eval.MCPServer{Name: "everything", Transport: eval.MCPTransport{Type: "stdio", Command: everything, Args: []string{"stdio"}}}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), Children: []any{
		&eval.MCPGrant{Server: srv}, `CALL echo {"message": "via-stdio"}`,
	}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if out != "RESULT: Echo: via-stdio" {
		dump(t, model)
		t.Fatalf("result = %q", out)
	}
}

// writing are the tools that write files: those the profile excludes
// under filesystem "read-only".
var writing = copilot.ReadOnlyExcluded

// TestReadOnly: under filesystem "read-only", shell=False and
// network=False the model is offered none of the tools that write files,
// run commands or fetch, while the same model is offered the writing
// tools with the default permissions; reading stays. GPT-5 models get
// apply_patch instead of create and edit, so both tool sets are checked.
func TestReadOnly(t *testing.T) {
	for _, m := range []string{"fake-model", "gpt-5.4"} {
		t.Run(m, func(t *testing.T) {
			model, provider := setup(t, nil, "")
			p := provider(copilot.Options{Base: acp.Base{Model: m}})
			offered := func(perms *eval.Permissions) []string {
				t.Helper()
				before := len(model.Requests())
				if _, err := acptest.Evaluate(t, &eval.Agent{Provider: p, Permissions: perms, Children: []any{"hello"}}, nil); err != nil {
					dump(t, model)
					t.Fatal(err)
				}
				var tools []string
				for _, r := range model.Requests()[before:] {
					for _, name := range r.Tools {
						if !slices.Contains(tools, name) {
							tools = append(tools, name)
						}
					}
				}
				return tools
			}
			open := offered(nil)
			var writers []string
			for _, name := range open {
				if slices.Contains(writing, name) {
					writers = append(writers, name)
				}
			}
			if len(writers) == 0 {
				t.Fatalf("with the default permissions the model was offered no writing tool, so the check would prove nothing: %v", open)
			}
			closed := offered(&eval.Permissions{Filesystem: "read-only"})
			for _, name := range closed {
				if slices.Contains(writing, name) || slices.Contains(copilot.ShellExcluded, name) || slices.Contains(copilot.NetworkExcluded, name) {
					t.Errorf("read-only, shell-less, offline Copilot offered %q: %v", name, closed)
				}
			}
			if !slices.Contains(closed, "view") {
				t.Errorf("the reading tool view was not offered: %v", closed)
			}
			t.Logf("default: %v; read-only: %v", open, closed)
		})
	}
}

// TestSubAgentReadOnly: a sub-agent Copilot starts with its task tool
// (the general-purpose one has "all CLI tools") is offered no writing,
// shell or fetch tool under read-only either.
func TestSubAgentReadOnly(t *testing.T) {
	model, provider := setup(t, func(r *fakemodel.Request) fakemodel.Reply {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				return fakemodel.Reply{Text: "main done"}
			}
		}
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Text, "SUBTASK") {
				return fakemodel.Reply{Text: "sub done"}
			}
		}
		return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "task",
			Arguments: `{"name": "helper", "prompt": "SUBTASK look around", "agent_type": "general-purpose", "description": "look around", "mode": "sync"}`}}}
	}, "")
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), Permissions: &eval.Permissions{Filesystem: "read-only"}, Children: []any{"hello"}}, nil)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	var sub []string
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Text, "SUBTASK") {
				sub = r.Tools
			}
		}
	}
	if sub == nil {
		dump(t, model)
		t.Fatal("no sub-agent request reached the model")
	}
	for _, name := range sub {
		if slices.Contains(writing, name) || slices.Contains(copilot.ShellExcluded, name) || slices.Contains(copilot.NetworkExcluded, name) {
			t.Errorf("the read-only sub-agent was offered %q: %v", name, sub)
		}
	}
	// Copilot forwards the sub-agent's text as its own (see the package
	// doc); the answer follows it.
	if !strings.HasSuffix(out, "main done") {
		t.Errorf("result = %q", out)
	}
	t.Logf("sub-agent tools: %v; result %q", sub, out)
}

// TestInfoNoticesLeftOut: Copilot's "Info: " notices (here about the
// excluded tools) are sent as message chunks but kept out of the result.
func TestInfoNoticesLeftOut(t *testing.T) {
	model, provider := setup(t, nil, "")
	rec := &tracetest.Recorder{Content: true}
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: provider(copilot.Options{}), Permissions: &eval.Permissions{Filesystem: "read-only"},
		Children: []any{"hello there"}}, rec)
	if err != nil {
		dump(t, model)
		t.Fatal(err)
	}
	if out != "FAKE-REPLY: hello there" {
		t.Fatalf("result = %q", out)
	}
	var notices int
	for _, e := range rec.Named("acp.session.update") {
		if u, _ := e.Attributes["update"].(string); strings.Contains(u, `"text":"Info: `) {
			notices++
		}
	}
	if notices == 0 {
		t.Fatal("Copilot sent no Info: notice, so the test proves nothing")
	}
}

// TestCancelEndsTheProcessTree: cancelling a run mid-turn, while the
// model has not answered, ends the Copilot CLI and every process it
// started.
func TestCancelEndsTheProcessTree(t *testing.T) {
	bin := cli(t)
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return providerFor(t, bin, model, "", env)(copilot.Options{})
	})
}
