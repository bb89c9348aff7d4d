package eval_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

func pos(line int) eval.Position { return eval.Position{File: "t.star", Line: int32(line), Col: 1} }

func echo(t testing.TB, f func(req *eval.AgentRequest, i int) string) *deterministic.Agent {
	t.Helper()
	var r deterministic.RespondFunc
	if f != nil {
		r = func(_ context.Context, req *eval.AgentRequest, i int) (*eval.AgentResponse, error) {
			return &eval.AgentResponse{Text: f(req, i)}, nil
		}
	}
	a, err := deterministic.New(deterministic.Options{Respond: r})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func run(t testing.TB, p eval.AgentProvider, limits *eval.Limits, v any) (string, error) {
	t.Helper()
	rt, err := eval.New(eval.Options{AgentProvider: p, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return rt.Evaluate(context.Background(), v)
}

func TestAgentPromptAndSystemPlan(t *testing.T) {
	p := echo(t, func(req *eval.AgentRequest, _ int) string {
		return req.System + "|" + req.Prompt + "|" + strings.Join(req.FollowUps, ",")
	})
	rt, err := eval.New(eval.Options{AgentProvider: p, System: "  runtime  "})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Evaluate(context.Background(), &eval.Agent{
		System: "prop",
		Children: []any{
			"  Review ", int64(3), " files ", nil, true,
			&eval.System{Children: []any{" child "}},
			&eval.FollowUp{Children: []any{" again "}},
			"\n",
			&eval.FollowUp{Children: []any{"last"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "runtime\nprop\nchild|Review 3 files|again,last"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestBlockRendering(t *testing.T) {
	got, err := run(t, echo(t, nil), nil, &eval.Agent{Children: []any{
		"A", &eval.Block{Children: []any{"B"}}, "C", &eval.Block{}, &eval.Block{Children: []any{nil}},
		&eval.Block{Tag: "Personal Data", Children: []any{"D"}}, &eval.Block{Tag: "<//>", Children: []any{"E"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "A\n\nB\n\nC\n\n\n\n\n\n<personal-data>\nD\n</personal-data>\n\n\n\nE"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestNormalizeTag(t *testing.T) {
	for in, want := range map[string]string{
		"Personal Data": "personal-data", "personal_data": "personal-data", "personal-data": "personal-data",
		"personalData": "personal-data", "HTTPServer": "http-server", "a</b><c>": "a-b-c", "  ": "",
		"v2Beta": "v2-beta", "ÜberTag": "ber-tag", "correctness review": "correctness-review",
	} {
		if got := eval.NormalizeTag(in); got != want {
			t.Errorf("NormalizeTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNestedAgentsResolveFirst(t *testing.T) {
	got, err := run(t, echo(t, func(req *eval.AgentRequest, _ int) string { return "(" + req.Prompt + ")" }), nil,
		&eval.Agent{Children: []any{"outer ", &eval.Agent{Children: []any{"inner"}}}})
	if err != nil || got != "(outer (inner))" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestPlacementErrorsBeforeProviderRuns(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"system outside", []any{"x", &eval.System{Position: pos(3)}}, "t.star:3:1: system() is only valid inside agent()"},
		{"follow_up outside", &eval.FollowUp{Position: pos(4), Children: []any{"x"}}, "t.star:4:1: follow_up() is only valid inside agent()"},
		{"nested follow_up", &eval.Agent{Children: []any{&eval.FollowUp{Children: []any{&eval.FollowUp{Position: pos(5), Children: []any{"x"}}}}}}, "t.star:5:1: follow_up() cannot contain another follow_up()"},
		{"text after follow_up", &eval.Agent{Position: pos(6), Children: []any{&eval.Agent{Children: []any{"child"}}, &eval.FollowUp{Children: []any{"x"}}, "late"}}, "t.star:6:1: agent() prompt text after the first follow_up()"},
		{"system in parallel in agent", &eval.Agent{Children: []any{&eval.Parallel{Branches: []any{&eval.System{Position: pos(7)}}}}}, "t.star:7:1: system() inside parallel() does not reach the agent() around the parallel()"},
		{"follow_up in sandbox in agent", &eval.Agent{Children: []any{"initial", &eval.Sandbox{Children: []any{&eval.FollowUp{Position: pos(10), Children: []any{"x"}}}}}}, "t.star:10:1: follow_up() inside sandbox() does not reach the agent() around the sandbox()"},
		{"system in workspace in agent", &eval.Agent{Children: []any{"initial", &eval.Workspace{Children: []any{&eval.System{Position: pos(11), Children: []any{"x"}}}}}}, "t.star:11:1: system() inside workspace() does not reach the agent()"},
		{"follow_up in sandbox in block in agent", &eval.Agent{Children: []any{"initial", &eval.Block{Children: []any{&eval.Sandbox{Children: []any{&eval.Fragment{Children: []any{&eval.FollowUp{Position: pos(12), Children: []any{"x"}}}}}}}}}}, "t.star:12:1: follow_up() inside sandbox() does not reach"},
		{"follow_up in parallel in agent", &eval.Agent{Children: []any{"initial", &eval.Parallel{Branches: []any{&eval.FollowUp{Position: pos(13), Children: []any{"x"}}}}}}, "t.star:13:1: follow_up() inside parallel() does not reach"},
		{"cwd without sandbox", &eval.Agent{Cwd: "src", Position: pos(8)}, "t.star:8:1: agent(cwd=...) requires an enclosing sandbox()"},
		{"unrenderable", &eval.Agent{Position: pos(9), Children: []any{map[string]int{}}}, "t.star:9:1: value of type map[string]int is not renderable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := echo(t, nil)
			_, err := run(t, p, nil, c.v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			var ee *eval.EvaluationError
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not an *EvaluationError", err)
			}
			if n := len(p.Calls()); n != 0 {
				t.Fatalf("provider ran %d times before the placement error", n)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	deep := any("x")
	for i := 0; i < 4; i++ {
		deep = &eval.Agent{Position: pos(i + 1), Children: []any{deep}}
	}
	p := echo(t, nil)
	_, err := run(t, p, &eval.Limits{MaxDepth: 3}, deep)
	if err == nil || !strings.Contains(err.Error(), "t.star:1:1: AML evaluation exceeded max_depth 3") {
		t.Fatalf("depth: %v", err)
	}
	if len(p.Calls()) != 0 {
		t.Fatal("provider ran before the depth error")
	}
	if _, err := run(t, p, &eval.Limits{MaxDepth: 4}, deep); err != nil {
		t.Fatalf("depth 4: %v", err)
	}

	many := make([]any, 3)
	for i := range many {
		many[i] = &eval.Agent{Position: pos(i + 1), Children: []any{"a"}}
	}
	p = echo(t, nil)
	_, err = run(t, p, &eval.Limits{MaxAgentCalls: 2}, many)
	if err == nil || !strings.Contains(err.Error(), "t.star:3:1: AML evaluation exceeded max_agent_calls 2") {
		t.Fatalf("calls: %v", err)
	}
	if len(p.Calls()) != 2 {
		t.Fatalf("provider ran %d times, want 2", len(p.Calls()))
	}

	turns := &eval.Agent{Position: pos(1), Children: []any{"a", &eval.FollowUp{Children: []any{"b"}}, &eval.FollowUp{Children: []any{"c"}}}}
	_, err = run(t, echo(t, nil), &eval.Limits{MaxTurnsPerAgent: 2}, turns)
	if err == nil || !strings.Contains(err.Error(), "agent() has 3 turns") || !strings.Contains(err.Error(), "max_turns_per_agent 2") {
		t.Fatalf("turns: %v", err)
	}
	if _, err := eval.New(eval.Options{Limits: &eval.Limits{MaxDepth: -2}}); err == nil || !strings.Contains(err.Error(), "Limits.MaxDepth must be 0 (the default), a positive bound, or eval.Unlimited") {
		t.Fatalf("negative limit: %v", err)
	}
	// Unlimited disables a limit.
	if _, err := run(t, echo(t, nil), &eval.Limits{MaxDepth: eval.Unlimited}, deep); err != nil {
		t.Fatal(err)
	}
}

// TestLimitsZeroIsDefault: a zero field keeps its default, so setting one
// limit leaves the other three in force.
func TestLimitsZeroIsDefault(t *testing.T) {
	rt, err := eval.New(eval.Options{Limits: &eval.Limits{MaxAgentCalls: 8}})
	if err != nil {
		t.Fatal(err)
	}
	want := eval.DefaultLimits()
	want.MaxAgentCalls = 8
	if got := rt.Limits(); got != want {
		t.Fatalf("effective limits %+v, want %+v", got, want)
	}
	// The default depth (16) still applies.
	deep := any("x")
	for i := 0; i < 17; i++ {
		deep = &eval.Agent{Position: pos(i + 1), Children: []any{deep}}
	}
	p := echo(t, nil)
	if _, err := run(t, p, &eval.Limits{MaxAgentCalls: 8}, deep); err == nil || !strings.Contains(err.Error(), "exceeded max_depth 16") {
		t.Fatalf("depth with defaults: %v", err)
	}
	off := eval.Limits{MaxDepth: eval.Unlimited}
	rt, err = eval.New(eval.Options{Limits: &off})
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Limits(); got.MaxDepth != eval.Unlimited || got.MaxAgentCalls != 32 {
		t.Fatalf("effective limits %+v", got)
	}
}

func TestParallelOrderAndErrors(t *testing.T) {
	// Each call holds its slot until three calls ran at once (the first
	// three wait for each other, whatever the machine's load), and then
	// for a moment more, so that a scheduler admitting more than three
	// would be seen.
	var active, peak atomic.Int32
	full := make(chan struct{})
	var fullOnce sync.Once
	p := echo(t, func(req *eval.AgentRequest, _ int) string {
		n := active.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		if n >= 3 {
			fullOnce.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-time.After(time.Minute):
		}
		time.Sleep(time.Millisecond) // the call takes a moment: the stimulus, not a wait
		active.Add(-1)
		return strings.ToUpper(req.Prompt)
	})
	branches := []any{}
	for i := 0; i < 12; i++ {
		branches = append(branches, &eval.Agent{Children: []any{string(rune('a' + i))}})
	}
	got, err := run(t, p, &eval.Limits{MaxConcurrentAgents: 3}, &eval.Parallel{Branches: []any{branches, nil, false}})
	if err != nil || got != "ABCDEFGHIJKL" {
		t.Fatalf("got %q, %v", got, err)
	}
	if peak.Load() != 3 {
		t.Fatalf("peak concurrency %d, want max_concurrent_agents 3", peak.Load())
	}

	fail := func(req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if strings.HasPrefix(req.Prompt, "bad") {
			return nil, errors.New("boom " + req.Prompt)
		}
		return &eval.AgentResponse{Text: req.Prompt}, nil
	}
	fp, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, r *eval.AgentRequest, i int) (*eval.AgentResponse, error) { return fail(r, i) }})
	_, err = run(t, fp, nil, &eval.Parallel{Position: pos(2), Branches: []any{
		&eval.Agent{Children: []any{"ok"}}, &eval.Agent{Children: []any{"bad1"}}, "text", &eval.Agent{Children: []any{"bad3"}},
	}})
	var pe *eval.ParallelError
	if !errors.As(err, &pe) {
		t.Fatalf("want ParallelError, got %v", err)
	}
	if len(pe.Failures) != 2 || pe.Failures[0].Index != 1 || pe.Failures[1].Index != 3 {
		t.Fatalf("failures %+v", pe.Failures)
	}
	if !strings.Contains(err.Error(), "2 of 4 parallel branches failed") || !strings.Contains(err.Error(), "boom bad3") {
		t.Fatalf("message %q", err)
	}
}

func TestComponentEvaluate(t *testing.T) {
	p := echo(t, func(req *eval.AgentRequest, _ int) string { return "len=" + string(rune('0'+len(req.Prompt))) })
	var detached *eval.ComponentContext
	comp := &eval.Component{Name: "Count", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		first, err := cc.Evaluate(&eval.Agent{Children: []any{"abc"}})
		if err != nil {
			return nil, err
		}
		all, err := cc.EvaluateAll([]any{&eval.Agent{Children: []any{"a"}}, "plain"}, pos(2))
		if err != nil {
			return nil, err
		}
		detached = cc
		return []any{first, "/", all[0], "/", all[1]}, nil
	}}
	got, err := run(t, p, nil, comp)
	if err != nil || got != "len=3/len=1/plain" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := detached.Evaluate("x"); err == nil || !strings.Contains(err.Error(), "evaluate() is only available while an AML component is active") {
		t.Fatalf("detached evaluate: %v", err)
	}
}

func TestCancellationReachesProvider(t *testing.T) {
	started := make(chan struct{})
	p, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, _ *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	rt, _ := eval.New(eval.Options{AgentProvider: p})
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("operator stop")
	go func() { <-started; cancel(cause) }()
	_, err := rt.Evaluate(ctx, &eval.Agent{Children: []any{"x"}})
	if !errors.Is(err, cause) {
		t.Fatalf("error %v does not wrap the cancellation cause", err)
	}
	// A context that is already cancelled rejects before anything runs.
	_, err = rt.Evaluate(ctx, &eval.Agent{Children: []any{"x"}})
	if !errors.Is(err, cause) || len(p.Calls()) != 1 {
		t.Fatalf("pre-cancelled: %v, calls %d", err, len(p.Calls()))
	}
}

func TestAgentTimeout(t *testing.T) {
	p, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, _ *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	_, err := run(t, p, nil, &eval.Agent{TimeoutMS: 20, Position: pos(3), Children: []any{"x"}})
	var te *eval.AgentTimeoutError
	if !errors.As(err, &te) || te.TimeoutMS != 20 {
		t.Fatalf("want AgentTimeoutError, got %v", err)
	}
	if !strings.Contains(err.Error(), "t.star:3:1: agent() timed out after timeout_ms=20") {
		t.Fatalf("message %q", err)
	}
}

type recordingSink struct {
	mu      sync.Mutex
	events  []eval.Event
	capture bool
}

func (s *recordingSink) HandleTrace(e eval.Event) error {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	return nil
}

func (s *recordingSink) CaptureContent() bool { return s.capture }

func TestTraceContentCapturePerSink(t *testing.T) {
	meta, full := &recordingSink{}, &recordingSink{capture: true}
	var failures atomic.Int32
	failing := sinkFunc(func(eval.Event) error { return errors.New("sink down") })
	rt, _ := eval.New(eval.Options{AgentProvider: echo(t, nil), Trace: []eval.TraceSink{meta, full, failing},
		OnTraceError: func(error, eval.Event) { failures.Add(1) }})
	got, err := rt.Evaluate(context.Background(), &eval.Agent{Position: pos(1), Children: []any{"secret prompt"}})
	if err != nil || got != "secret prompt" {
		t.Fatalf("%q %v", got, err)
	}
	if len(meta.events) == 0 || len(meta.events) != len(full.events) {
		t.Fatalf("events: meta %d full %d", len(meta.events), len(full.events))
	}
	if int(failures.Load()) != len(meta.events) {
		t.Fatalf("OnTraceError called %d times for %d events", failures.Load(), len(meta.events))
	}
	for i, e := range meta.events {
		if e.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
		for k, v := range e.Attributes {
			if s, ok := v.(string); ok && strings.Contains(s, "secret") {
				t.Fatalf("metadata-only sink received content %s=%q", k, s)
			}
		}
	}
	found := false
	for _, e := range full.events {
		if e.Attributes["prompt"] == "secret prompt" {
			found = true
		}
	}
	if !found {
		t.Fatal("content-capturing sink did not receive the prompt")
	}
}

// sessionProvider is a retained-session provider for testing the
// evaluator's turn driving.
type sessionProvider struct {
	mu       sync.Mutex
	turns    []eval.AgentTurn
	closes   int
	failTurn int
	closeErr error
}

func (p *sessionProvider) Name() string { return "session" }

func (p *sessionProvider) Run(context.Context, *eval.AgentRequest, *eval.AgentExecution) (*eval.AgentResponse, error) {
	return nil, errors.New("Run must not be called for a SessionProvider")
}

func (p *sessionProvider) OpenSession(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (eval.AgentSession, error) {
	return &session{p: p}, nil
}

type session struct{ p *sessionProvider }

func (s *session) RunTurn(_ context.Context, t eval.AgentTurn) (*eval.AgentResponse, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.turns = append(s.p.turns, t)
	if t.Index == s.p.failTurn {
		return nil, errors.New("turn failed")
	}
	return &eval.AgentResponse{Text: "reply to " + t.Text, StopReason: "end_turn"}, nil
}

func (s *session) Close(context.Context) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.closes++
	return s.p.closeErr
}

func TestSessionProviderTurnsAndCleanup(t *testing.T) {
	node := &eval.Agent{Position: pos(1), Children: []any{"first", &eval.FollowUp{Children: []any{"second"}}, &eval.FollowUp{Children: []any{"third"}}}}

	p := &sessionProvider{}
	sink := &recordingSink{}
	rt, _ := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{sink}})
	got, err := rt.Evaluate(context.Background(), node)
	if err != nil || got != "reply to third" {
		t.Fatalf("got %q, %v", got, err)
	}
	if len(p.turns) != 3 || p.turns[0].Kind != "initial" || p.turns[1].Kind != "follow-up" || !p.turns[2].Final || p.turns[1].Final {
		t.Fatalf("turns %+v", p.turns)
	}
	if p.closes != 1 {
		t.Fatalf("closed %d times", p.closes)
	}
	// Turn spans never overlap: each ends before the next starts.
	var names []string
	for _, e := range sink.events {
		if e.Name == "agent.turn" || e.Name == "agent.cleanup" {
			names = append(names, string(e.Type)+":"+e.Name)
		}
	}
	want := "span.start:agent.turn span.end:agent.turn span.start:agent.turn span.end:agent.turn span.start:agent.turn span.end:agent.turn span.start:agent.cleanup span.end:agent.cleanup"
	if strings.Join(names, " ") != want {
		t.Fatalf("span order:\n%s\nwant:\n%s", strings.Join(names, " "), want)
	}

	// A failed turn stops later turns and still closes once; a close error
	// joins the turn error instead of replacing it.
	p = &sessionProvider{failTurn: 2, closeErr: errors.New("close failed")}
	rt, _ = eval.New(eval.Options{AgentProvider: p})
	_, err = rt.Evaluate(context.Background(), node)
	if err == nil || !strings.Contains(err.Error(), "turn failed") || !strings.Contains(err.Error(), "close failed") {
		t.Fatalf("error %v", err)
	}
	if len(p.turns) != 2 || p.closes != 1 {
		t.Fatalf("turns %d closes %d", len(p.turns), p.closes)
	}
}

func TestLifecycleEvents(t *testing.T) {
	var events []string
	rt, _ := eval.New(eval.Options{
		AgentProvider: echo(t, nil),
		OnStart:       func(e eval.StartEvent) error { events = append(events, "start:"+e.RunID); return nil },
		OnFinish:      func(e eval.FinishEvent) { events = append(events, "finish:"+e.RunID+":"+e.Status) },
	})
	if _, err := rt.Evaluate(context.Background(), "x", eval.EvaluateOptions{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Evaluate(context.Background(), &eval.FollowUp{}, eval.EvaluateOptions{RunID: "r2"}); err == nil {
		t.Fatal("want an error")
	}
	if got := strings.Join(events, " "); got != "start:r1 finish:r1:ok start:r2 finish:r2:error" {
		t.Fatalf("events %s", got)
	}
}

func TestNumberAfterFollowUpFailsBeforeProviders(t *testing.T) {
	p := echo(t, nil)
	_, err := run(t, p, nil, &eval.Agent{Position: pos(1), Children: []any{&eval.Agent{Children: []any{"a"}}, &eval.FollowUp{Children: []any{"f"}}, int64(5)}})
	if err == nil || !strings.Contains(err.Error(), "prompt text after the first follow_up()") {
		t.Fatalf("error %v", err)
	}
	if len(p.Calls()) != 0 {
		t.Fatalf("%d provider calls before a static placement error", len(p.Calls()))
	}
}

func TestGoComponentErrorGetsPosition(t *testing.T) {
	plain := errors.New("plain failure")
	_, err := run(t, echo(t, nil), nil, &eval.Component{Name: "Fetch", Position: pos(4), Fn: func(*eval.ComponentContext) (any, error) {
		return nil, plain
	}})
	var ee *eval.EvaluationError
	if !errors.As(err, &ee) || !errors.Is(err, plain) || ee.Pos != pos(4) || !strings.Contains(err.Error(), "component Fetch failed") {
		t.Fatalf("error %T %v", err, err)
	}
}

// sinkFunc adapts a function to a metadata-only trace sink.
type sinkFunc func(eval.Event) error

func (f sinkFunc) HandleTrace(e eval.Event) error { return f(e) }
