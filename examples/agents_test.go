// Package examples_test runs the examples that need real agent programs
// (npm peers, found through AML_PEERS_DIR; the tests skip and say how to
// install them when they are missing) against the fake model server, so
// that every example in this directory is exercised unchanged.
package examples_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/golden"
)

// The npm peers these tests run (the versions .ci/run installs).
const (
	opencodePkg = "opencode-ai@1.18.33"
	codexPkg    = "@openai/codex@0.171.0"
	codexACPPkg = "@agentclientprotocol/codex-acp@2.6.0"
)

// TestOpenCodeExample runs examples/opencode.star unchanged with the real
// opencode, pointed at the fake model through the host's OPENCODE_CONFIG:
// the model calls the Starlark tool, then submits the typed result built
// from the tool's answer.
func TestOpenCodeExample(t *testing.T) {
	bin := peers.Bin(t, "opencode", opencodePkg)
	model := wordCountModel("Agents as workflows")
	defer model.Close()
	dir := t.TempDir()
	useOpenCode(t, bin, model.URL, dir)
	env := map[string]string{"OPENCODE_MODEL": "fake/fake-model"}
	lo := starlib.LoadOptions{Extensions: []*starlib.Extension{acpstar.Extension}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := starlib.Run(ctx, "opencode.star", "", lo, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "Agents as workflows (8 words)" {
		t.Fatalf("result = %q", got)
	}
}

// TestOpenCodeCassette turns one run of examples/opencode.star with the
// real opencode (against the fake model) into an aml test cassette: the
// run is journaled, then a test file with "# cassette:" replays it with
// the model server closed and opencode off PATH.
func TestOpenCodeCassette(t *testing.T) {
	bin := peers.Bin(t, "opencode", opencodePkg)
	model := wordCountModel("Recorded once")
	dir := t.TempDir()
	path := os.Getenv("PATH")
	useOpenCode(t, bin, model.URL, dir)
	src, err := os.ReadFile("opencode.star")
	if err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "opencode.star")
	if err := os.WriteFile(wf, src, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENCODE_MODEL": "fake/fake-model"}
	lo := starlib.LoadOptions{Extensions: []*starlib.Extension{acpstar.Extension}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := starlib.LoadFile(wf, lo)
	if err != nil {
		t.Fatal(err)
	}
	run, err := journal.Create(filepath.Join(dir, "cassette"), journal.Meta{Workflow: wf})
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Evaluate(ctx, "main", eval.Options{}, eval.EvaluateOptions{RunID: run.ID(), Journal: run})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	if got != "Recorded once (8 words)" {
		t.Fatalf("the recorded run = %q", got)
	}
	requests := len(model.Requests())
	model.Close()
	t.Setenv("PATH", path) // no opencode, no model: the cassette only

	test := filepath.Join(dir, "opencode_test.star")
	if err := os.WriteFile(test, []byte("# cassette: cassette\n# env: OPENCODE_MODEL=fake/fake-model\nload(\"opencode.star\", recorded = \"main\")\n\nmain = recorded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	record, err := golden.Record(ctx, test, acpstar.Extension)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(record), "|Recorded once (8 words)") || strings.Contains(string(record), "-- error --") {
		t.Fatalf("the cassette replay recorded\n%s", record)
	}
	t.Logf("recorded against %d model requests; replayed offline:\n%s", requests, record)
}

// wordCountModel is the fake model of examples/opencode.star: it calls
// the word_count tool, then submits title with the count the tool gave.
func wordCountModel(title string) *fakemodel.Server {
	return fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		result, tool := lastToolResult(r), toolNamed(r)
		switch {
		case len(r.Tools) == 0:
			return fakemodel.Reply{Text: "Title"}
		case result == "":
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: tool("word_count"), Arguments: `{"text":"AML runs coding agents from deterministic Starlark workflows"}`}}}
		case strings.Contains(result, `"words"`):
			var wc struct{ Words int }
			_ = json.Unmarshal([]byte(result), &wc)
			args, _ := json.Marshal(map[string]any{"result": map[string]any{"title": title, "words": wc.Words}})
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: tool("aml_submit_result"), Arguments: string(args)}}}
		default:
			return fakemodel.Reply{Text: "Submitted."}
		}
	})
}

// useOpenCode points the opencode at bin to the fake model at url,
// through an OPENCODE_CONFIG and HOME in dir, and puts it on PATH.
func useOpenCode(t *testing.T, bin, url, dir string) {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"provider": map[string]any{"fake": map[string]any{
		"npm": "@ai-sdk/openai-compatible", "name": "Fake",
		"options": map[string]any{"baseURL": url, "apiKey": "sk-fake"},
		"models":  map[string]any{"fake-model": map[string]any{"name": "Fake Model", "tool_call": true}},
	}}, "small_model": "fake/fake-model", "share": "disabled"})
	cfgFile := filepath.Join(dir, "opencode.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENCODE_CONFIG", cfgFile)
	t.Setenv("HOME", dir)
	t.Setenv("OPENCODE_DISABLE_MODELS_FETCH", "1")
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestCodexExample runs examples/codex.star unchanged with real codex-acp and
// Codex, pointed at the fake model through its OPENAI_BASE_URL setting: the model
// calls the Starlark tool, then submits a verdict built from its answer.
func TestCodexExample(t *testing.T) {
	adapter := peers.Bin(t, "codex-acp", codexACPPkg)
	peers.Bin(t, "codex", codexPkg)
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		result, tool := lastToolResult(r), toolNamed(r)
		switch {
		case result == "":
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: tool("style_check"), Arguments: `{"code":"for i in range(len(items)): print(items[i])"}`}}}
		case strings.Contains(result, "index_loop") && strings.Contains(result, "true"):
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: tool("aml_submit_result"), Arguments: `{"result":{"verdict":"revise","reason":"iterate directly"}}`}}}
		default:
			return fakemodel.Reply{Text: "Submitted."}
		}
	})
	defer model.Close()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("PATH", filepath.Dir(adapter)+string(os.PathListSeparator)+os.Getenv("PATH"))
	env := map[string]string{"OPENAI_API_KEY": "sk-fake", "CODEX_MODEL": "fake-model", "OPENAI_BASE_URL": model.URL}
	lo := starlib.LoadOptions{Extensions: []*starlib.Extension{acpstar.Extension}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := starlib.Run(ctx, "codex.star", "", lo, eval.Options{Cwd: dir})
	if err != nil {
		for i, r := range model.Requests() {
			t.Logf("request %d: tools %v", i, r.Tools)
			for _, m := range r.Messages {
				t.Logf("  %s %q %v", m.Role, m.Text, m.ToolCalls)
			}
		}
		t.Fatalf("%v (model requests: %d)", err, len(model.Requests()))
	}
	if got != "revise: iterate directly" {
		t.Fatalf("result = %q", got)
	}
}

// lastToolResult is the text of the last tool message the model received,
// or "".
func lastToolResult(r *fakemodel.Request) string {
	var result string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			result = m.Text
		}
	}
	return result
}

// toolNamed finds the offered tool whose name ends in suffix (agents
// prefix tool names with their MCP server's).
func toolNamed(r *fakemodel.Request) func(suffix string) string {
	return func(suffix string) string {
		for _, name := range r.Tools {
			if strings.HasSuffix(name, suffix) {
				return name
			}
		}
		return suffix
	}
}

// TestReviewLiveExample runs examples/review_live.star unchanged with the
// real opencode against the fake model, configured only through the
// variables its comment names: each specialist lane answers with its own
// finding, and the synthesis sees all three, in authored order.
func TestReviewLiveExample(t *testing.T) {
	bin := peers.Bin(t, "opencode", opencodePkg)
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		var all strings.Builder
		for _, m := range r.Messages {
			all.WriteString(m.Text)
			all.WriteString("\n")
		}
		text := all.String()
		for _, kind := range []string{"correctness", "security", "maintainability"} {
			if strings.Contains(text, "You are the "+kind+" reviewer") {
				return fakemodel.Reply{Text: "finding: " + kind + " looks fine"}
			}
		}
		if strings.Contains(text, "Synthesize only the findings") {
			var seen []string
			for _, kind := range []string{"correctness", "maintainability", "security"} {
				if i := strings.Index(text, "finding: "+kind); i >= 0 {
					seen = append(seen, kind)
				}
			}
			return fakemodel.Reply{Text: "Verdict: approve, from " + strings.Join(seen, ", ")}
		}
		return fakemodel.Reply{Text: "Title"}
	})
	defer model.Close()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("OPENCODE_DISABLE_MODELS_FETCH", "1")
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	env := map[string]string{"OPENAI_BASE_URL": model.URL, "OPENAI_API_KEY": "sk-fake", "MODEL": "fake-model"}
	lo := starlib.LoadOptions{Extensions: []*starlib.Extension{acpstar.Extension}, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := starlib.Run(ctx, "review_live.star", "", lo, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "Verdict: approve, from correctness, maintainability, security" {
		t.Fatalf("result = %q", got)
	}
	for _, r := range model.Requests() {
		if r.Model != "fake-model" {
			t.Fatalf("a request for model %q, want the MODEL given", r.Model)
		}
	}
}

// TestReviewLiveExampleSaysWhatItNeeds: without the variables, the
// example fails before anything runs, naming each one.
func TestReviewLiveExampleSaysWhatItNeeds(t *testing.T) {
	lo := starlib.LoadOptions{Extensions: []*starlib.Extension{acpstar.Extension}, Env: func(k string) (string, bool) { return "", false }}
	_, err := starlib.Run(context.Background(), "review_live.star", "", lo, eval.Options{})
	if err == nil {
		t.Fatal("review_live.star ran without a model endpoint")
	}
	for _, v := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "MODEL", "examples/review.star"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("the error does not name %s: %v", v, err)
		}
	}
}
