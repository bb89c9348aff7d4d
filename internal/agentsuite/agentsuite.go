// Package agentsuite is the end-to-end suite the agent profiles whose
// agents take the system text, permissions and tools the same way share
// (Qwen Code, Claude Code, Gemini CLI): each check runs the real agent
// offline against the fake model and looks at what the model received.
// An agent's package describes its agent once (Agent) and calls each
// check from a test of its own, whose name the agent matrix
// (internal/agentmatrix) refers to.
package agentsuite

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/agentcancel"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/peers"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

// Agent describes one agent to the suite.
type Agent struct {
	// Provider makes a provider of the agent against model, on the model
	// "fake-model", with env added to the agent's environment (nil for
	// none). It skips the test when the agent is not installed.
	Provider func(t testing.TB, model *fakemodel.Server, env map[string]string) eval.AgentProvider
	// Withheld are the tools withheld under filesystem "read-only",
	// shell=False and network=False (the profile's lists, which may name
	// tools another version of the agent has); Shown are some of them
	// that this version offers under the default permissions, so that the
	// check of Withheld proves something; Reading are tools offered under
	// both.
	Withheld, Shown, Reading []string
	// Bridged is the name the model is offered the bridge's tool
	// "lookup" under.
	Bridged string
	// Own counts the model requests of the agent's own that a session
	// may make besides its turns (Claude Code's session title, asked for
	// a structured answer): they are told apart from the turns' by
	// Request.Schema.
	Own int
}

// turns are the requests of the session's turns: those that ask for no
// structured answer.
func turns(reqs []*fakemodel.Request) []*fakemodel.Request {
	var out []*fakemodel.Request
	for _, r := range reqs {
		if r.Schema == nil {
			out = append(out, r)
		}
	}
	return out
}

// Dump logs what the fake model received.
func Dump(t testing.TB, model *fakemodel.Server) {
	t.Helper()
	for i, r := range model.Requests() {
		t.Logf("request %d: %s tools=%v", i, r.API, r.Tools)
		for _, m := range r.Messages {
			text := m.Text
			if len(text) > 200 {
				text = text[:200] + "…"
			}
			t.Logf("  %s: %q %v", m.Role, text, m.ToolCalls)
		}
	}
}

// start starts the fake model with the default script.
func start(t testing.TB) *fakemodel.Server {
	t.Helper()
	model := fakemodel.Start(nil)
	t.Cleanup(model.Close)
	return model
}

// Turns: two turns of one session on the model asked for, the system text
// in the system prompt (not in a user message), no model call of the
// agent's own besides the two turns (but Agent.Own), and Agent.Shown and
// Agent.Reading offered under the default permissions.
func Turns(t *testing.T, a Agent) {
	model := start(t)
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: a.Provider(t, model, nil), System: "Answer like a pirate.", Children: []any{
		"first question", &eval.FollowUp{Children: []any{"second question"}},
	}}, nil)
	if err != nil {
		Dump(t, model)
		t.Fatal(err)
	}
	if out != "FAKE-REPLY: second question" {
		Dump(t, model)
		t.Fatalf("result = %q", out)
	}
	all := model.Requests()
	reqs := turns(all)
	if len(reqs) != 2 || len(all) > 2+a.Own {
		Dump(t, model)
		t.Fatalf("%d model requests, %d of them the turns': want the two turns' and at most %d of the agent's own", len(all), len(reqs), a.Own)
	}
	for _, r := range all {
		if r.Model != "fake-model" {
			t.Fatalf("a request to model %q", r.Model)
		}
	}
	for _, name := range slices.Concat(a.Shown, a.Reading) {
		if !slices.Contains(reqs[0].Tools, name) {
			t.Errorf("default permissions: %s not offered (%v)", name, reqs[0].Tools)
		}
	}
	for _, r := range reqs {
		if r.Messages[0].Role != "system" || !strings.Contains(r.Messages[0].Text, "Answer like a pirate.") {
			Dump(t, model)
			t.Fatalf("the system text is not in the system prompt")
		}
		for _, m := range r.Messages[1:] {
			if m.Role == "user" && strings.Contains(m.Text, "Answer like a pirate.") {
				t.Fatalf("the system text is in a user message too")
			}
		}
	}
}

// LookupTool is a bridge tool "lookup" that counts its calls and answers
// "Record <id>".
func LookupTool(calls *atomic.Int64) *eval.Tool {
	tool, err := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Looks a record up.",
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			m, _ := input.(map[string]any)
			return fmt.Sprintf("Record %v", m["id"]), nil
		}})
	if err != nil {
		panic(err)
	}
	return tool
}

// BridgeTool: a Starlark tool reaches the agent through the bridge,
// offered from the first model request; each call asks AML, which allows
// the granted tool, and runs once; and the model gateway counts exactly
// the usage the fake model reported for every request, once (the agent's
// own ACP report of the turn is not added).
func BridgeTool(t *testing.T, a Agent) {
	model := start(t)
	var calls atomic.Int64
	rec := &tracetest.Recorder{}
	var spent eval.Usage
	rt, err := eval.New(eval.Options{Trace: []eval.TraceSink{rec}, OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, &eval.Agent{Provider: a.Provider(t, model, nil),
		Children: []any{&eval.ToolGrant{Tool: LookupTool(&calls)}, "CALL lookup {\"id\": 9}\nCALL lookup {\"id\": 4}"}})
	if err != nil {
		Dump(t, model)
		t.Fatal(err)
	}
	requests := int64(len(model.Requests()))
	if calls.Load() != 2 || out != "RESULT: Record 4" || len(turns(model.Requests())) != 3 {
		Dump(t, model)
		t.Fatalf("calls %d, result %q, %d model requests", calls.Load(), out, requests)
	}
	if first := turns(model.Requests())[0]; !slices.Contains(first.Tools, a.Bridged) {
		t.Fatalf("the first model request offers %v, without the bridge's tool %s", first.Tools, a.Bridged)
	}
	var granted int
	for _, e := range rec.Named("acp.session.permission") {
		if e.Attributes["granted"] == true && e.Attributes["decision"] == "allow_once" {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("granted permission requests = %d, want 2", granted)
	}
	if spent.InputTokens != 10*requests || spent.OutputTokens != 5*requests || spent.ModelCalls != requests {
		t.Fatalf("counted %+v for %d model requests of 10 and 5 tokens", spent, requests)
	}
}

// StructuredResult: the agent submits the typed result through the
// bridge's aml_submit_result tool.
func StructuredResult(t *testing.T, a Agent) {
	model := start(t)
	s, _ := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}}, "required": []any{"verdict"}})
	out, err := acptest.Evaluate(t, &eval.Agent{Provider: a.Provider(t, model, nil), Schema: s, Children: []any{
		`CALL aml_submit_result {"result": {"verdict": "fail"}}`,
	}}, nil)
	if err != nil {
		Dump(t, model)
		t.Fatal(err)
	}
	if out != `{"verdict":"fail"}` {
		t.Fatalf("result = %q", out)
	}
}

// MCPGrants: granted MCP servers, over stdio and over streamable HTTP
// (subtests "stdio" and "http"), reach the agent, which calls their
// tools.
func MCPGrants(t *testing.T, a Agent) {
	for _, tc := range peers.EverythingTransports(t) {
		t.Run(tc.Name, func(t *testing.T) {
			model := start(t)
			srv := &eval.MCPServer{Name: "everything", Transport: tc.Transport}
			out, err := acptest.Evaluate(t, &eval.Agent{Provider: a.Provider(t, model, nil), Children: []any{
				&eval.MCPGrant{Server: srv}, `CALL echo {"message": "via-` + tc.Name + `"}`,
			}}, nil)
			if err != nil {
				Dump(t, model)
				t.Fatal(err)
			}
			if out != "RESULT: Echo: via-"+tc.Name {
				Dump(t, model)
				t.Fatalf("result = %q", out)
			}
		})
	}
}

// ReadOnly: under filesystem "read-only", shell=False and network=False
// the model is offered none of Agent.Withheld (Turns shows them offered
// otherwise); Agent.Reading stay.
func ReadOnly(t *testing.T, a Agent) {
	model := start(t)
	if _, err := acptest.Evaluate(t, &eval.Agent{Provider: a.Provider(t, model, nil), Permissions: &eval.Permissions{Filesystem: eval.ReadOnly},
		Children: []any{"which tools?"}}, nil); err != nil {
		Dump(t, model)
		t.Fatal(err)
	}
	strict := turns(model.Requests())[0].Tools
	for _, name := range a.Shown {
		if !slices.Contains(a.Withheld, name) {
			t.Fatalf("%s is shown as withheld, and the profile does not withhold it", name)
		}
	}
	for _, name := range a.Withheld {
		if slices.Contains(strict, name) {
			t.Errorf("read-only, no shell, no network: %s offered (%v)", name, strict)
		}
	}
	for _, name := range a.Reading {
		if !slices.Contains(strict, name) {
			t.Errorf("read-only: %s is not offered (%v)", name, strict)
		}
	}
}

// Cancel: cancelling a run mid-turn, while the model has not answered,
// ends the agent and every process it started (agentcancel.Run).
func Cancel(t *testing.T, a Agent) {
	agentcancel.Run(t, func(model *fakemodel.Server, env map[string]string) eval.AgentProvider {
		return a.Provider(t, model, env)
	})
}
