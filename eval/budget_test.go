package eval_test

import (
	"context"
	"errors"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

// spender is a deterministic provider whose every session reports u.
func spender(t testing.TB, u eval.Usage, reportsCost bool) *deterministic.Agent {
	t.Helper()
	a, err := deterministic.New(deterministic.Options{ReportsCost: reportsCost,
		Usage: func(context.Context, *eval.AgentRequest, int) (eval.Usage, error) { return u, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// evaluate runs v under opts and returns the result, the error and what
// the run reported it spent.
//
//lint:ignore ST1008 result, error, then what the run spent: the spend is reported whatever the error
func evaluate(t testing.TB, opts eval.Options, v any, eo ...eval.EvaluateOptions) (string, error, eval.Usage) {
	t.Helper()
	var spent eval.Usage
	opts.OnFinish = func(ev eval.FinishEvent) { spent = ev.Usage }
	rt, err := eval.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	text, err := rt.Evaluate(context.Background(), v, eo...)
	return text, err, spent
}

// budgetError returns the budget error in err, failing the test without
// one.
func budgetError(t testing.TB, err error) *eval.BudgetError {
	t.Helper()
	var be *eval.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("want a budget error, got %v", err)
	}
	return be
}

// loop is a component that evaluates one agent after another, n times at
// most, as a runaway `while` loop over evaluate() does.
func loop(n int) *eval.Component {
	return &eval.Component{Name: "loop", Position: pos(1), Entry: true, Fn: func(cc *eval.ComponentContext) (any, error) {
		var out []any
		for i := range n {
			text, err := cc.Evaluate(&eval.Agent{Position: pos(2), Children: []any{"step ", i}})
			if err != nil {
				return nil, err
			}
			out = append(out, text)
		}
		return out, nil
	}}
}

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     eval.Usage
	}{
		{"none", "", eval.Usage{}},
		{"AML", `{"input_tokens": 100, "output_tokens": 50, "cached_input_tokens": 40, "reasoning_tokens": 10, "model_calls": 3, "cost_usd": 0.5}`,
			eval.Usage{InputTokens: 100, OutputTokens: 50, CachedInputTokens: 40, ReasoningTokens: 10, ModelCalls: 3, CostUSD: 0.5, CostReported: true}},
		{"OpenAI", `{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}`, eval.Usage{InputTokens: 12, OutputTokens: 3}},
		// ACP's schema: totalTokens is the sum of all kinds, so cached
		// and thought tokens come on top of input and output.
		{"ACP apart", `{"inputTokens": 100, "outputTokens": 20, "cachedReadTokens": 30, "cachedWriteTokens": 5, "thoughtTokens": 7, "totalTokens": 162}`,
			eval.Usage{InputTokens: 135, OutputTokens: 27, CachedInputTokens: 30, ReasoningTokens: 7}},
		// An agent that counts cached input inside inputTokens.
		{"ACP inside", `{"inputTokens": 100, "outputTokens": 20, "cachedReadTokens": 30, "totalTokens": 120}`,
			eval.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 30}},
		{"ACP cost", `{"inputTokens": 1, "outputTokens": 1, "totalTokens": 2, "cost": {"amount": 0.25, "currency": "USD"}}`,
			eval.Usage{InputTokens: 1, OutputTokens: 1, CostUSD: 0.25, CostReported: true}},
		{"ACP cost in euros is not counted", `{"inputTokens": 1, "outputTokens": 1, "totalTokens": 2, "cost": {"amount": 0.25, "currency": "EUR"}}`,
			eval.Usage{InputTokens: 1, OutputTokens: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := eval.ParseUsage(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParseUsage(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
	if _, err := eval.ParseUsage("[1]"); err == nil {
		t.Error("a usage that is not an object was accepted")
	}
}

func TestPrices(t *testing.T) {
	prices := map[string]eval.Price{"gpt-5": {Input: 1.25, Output: 10, CachedInput: 0.125}, "anthropic/claude": {Input: 3, Output: 15}}
	for model, want := range map[string]bool{"gpt-5": true, "openai/gpt-5": true, "claude": true, "anthropic/claude": true, "gpt-4": false, "": false} {
		if _, ok := eval.PriceOf(prices, model); ok != want {
			t.Errorf("PriceOf(%q) found %v, want %v", model, ok, want)
		}
	}
	// One million input tokens, 200,000 of them cached, and 100,000
	// output tokens: 0.8*1.25 + 0.2*0.125 + 0.1*10.
	got := prices["gpt-5"].Cost(eval.Usage{InputTokens: 1_000_000, CachedInputTokens: 200_000, OutputTokens: 100_000})
	if want := 1.0 + 0.025 + 1.0; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("cost = %v, want %v", got, want)
	}
	if _, err := eval.New(eval.Options{Prices: map[string]eval.Price{"m": {Input: -1}}}); err == nil || !strings.Contains(err.Error(), `price of "m": input must be a non-negative number`) {
		t.Errorf("a negative price: %v", err)
	}
	if _, err := eval.New(eval.Options{Budget: &eval.Budget{Tokens: -5}}); err == nil || !strings.Contains(err.Error(), "tokens must not be negative") {
		t.Errorf("a negative budget: %v", err)
	}
}

// TestRunawayLoopStopsAtTokens: an agent evaluated in a loop stops when
// the run's token budget is crossed; the spend reported equals what the
// provider reported for the sessions that ran, and no session starts
// after the crossing.
func TestRunawayLoopStopsAtTokens(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 100, OutputTokens: 50}, false)
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: 1000}, Limits: &eval.Limits{MaxAgentCalls: eval.Unlimited}}, loop(1000))
	be := budgetError(t, err)
	calls := int64(len(p.Calls()))
	if be.Budget != "tokens" || be.Before || be.Limit != 1000 || be.Scope != "the run" {
		t.Errorf("budget error = %+v", be)
	}
	// 150 tokens a session: the seventh crosses 1,000.
	if calls != 7 || spent.Tokens() != 150*calls || be.Spent != float64(150*calls) {
		t.Errorf("%d sessions ran, %d tokens reported spent (error says %v); want 7 and %d", calls, spent.Tokens(), be.Spent, 150*calls)
	}
	if spent.ModelCalls != calls {
		t.Errorf("model calls = %d, want %d", spent.ModelCalls, calls)
	}
	if !strings.Contains(err.Error(), "t.star:2:1: the run's tokens budget is exceeded (1,050 of 1,000 spent); raise it with configure(budget = {...}) or --max-tokens") {
		t.Errorf("message: %v", err)
	}
}

// TestModelCallsRefusedBefore: a model call budget lets exactly that many
// sessions start; the next is refused before its provider runs.
func TestModelCallsRefusedBefore(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 1, OutputTokens: 1}, false)
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{ModelCalls: 5}, Limits: &eval.Limits{MaxAgentCalls: eval.Unlimited}}, loop(100))
	be := budgetError(t, err)
	if !be.Before || be.Budget != "model_calls" || len(p.Calls()) != 5 || spent.ModelCalls != 5 {
		t.Errorf("error %+v after %d calls, %d counted; want model_calls used up after 5", be, len(p.Calls()), spent.ModelCalls)
	}
}

// TestParallelBranchesShareOneBudget: twenty parallel branches against
// one token budget, fifty times. A session starts only while the budget
// has room, so the overshoot is bounded by the sessions in flight when it
// was reached (the concurrency limit); a model call budget, reserved
// before each call, is never passed at all.
func TestParallelBranchesShareOneBudget(t *testing.T) {
	const per, limit, concurrent = 100, 1000, 4
	for trial := range 50 {
		p := spender(t, eval.Usage{InputTokens: per / 2, OutputTokens: per / 2}, false)
		branches := make([]any, 20)
		for i := range branches {
			branches[i] = &eval.Agent{Position: pos(3), Children: []any{"b", i}}
		}
		_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: limit},
			Limits: &eval.Limits{MaxConcurrentAgents: concurrent}}, &eval.Parallel{Position: pos(2), Branches: branches})
		budgetError(t, err)
		if max := int64(limit - 1 + concurrent*per); spent.Tokens() > max || spent.Tokens() < limit {
			t.Fatalf("trial %d: %d tokens spent; want at least %d and at most %d", trial, spent.Tokens(), limit, max)
		}
		if got := int64(len(p.Calls())) * per; got != spent.Tokens() {
			t.Fatalf("trial %d: the provider reported %d tokens, the run counted %d", trial, got, spent.Tokens())
		}

		q := spender(t, eval.Usage{InputTokens: 1}, false)
		_, err, spent = evaluate(t, eval.Options{AgentProvider: q, Budget: &eval.Budget{ModelCalls: 7},
			Limits: &eval.Limits{MaxConcurrentAgents: concurrent}}, &eval.Parallel{Position: pos(2), Branches: branches})
		budgetError(t, err)
		if len(q.Calls()) != 7 || spent.ModelCalls != 7 {
			t.Fatalf("trial %d: %d calls ran (%d counted) under a budget of 7", trial, len(q.Calls()), spent.ModelCalls)
		}
	}
}

// TestScopesNest: a budget() inside the run and an agent(budget=) inside
// it each stop what they hold, and what they count counts outside too.
func TestScopesNest(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 10, OutputTokens: 10, CostUSD: 0.01}, true)
	agents := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = &eval.Agent{Position: pos(4), Children: []any{"a", i}}
		}
		return out
	}
	// The inner budget stops the subtree after three sessions.
	tree := []any{&eval.BudgetScope{Position: pos(3), Budget: eval.Budget{CostUSD: 0.03}, Children: agents(10)}}
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: 10_000}}, tree)
	be := budgetError(t, err)
	if be.Scope != "budget() at t.star:3:1" || be.Budget != "cost_usd" || !be.Before || len(p.Calls()) != 3 || spent.Tokens() != 60 {
		t.Errorf("inner budget: %+v after %d calls, %d tokens counted by the run", be, len(p.Calls()), spent.Tokens())
	}
	if !strings.Contains(err.Error(), "the cost_usd budget of budget() at t.star:3:1 is used up ($0.0300 of $0.0300 spent); raise it there") {
		t.Errorf("message: %v", err)
	}
	// The outer budget stops the subtree first when it is the smaller.
	p.Reset()
	_, err, _ = evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: 40}}, tree)
	if be := budgetError(t, err); be.Scope != "the run" || len(p.Calls()) != 2 {
		t.Errorf("outer budget: %+v after %d calls", be, len(p.Calls()))
	}
	// One session's own budget.
	p.Reset()
	one := &eval.Agent{Position: pos(5), Children: []any{"x"}, Budget: &eval.Budget{Tokens: 5}}
	_, err, _ = evaluate(t, eval.Options{AgentProvider: p}, []any{one})
	if be := budgetError(t, err); be.Scope != "agent() at t.star:5:1" || be.Before {
		t.Errorf("agent budget: %+v", be)
	}
}

// TestToolCallBudget: a tool call past the budget is refused and fails
// the agent that made it, after its turn.
func TestToolCallBudget(t *testing.T) {
	var ran atomic.Int64
	tool, err := eval.NewTool(eval.ToolOptions{Name: "t", Description: "d", Position: pos(1), Execute: func(context.Context, any) (any, error) {
		ran.Add(1)
		return "ok", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		for range 5 {
			if _, err := req.Tools[0].Call(ctx, map[string]any{}); err != nil {
				return &eval.AgentResponse{Text: "gave up: " + err.Error()}, nil
			}
		}
		return &eval.AgentResponse{Text: "done"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{ToolCalls: 3}},
		&eval.Agent{Position: pos(2), Children: []any{"x", &eval.ToolGrant{Tool: tool, Position: pos(2)}}})
	be := budgetError(t, err)
	if be.Budget != "tool_calls" || ran.Load() != 3 || spent.ToolCalls != 3 {
		t.Errorf("%+v; the tool ran %d times, %d counted; want 3", be, ran.Load(), spent.ToolCalls)
	}
}

// TestWallBudget: a budget()'s wall time stops a session that would run
// on, with a budget error rather than a cancellation.
func TestWallBudget(t *testing.T) {
	p, err := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, _ *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err, _ = evaluate(t, eval.Options{AgentProvider: p},
		&eval.BudgetScope{Position: pos(1), Budget: eval.Budget{Wall: 50 * time.Millisecond}, Children: []any{&eval.Agent{Position: pos(2), Children: []any{"x"}}}})
	be := budgetError(t, err)
	if be.Budget != "wall_s" || be.Scope != "budget() at t.star:1:1" || time.Since(start) > 10*time.Second {
		t.Errorf("%+v after %s", be, time.Since(start))
	}
	if !strings.Contains(err.Error(), "the wall_s budget of budget() at t.star:1:1 is exceeded (50ms of 50ms spent)") {
		t.Errorf("message: %v", err)
	}
}

// TestCostNeedsAPrice: under a cost budget, a session whose model has no
// price (and whose provider reports no cost) is refused before its
// provider runs; with a price its cost is counted from it.
func TestCostNeedsAPrice(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, false)
	node := &eval.Agent{Position: pos(1), Model: "gpt-x", Children: []any{"x"}}
	_, err, _ := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{CostUSD: 5}}, node)
	if err == nil || !strings.Contains(err.Error(), `model "gpt-x" has no price and provider "deterministic" reports no cost`) || len(p.Calls()) != 0 {
		t.Fatalf("unpriced model: %v after %d calls", err, len(p.Calls()))
	}
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{CostUSD: 5}, Prices: map[string]eval.Price{"gpt-x": {Input: 2, Output: 8}}}, node)
	if err != nil || spent.CostUSD < 2.8-1e-9 || spent.CostUSD > 2.8+1e-9 {
		t.Fatalf("priced model: %v, cost %v; want $2.80", err, spent.CostUSD)
	}
	// Without a cost budget nothing needs a price.
	if _, err, _ := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: 1e9}}, node); err != nil {
		t.Fatal(err)
	}
}

// TestResumeCountsReplayedSpend: a journaled run's resume serves its
// finished sessions from the journal and counts what they spent, so a
// resume never starts its budgets from zero.
func TestResumeCountsReplayedSpend(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 100, OutputTokens: 50}, false)
	j := eval.NewMemoryJournal()
	opts := eval.Options{AgentProvider: p, Limits: &eval.Limits{MaxAgentCalls: eval.Unlimited}}
	first, err, spent := evaluate(t, opts, loop(4), eval.EvaluateOptions{RunID: "r", Journal: j})
	if err != nil || spent.Tokens() != 600 {
		t.Fatalf("first run: %v, %d tokens", err, spent.Tokens())
	}
	p.Reset()
	var resumed eval.Usage
	opts.OnFinish = func(ev eval.FinishEvent) { resumed = ev.Usage }
	opts.Budget = &eval.Budget{Tokens: 500}
	rt, err := eval.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The recorded spend (600) is over the new budget: the replay stops.
	_, err = rt.Resume(context.Background(), loop(4), eval.ResumeOptions{RunID: "r", Journal: j})
	if be := budgetError(t, err); be.Before || len(p.Calls()) != 0 {
		t.Fatalf("%+v, %d live calls", be, len(p.Calls()))
	}
	opts.Budget = &eval.Budget{Tokens: 1000}
	rt, _ = eval.New(opts)
	again, err := rt.Resume(context.Background(), loop(4), eval.ResumeOptions{RunID: "r", Journal: j})
	if err != nil || again != first || len(p.Calls()) != 0 || resumed.Tokens() != 600 || resumed.ModelCalls != 4 {
		t.Fatalf("resume: %q, %v, %d live calls, %+v counted", again, err, len(p.Calls()), resumed)
	}
}

// TestSessionTurnsAreModelCalls: a retained session reserves a model call
// before each turn, so a budget of two calls stops a three-turn session
// before its third turn.
func TestSessionTurnsAreModelCalls(t *testing.T) {
	p := &sessionProvider{}
	node := &eval.Agent{Position: pos(1), Children: []any{"first", &eval.FollowUp{Children: []any{"second"}}, &eval.FollowUp{Children: []any{"third"}}}}
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{ModelCalls: 2}}, node)
	be := budgetError(t, err)
	p.mu.Lock()
	turns, closes := len(p.turns), p.closes
	p.mu.Unlock()
	if !be.Before || turns != 2 || closes != 1 || spent.ModelCalls != 2 {
		t.Errorf("%+v: %d turns, %d closes, %d calls counted; want 2, 1, 2", be, turns, closes, spent.ModelCalls)
	}
}

// meteredProvider makes model calls through the session's meter, as an
// agent behind the model gateway does: each turn makes calls of 90
// tokens until the meter refuses one, or `calls` of them. Its own usage
// report claims a million tokens, which must not be counted again.
type meteredProvider struct {
	calls int
	made  atomic.Int64
}

func (p *meteredProvider) Name() string                                         { return "metered" }
func (p *meteredProvider) Meters(*eval.AgentRequest, *eval.SandboxSession) bool { return true }
func (p *meteredProvider) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	for range p.calls {
		if exec.Meter.Reserve() != nil {
			break // the gateway answered 429: the agent gives up
		}
		p.made.Add(1)
		if exec.Meter.Charge(eval.Usage{InputTokens: 70, OutputTokens: 20}, req.Model) != nil {
			break
		}
	}
	return &eval.AgentResponse{Text: "done", Usage: `{"input_tokens": 1000000}`}, nil
}

// TestMeteredCallsCountOnce: a provider that meters its calls is stopped
// at the call that would pass a budget, within the session's turn, its own
// usage report is not counted again, and the journal keeps the metered
// spend for a resume.
func TestMeteredCallsCountOnce(t *testing.T) {
	p := &meteredProvider{calls: 50}
	j := eval.NewMemoryJournal()
	opts := eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: 1000}}
	_, err, spent := evaluate(t, opts, loop(3), eval.EvaluateOptions{RunID: "m", Journal: j})
	be := budgetError(t, err)
	// The twelfth call crosses 1,000 and ends the session; no other
	// session starts.
	if p.made.Load() != 12 || spent.Tokens() != 1080 || spent.ModelCalls != 12 || be.Budget != "tokens" || be.Before {
		t.Fatalf("%d calls made, %+v spent, %+v", p.made.Load(), spent, be)
	}
	// Without a budget, three sessions of five calls: 1,350 tokens.
	p = &meteredProvider{calls: 5}
	j = eval.NewMemoryJournal()
	opts = eval.Options{AgentProvider: p}
	_, err, spent = evaluate(t, opts, loop(3), eval.EvaluateOptions{RunID: "m", Journal: j})
	if err != nil || spent.Tokens() != 1350 || spent.ModelCalls != 15 {
		t.Fatalf("%v, %+v", err, spent)
	}
	var resumed eval.Usage
	opts.OnFinish = func(ev eval.FinishEvent) { resumed = ev.Usage }
	rt, _ := eval.New(opts)
	if _, err := rt.Resume(context.Background(), loop(3), eval.ResumeOptions{RunID: "m", Journal: j}); err != nil {
		t.Fatal(err)
	}
	if p.made.Load() != 15 || resumed.Tokens() != 1350 || resumed.ModelCalls != 15 {
		t.Fatalf("resume made %d calls, counted %+v", p.made.Load()-15, resumed)
	}
}

// TestOnExceedAsk: a journaled run whose budget says on_exceed "ask"
// suspends with the question "budget" instead of failing; a resume that
// answers a higher limit serves the finished sessions from the journal,
// counts their spend and goes on; one that answers no higher limit fails.
func TestOnExceedAsk(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 100, OutputTokens: 50}, false)
	j := eval.NewMemoryJournal()
	opts := eval.Options{AgentProvider: p, Budget: &eval.Budget{Tokens: 400, OnExceed: "ask"}, Limits: &eval.Limits{MaxAgentCalls: eval.Unlimited}}
	_, err, spent := evaluate(t, opts, loop(6), eval.EvaluateOptions{RunID: "a", Journal: j})
	var se *eval.SuspendedError
	if !errors.As(err, &se) || len(se.Questions) != 1 || se.Questions[0].ID != "budget" {
		t.Fatalf("want the run suspended on the question budget, got %v", err)
	}
	q := se.Questions[0]
	if !strings.Contains(q.Text, "the run's tokens budget is exceeded (450 of 400 spent). What is the new limit of the run's tokens budget?") || q.Schema["exclusiveMinimum"] != float64(450) {
		t.Errorf("question %+v", q)
	}
	if len(p.Calls()) != 3 || spent.Tokens() != 450 {
		t.Fatalf("%d sessions, %d tokens before the question", len(p.Calls()), spent.Tokens())
	}
	//lint:ignore ST1008 as evaluate: the spend is reported whatever the error
	resume := func(answer any) (string, error, eval.Usage) {
		var got eval.Usage
		o := opts
		o.OnFinish = func(ev eval.FinishEvent) { got = ev.Usage }
		rt, err := eval.New(o)
		if err != nil {
			t.Fatal(err)
		}
		out, err := rt.Resume(context.Background(), loop(6), eval.ResumeOptions{RunID: "a", Journal: j, Answers: map[string]any{"budget": answer}})
		return out, err, got
	}
	if _, err, _ := resume(int64(300)); err == nil || !strings.Contains(err.Error(), "the new limit 300 is not above what the run spent") {
		t.Fatalf("a lower limit: %v", err)
	}
	p.Reset()
	out, err, spent := resume(int64(2000))
	if err != nil || !strings.HasPrefix(out, "step 0step 1") {
		t.Fatalf("resume: %q, %v", out, err)
	}
	// The first three sessions come from the journal; three run live.
	if len(p.Calls()) != 3 || spent.Tokens() != 900 {
		t.Fatalf("%d live sessions, %d tokens counted; want 3 and 900", len(p.Calls()), spent.Tokens())
	}
	// Without a journal and without Options.Ask, "ask" fails as "fail".
	p.Reset()
	_, err, _ = evaluate(t, opts, loop(6))
	if be := budgetError(t, err); be.Budget != "tokens" || errors.As(err, &se) {
		t.Fatalf("without a journal: %v", err)
	}
	// With Options.Ask, the person asked gives the new limit.
	p.Reset()
	asked := 0
	o := opts
	o.Ask = func(_ context.Context, q eval.Question) (any, error) {
		asked++
		return int64(10_000), nil
	}
	if _, err, spent := evaluate(t, o, loop(6)); err != nil || asked != 1 || spent.Tokens() != 900 {
		t.Fatalf("asked %d times: %v, %d tokens", asked, err, spent.Tokens())
	}
}

// costReporter reports its session's cumulative cost through the watch
// while it runs, as an ACP agent's usage_update does: each session
// reports $0.10 steps up to `steps` of them, stopping when the watch
// refuses one. Its own usage report names tokens and no cost.
type costReporter struct {
	steps    int
	reported atomic.Int64
}

func (p *costReporter) Name() string      { return "reporter" }
func (p *costReporter) ReportsCost() bool { return true }
func (p *costReporter) Run(ctx context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	for i := 1; i <= p.steps; i++ {
		p.reported.Add(1)
		if err := exec.Watch.ReportCost(0.1 * float64(i)); err != nil {
			return nil, err
		}
	}
	return &eval.AgentResponse{Text: "done", Usage: `{"input_tokens": 10, "output_tokens": 5}`}, nil
}

// TestReportedCostIsChecked: an unmetered provider's reported cost counts
// as it is reported, so a cost budget stops the session at the report
// that crosses it; the cost it reported is the session's cost (counted
// once beside its report's tokens) and the journal keeps it for a resume.
func TestReportedCostIsChecked(t *testing.T) {
	p := &costReporter{steps: 50}
	_, err, spent := evaluate(t, eval.Options{AgentProvider: p, Budget: &eval.Budget{CostUSD: 0.45}}, loop(3))
	be := budgetError(t, err)
	if p.reported.Load() != 5 || be.Budget != "cost_usd" || spent.CostUSD < 0.4999 || spent.CostUSD > 0.5001 {
		t.Fatalf("%d reports, %+v spent, %+v", p.reported.Load(), spent, be)
	}
	p = &costReporter{steps: 3}
	j := eval.NewMemoryJournal()
	opts := eval.Options{AgentProvider: p, Budget: &eval.Budget{CostUSD: 10}}
	_, err, spent = evaluate(t, opts, loop(2), eval.EvaluateOptions{RunID: "c", Journal: j})
	if err != nil || spent.CostUSD < 0.5999 || spent.CostUSD > 0.6001 || spent.Tokens() != 30 || spent.ModelCalls != 2 {
		t.Fatalf("%v, %+v", err, spent)
	}
	var resumed eval.Usage
	opts.OnFinish = func(ev eval.FinishEvent) { resumed = ev.Usage }
	rt, _ := eval.New(opts)
	if _, err := rt.Resume(context.Background(), loop(2), eval.ResumeOptions{RunID: "c", Journal: j}); err != nil {
		t.Fatal(err)
	}
	if p.reported.Load() != 6 || resumed.CostUSD < 0.5999 || resumed.CostUSD > 0.6001 || resumed.Tokens() != 30 {
		t.Fatalf("resume reported %d more, counted %+v", p.reported.Load()-6, resumed)
	}
}

// TestComponentSpansCarrySums: a component span ends with what the agents
// under it spent (the GenAI usage attributes), its parallel() span too,
// and an agent span with its own session's spend.
func TestComponentSpansCarrySums(t *testing.T) {
	p := spender(t, eval.Usage{InputTokens: 100, OutputTokens: 50, CostUSD: 0.25}, true)
	sink := &recordingSink{}
	inner := &eval.Component{Name: "Inner", Position: pos(2), Fn: func(cc *eval.ComponentContext) (any, error) {
		return &eval.Parallel{Position: pos(3), Branches: []any{&eval.Agent{Position: pos(4), Children: []any{"a"}}, &eval.Agent{Position: pos(5), Children: []any{"b"}}}}, nil
	}}
	outer := &eval.Component{Name: "Outer", Position: pos(1), Entry: true, Fn: func(cc *eval.ComponentContext) (any, error) {
		return []any{inner, &eval.Agent{Position: pos(6), Children: []any{"c"}}}, nil
	}}
	if _, err, _ := evaluate(t, eval.Options{AgentProvider: p, Trace: []eval.TraceSink{sink}}, outer); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"Outer": 300, "Inner": 200, "Parallel": 200, "Agent": 100}
	seen := 0
	for _, e := range sink.events {
		if e.Type != eval.SpanEnd || (e.Kind != "component" && e.Name != "Agent") {
			continue
		}
		seen++
		if w := want[e.Name]; e.Attributes["gen_ai.usage.input_tokens"] != w {
			t.Errorf("%s span ends with %v input tokens, want %d (%v)", e.Name, e.Attributes["gen_ai.usage.input_tokens"], w, e.Attributes)
		}
	}
	if seen != 6 {
		t.Errorf("%d component and agent spans, want 6", seen)
	}
}
