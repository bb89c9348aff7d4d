package eval_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

// Benchmarks of the evaluator on large trees. They use the deterministic
// provider (which records every call) and no limits unless a benchmark says
// otherwise. The node trees are immutable, so they are built once outside
// the timed loop; the provider is reset on every iteration so its recorded
// calls do not pile up across iterations.

// benchN is the number of agents of the wide benchmarks.
const benchN = 10_000

// benchProvider returns a deterministic provider: the echo responder when
// constant is "", otherwise a responder that always answers constant.
func benchProvider(b *testing.B, constant string) *deterministic.Agent {
	b.Helper()
	var r deterministic.RespondFunc
	if constant != "" {
		resp := &eval.AgentResponse{Text: constant}
		r = func(context.Context, *eval.AgentRequest, int) (*eval.AgentResponse, error) { return resp, nil }
	}
	p, err := deterministic.New(deterministic.Options{Respond: r})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func benchRuntime(b *testing.B, p eval.AgentProvider, limits eval.Limits) *eval.Runtime {
	b.Helper()
	rt, err := eval.New(eval.Options{AgentProvider: p, Limits: &limits})
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// usageProvider echoes the prompt and reports 100 input and 20 output
// tokens a session.
func usageProvider(b *testing.B) *deterministic.Agent {
	b.Helper()
	p, err := deterministic.New(deterministic.Options{Usage: func(context.Context, *eval.AgentRequest, int) (eval.Usage, error) {
		return eval.Usage{InputTokens: 100, OutputTokens: 20}, nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// budgetRuntime is benchRuntime with a run budget that is never reached.
func budgetRuntime(b *testing.B, p eval.AgentProvider, limits eval.Limits) *eval.Runtime {
	b.Helper()
	rt, err := eval.New(eval.Options{AgentProvider: p, Limits: &limits, Budget: &eval.Budget{Tokens: 1 << 40, ModelCalls: 1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// siblingAgents returns n sibling agents with the prompt "p".
func siblingAgents(n int) []any {
	agents := make([]any, n)
	for i := range agents {
		agents[i] = &eval.Agent{Children: []any{"p"}}
	}
	return agents
}

// echoNoRecord is an echo provider that records nothing; it isolates the
// evaluator's own cost from the deterministic provider's call log.
type echoNoRecord struct{}

func (echoNoRecord) Name() string { return "echo-norecord" }

func (echoNoRecord) Run(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	return &eval.AgentResponse{Text: req.Prompt}, nil
}

// noLimits switches every limit off.
var noLimits = eval.Limits{MaxAgentCalls: eval.Unlimited, MaxConcurrentAgents: eval.Unlimited, MaxDepth: eval.Unlimited, MaxTurnsPerAgent: eval.Unlimited}

func benchEvaluate(b *testing.B, rt *eval.Runtime, reset func(), tree any, wantLen int) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if reset != nil {
			reset()
		}
		text, err := rt.Evaluate(ctx, tree, eval.EvaluateOptions{RunID: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if len(text) != wantLen {
			b.Fatalf("got %d bytes of text, want %d", len(text), wantLen)
		}
	}
}

// BenchmarkSeq10k evaluates 10,000 sibling agents in one Evaluate. The
// norecord sub-benchmark uses a provider without a call log, for
// comparison with the recording deterministic provider.
func BenchmarkSeq10k(b *testing.B) {
	tree := siblingAgents(benchN)
	b.Run("deterministic", func(b *testing.B) {
		p := benchProvider(b, "")
		benchEvaluate(b, benchRuntime(b, p, noLimits), p.Reset, tree, benchN)
	})
	b.Run("norecord", func(b *testing.B) {
		benchEvaluate(b, benchRuntime(b, echoNoRecord{}, noLimits), nil, tree, benchN)
	})
	// usage reports each session's usage; budget also counts it against
	// a run budget (and a budget() around the agents), which is what
	// budget accounting costs.
	b.Run("usage", func(b *testing.B) {
		p := usageProvider(b)
		benchEvaluate(b, benchRuntime(b, p, noLimits), p.Reset, tree, benchN)
	})
	b.Run("usage-budget", func(b *testing.B) {
		p := usageProvider(b)
		benchEvaluate(b, budgetRuntime(b, p, noLimits), p.Reset, &eval.BudgetScope{Children: tree, Budget: eval.Budget{Tokens: 1 << 40}}, benchN)
	})
	// limit4 is the baseline of BenchmarkParallel10k/limit4: the same
	// agents under the default concurrency limit.
	b.Run("limit4", func(b *testing.B) {
		p := benchProvider(b, "")
		benchEvaluate(b, benchRuntime(b, p, limit4), p.Reset, tree, benchN)
	})
}

// limit4 is noLimits with the default concurrency limit of 4 agents.
var limit4 = eval.Limits{MaxAgentCalls: eval.Unlimited, MaxConcurrentAgents: 4, MaxDepth: eval.Unlimited, MaxTurnsPerAgent: eval.Unlimited}

// BenchmarkParallel10k evaluates 10,000 agents as the branches of one
// parallel(), with and without a concurrency limit.
func BenchmarkParallel10k(b *testing.B) {
	tree := &eval.Parallel{Branches: siblingAgents(benchN)}
	for _, bc := range []struct {
		name   string
		limits eval.Limits
	}{
		{"limit4", limit4},
		{"unlimited", noLimits},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := benchProvider(b, "")
			benchEvaluate(b, benchRuntime(b, p, bc.limits), p.Reset, tree, benchN)
		})
		b.Run(bc.name+"/usage", func(b *testing.B) {
			p := usageProvider(b)
			benchEvaluate(b, benchRuntime(b, p, bc.limits), p.Reset, tree, benchN)
		})
		b.Run(bc.name+"/usage-budget", func(b *testing.B) {
			p := usageProvider(b)
			benchEvaluate(b, budgetRuntime(b, p, bc.limits), p.Reset, tree, benchN)
		})
	}
}

// BenchmarkNest100k evaluates a chain of 100,000 nested agents,
// agent(agent(...agent("x"))), whose provider always answers "ok".
func BenchmarkNest100k(b *testing.B) {
	const depth = 100_000
	var tree any = &eval.Agent{Children: []any{"x"}}
	for i := 1; i < depth; i++ {
		tree = &eval.Agent{Children: []any{tree}}
	}
	p := benchProvider(b, "ok")
	benchEvaluate(b, benchRuntime(b, p, noLimits), p.Reset, tree, len("ok"))
}

// BenchmarkLocalEvaluate10k runs one component whose body evaluates an
// agent 10,000 times, one after another, through the component context.
func BenchmarkLocalEvaluate10k(b *testing.B) {
	agent := &eval.Agent{Children: []any{"p"}}
	tree := &eval.Component{Name: "local", Entry: true, Fn: func(cc *eval.ComponentContext) (any, error) {
		n := 0
		for range benchN {
			text, err := cc.Evaluate(agent)
			if err != nil {
				return nil, err
			}
			n += len(text)
		}
		return n, nil
	}}
	p := benchProvider(b, "")
	benchEvaluate(b, benchRuntime(b, p, noLimits), p.Reset, tree, len("10000"))
}

// BenchmarkEvaluateAll10k runs one component whose body evaluates 10,000
// agents with one EvaluateAll, with and without a concurrency limit; it
// compares with BenchmarkLocalEvaluate10k (the same agents one after
// another).
func BenchmarkEvaluateAll10k(b *testing.B) {
	values := siblingAgents(benchN)
	tree := &eval.Component{Name: "all", Entry: true, Fn: func(cc *eval.ComponentContext) (any, error) {
		texts, err := cc.EvaluateAll(values, eval.Position{})
		if err != nil {
			return nil, err
		}
		n := 0
		for _, t := range texts {
			n += len(t)
		}
		return n, nil
	}}
	for _, bc := range []struct {
		name   string
		limits eval.Limits
	}{
		{"limit4", limit4},
		{"unlimited", noLimits},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := benchProvider(b, "")
			benchEvaluate(b, benchRuntime(b, p, bc.limits), p.Reset, tree, len("10000"))
		})
	}
}

// BenchmarkRetainedPerCall measures the heap still reachable after
// evaluating 10,000 sibling agents with the recording deterministic
// provider kept alive, per agent call. It reports only the custom metric
// B/call-retained; the timings include two forced GCs per iteration.
func BenchmarkRetainedPerCall(b *testing.B) {
	tree := siblingAgents(benchN)
	ctx := context.Background()
	var (
		total float64
		iters int
	)
	b.ReportAllocs()
	for b.Loop() {
		p := benchProvider(b, "")
		rt := benchRuntime(b, p, noLimits)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		text, err := rt.Evaluate(ctx, tree, eval.EvaluateOptions{RunID: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if len(text) != benchN {
			b.Fatalf("got %d bytes of text, want %d", len(text), benchN)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		// The provider and its call log must survive the second GC.
		runtime.KeepAlive(p)
		runtime.KeepAlive(tree)
		total += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchN
		iters++
	}
	b.ReportMetric(total/float64(iters), "B/call-retained")
}

// BenchmarkSeq10kStructured compares 10,000 sibling agents answering a
// structured request (validated against a schema and rendered as
// canonical JSON) with the same agents answering plain text.
func BenchmarkSeq10kStructured(b *testing.B) {
	schema, err := eval.NewSchema(map[string]any{
		"type":     "object",
		"required": []any{"severity", "summary"},
		"properties": map[string]any{
			"severity": map[string]any{"enum": []any{"low", "high"}},
			"summary":  map[string]any{"type": "string"},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	value := map[string]any{"severity": "high", "summary": "p"}
	resp := &eval.AgentResponse{Structured: value}
	text := &eval.AgentResponse{Text: `{"severity":"high","summary":"p"}`}
	for _, c := range []struct {
		name   string
		schema *eval.Schema
		resp   *eval.AgentResponse
	}{{"text", nil, text}, {"structured", schema, resp}} {
		b.Run(c.name, func(b *testing.B) {
			p, _ := deterministic.New(deterministic.Options{Respond: func(context.Context, *eval.AgentRequest, int) (*eval.AgentResponse, error) { return c.resp, nil }})
			agents := make([]any, benchN)
			for i := range agents {
				agents[i] = &eval.Agent{Schema: c.schema, Children: []any{"p"}}
			}
			benchEvaluate(b, benchRuntime(b, p, noLimits), p.Reset, agents, benchN*len(text.Text))
		})
	}
}
