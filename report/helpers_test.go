package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/deterministic"
)

// sessionProvider is a deterministic eval.SessionProvider: every turn
// answers its own text and reports token usage, so the evaluator traces
// agent.turn and agent.cleanup spans.
type sessionProvider struct{}

func (sessionProvider) Name() string { return "sessions" }

func (sessionProvider) Run(context.Context, *eval.AgentRequest, *eval.AgentExecution) (*eval.AgentResponse, error) {
	return nil, errors.New("sessionProvider runs sessions only")
}

func (sessionProvider) OpenSession(context.Context, *eval.AgentRequest, *eval.AgentExecution) (eval.AgentSession, error) {
	return &providerSession{}, nil
}

type providerSession struct{}

func (*providerSession) RunTurn(_ context.Context, t eval.AgentTurn) (*eval.AgentResponse, error) {
	return &eval.AgentResponse{Text: "answer to " + t.Text, SessionID: "session-1", StopReason: "end_turn",
		Usage: `{"inputTokens":10,"outputTokens":5,"totalTokens":15}`}, nil
}

func (*providerSession) Close(context.Context) error { return nil }

// secretPrompt is content: it reaches the trace only with content capture.
const secretPrompt = "PROMPT-SECRET-42 plan the migration"

// failMessage is the failing agent's error.
const failMessage = "model refused the request"

func pos(line int32) eval.Position { return eval.Position{File: "flow.star", Line: line, Col: 3} }

// echoOrFail answers with the prompt, and fails prompts that contain
// "boom".
func echoOrFail(t testing.TB) *deterministic.Agent {
	t.Helper()
	p, err := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if strings.Contains(req.Prompt, "boom") {
			return nil, errors.New(failMessage)
		}
		return &eval.AgentResponse{Text: req.Prompt}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// smallTree is a workflow of 12 spans: a two-turn agent of a session
// provider, then a parallel() of an agent that succeeds and one that
// fails ("bad", at flow.star:5:3).
func smallTree() eval.Node {
	return &eval.Component{Name: "main", Entry: true, Position: pos(1), Fn: func(*eval.ComponentContext) (any, error) {
		return []any{
			&eval.Agent{Name: "planner", Provider: sessionProvider{}, Model: "fake-1", Position: pos(2),
				Children: []any{secretPrompt, &eval.FollowUp{Position: pos(3), Children: []any{"refine it"}}}},
			&eval.Parallel{Position: pos(4), Branches: []any{
				&eval.Agent{Name: "good", Position: pos(6), Children: []any{"fine"}},
				&eval.Agent{Name: "bad", Position: pos(5), Children: []any{"boom"}},
			}},
		}, nil
	}}
}

// smallSpans is the number of spans of smallTree: run, main, the planner
// agent, its session, two turns and the cleanup, parallel, and two agents
// with a session each.
const smallSpans = 12

// evaluate runs tree with the deterministic provider and returns its
// events and the run's error.
func evaluate(t testing.TB, tree any, capture bool, sinks ...eval.TraceSink) ([]eval.Event, error) {
	t.Helper()
	rec := &tracetest.Recorder{Content: capture}
	limits := eval.Limits{MaxAgentCalls: eval.Unlimited, MaxDepth: eval.Unlimited}
	rt, err := eval.New(eval.Options{AgentProvider: echoOrFail(t), Limits: &limits, Trace: append([]eval.TraceSink{rec}, sinks...)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{RunID: "run-1"})
	return rec.Events(), err
}

// smallRun evaluates smallTree, which fails.
func smallRun(t testing.TB, capture bool) []eval.Event {
	t.Helper()
	events, err := evaluate(t, smallTree(), capture)
	if err == nil || !strings.Contains(err.Error(), failMessage) {
		t.Fatalf("the small run returned %v, want the failure of agent bad", err)
	}
	return events
}

// wideTree is a workflow of n agents: n/2 siblings, then a parallel()
// fan-out of the rest.
func wideTree(n int) eval.Node {
	siblings := make([]any, n/2)
	for i := range siblings {
		siblings[i] = &eval.Agent{Position: pos(10), Children: []any{"sibling"}}
	}
	branches := make([]any, n-n/2)
	for i := range branches {
		branches[i] = &eval.Agent{Position: pos(11), Children: []any{"branch"}}
	}
	return &eval.Component{Name: "main", Entry: true, Position: pos(9), Fn: func(*eval.ComponentContext) (any, error) {
		return []any{siblings, &eval.Parallel{Position: pos(12), Branches: branches}}, nil
	}}
}

// wideRun evaluates wideTree(n).
func wideRun(t testing.TB, n int) []eval.Event {
	t.Helper()
	events, err := evaluate(t, wideTree(n), false)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// render returns the report of events.
func render(t testing.TB, events []eval.Event, opts Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, events, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const dataOpen, dataClose = `<script type="application/json" id="aml-data">`, "</script>"

// pageData is the decoded page data, for the fields the tests read.
type pageData struct {
	Title   string            `json:"title"`
	Content bool              `json:"content"`
	S       []string          `json:"s"`
	R       [][]any           `json:"r"`
	E       [][]any           `json:"e"`
	F       [][]any           `json:"f"`
	Tot     map[string]any    `json:"tot"`
	Runs    [][]any           `json:"runs"`
	Kinds   []json.RawMessage `json:"kinds"`
}

// decodeData extracts and decodes the page data of a report.
func decodeData(t testing.TB, page []byte) pageData {
	t.Helper()
	s := string(page)
	i := strings.Index(s, dataOpen)
	if i < 0 {
		t.Fatal("the report has no data element")
	}
	s = s[i+len(dataOpen):]
	j := strings.Index(s, dataClose)
	if j < 0 {
		t.Fatal("the data element is not closed")
	}
	var d pageData
	if err := json.Unmarshal([]byte(s[:j]), &d); err != nil {
		t.Fatalf("the page data is not JSON: %v", err)
	}
	return d
}
