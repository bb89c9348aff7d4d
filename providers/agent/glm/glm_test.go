package glm_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/agent/acp"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/agent/glm"
)

func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}

// The profile's environment and authentication, observed by the fake ACP
// agent standing in for glm-acp-agent; the key never reaches traces.
func TestLaunch(t *testing.T) {
	cmd, env := acptest.Command()
	env["AML_FAKE_ACP_MODE"] = "auth"
	env["AML_FAKE_ACP_AUTH_METHOD"] = "z-ai-api-key"
	env["ACP_GLM_MODEL"] = "overridden-by-aml"
	p, err := glm.New(glm.Options{Base: acp.Base{Command: cmd, Env: env, Model: "glm-4.7", NoMeter: true}, APIKey: "zai-secret", BaseURL: "http://127.0.0.1:1/api", MaxTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	rec := &tracetest.Recorder{}
	rt, _ := eval.New(eval.Options{Trace: []eval.TraceSink{rec}})
	out, err := rt.Evaluate(context.Background(), &eval.Agent{Provider: p, Model: "glm-5-turbo", Children: []any{
		"env Z_AI_API_KEY\nsay |\nenv ACP_GLM_BASE_URL\nsay |\nenv ACP_GLM_MAX_TOKENS\nsay |\nenv ACP_GLM_MODEL\nsay |\nenv ACP_GLM_SESSION_DIR",
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(out, "|")
	if len(f) != 5 || f[0] != "zai-secret" || f[1] != "http://127.0.0.1:1/api" || f[2] != "4096" || f[3] != "glm-5-turbo" ||
		!strings.HasSuffix(f[4], "/sessions") || !strings.Contains(f[4], "aml-acp-") {
		t.Fatalf("environment = %q", out)
	}
	for _, e := range rec.Events() {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "zai-secret") {
			t.Fatalf("the key reached a trace event: %s", b)
		}
	}
}

// TestLaunchMetered: a metered session gets a route of the model gateway
// as its endpoint, the default one included.
func TestLaunchMetered(t *testing.T) {
	cmd, env := acptest.Command()
	for _, base := range []string{"http://127.0.0.1:1/api", ""} {
		p, err := glm.New(glm.Options{Base: acp.Base{Command: cmd, Env: env}, BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		rt, _ := eval.New(eval.Options{})
		out, err := rt.Evaluate(context.Background(), &eval.Agent{Provider: p, Children: []any{"env ACP_GLM_BASE_URL"}})
		if err != nil || !strings.HasPrefix(out, "http://127.0.0.1:") || !strings.Contains(out, "/r/") {
			t.Fatalf("base_url %q: the adapter got %q, %v; want a gateway route", base, out, err)
		}
	}
}

func TestValidation(t *testing.T) {
	if _, err := glm.New(glm.Options{MaxTokens: -1}); err == nil {
		t.Error("negative max_tokens accepted")
	}
	if _, err := glm.New(glm.Options{Base: acp.Base{Model: " glm"}}); err == nil {
		t.Error("untrimmed model accepted")
	}
}

// TestCredentialRedacted: the API key AML passes never reaches the error
// when the agent prints it before dying.
func TestCredentialRedacted(t *testing.T) {
	cmd, env := acptest.Command()
	env["AML_FAKE_ACP_MODE"] = "auth"
	env["AML_FAKE_ACP_AUTH_METHOD"] = "z-ai-api-key"
	p, err := glm.New(glm.Options{Base: acp.Base{Command: cmd, Env: env}, APIKey: "zai-secret-0123"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), &eval.AgentRequest{Prompt: "stderr-env Z_AI_API_KEY\nexit 3"}, nil)
	if err == nil || !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(err.Error(), "Z_AI_API_KEY=[redacted]") || strings.Contains(err.Error(), "zai-secret-0123") {
		t.Fatalf("error = %v", err)
	}
}
