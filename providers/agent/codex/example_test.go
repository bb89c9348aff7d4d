package codex_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/starlib"
)

// TestExample runs examples/codex.star unchanged with real codex-acp and
// Codex, pointed at the fake model through its OPENAI_BASE_URL setting: the model
// calls the Starlark tool, then submits a verdict built from its answer.
func TestExample(t *testing.T) {
	adapter := peers.Bin(t, "codex-acp", codexACPPkg)
	peers.Bin(t, "codex", codexPkg)
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		var result string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				result = m.Text
			}
		}
		tool := func(suffix string) string {
			for _, name := range r.Tools {
				if strings.HasSuffix(name, suffix) {
					return name
				}
			}
			return suffix
		}
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
	lo := starlib.LoadOptions{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := starlib.Run(ctx, filepath.Join("..", "..", "..", "examples", "codex.star"), "", lo, eval.Options{Cwd: dir})
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
