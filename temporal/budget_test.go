package temporal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.starlark.net/starlark"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/temporal"
)

// spendingAgent answers as an agent on a worker does, with the usage it
// reports: 100 input and 50 output tokens a session.
type spendingAgent struct{ calls atomic.Int64 }

func (a *spendingAgent) Name() string { return "spending" }

func (a *spendingAgent) Run(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	a.calls.Add(1)
	return &eval.AgentResponse{Text: req.Prompt, Usage: `{"input_tokens": 100, "output_tokens": 50}`}, nil
}

const budgetFlow = `configure(budget = {"tokens": 1000}, max_agent_calls = 0)

def main():
    return [evaluate(agent("step %d" % i)) for i in range(20)]
`

// TestBudgetAcrossContinueAsNew: a run that continues as new every two
// effects keeps its spend (each execution counts its replayed sessions
// again), so its token budget stops it after the same seventh session as
// in process, no session runs twice, and its failure carries what it
// spent.
func TestBudgetAcrossContinueAsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budget.star")
	if err := os.WriteFile(path, []byte(budgetFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := &spendingAgent{}
	_, executions, err := runContinued(t, path, temporal.Options{DefaultAgent: agent}, 2, nil)
	var ae *sdktemporal.ApplicationError
	if !errors.As(err, &ae) || !strings.Contains(ae.Error(), "the run's tokens budget is exceeded (1,050 of 1,000 spent)") {
		t.Fatalf("want the budget failure, got %v", err)
	}
	var f temporal.RunFailure
	if err := ae.Details(&f); err != nil || f.Usage == nil || f.Usage.Tokens() != 1050 || f.Usage.ModelCalls != 7 {
		t.Fatalf("failure details %+v (%v)", f.Usage, err)
	}
	if executions < 3 || agent.calls.Load() != 7 {
		t.Fatalf("%d executions, %d sessions; want several and 7", executions, agent.calls.Load())
	}
}

// TestBudgetWithTheRun: a budget given with the run (aml run --temporal's
// spend flags) replaces configure()'s, and a run that succeeds reports
// its spend.
func TestBudgetWithTheRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budget.star")
	if err := os.WriteFile(path, []byte(budgetFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := temporal.Pack(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		budget eval.Budget
		fails  string
	}{
		{eval.Budget{Tokens: 300}, "the run's tokens budget is used up (300 of 300 spent)"},
		{eval.Budget{Tokens: 1 << 40}, ""},
	} {
		env, _ := testEnvLeases(temporal.Options{DefaultAgent: &spendingAgent{}})
		env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b, Budget: &tc.budget})
		err := env.GetWorkflowError()
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Fatalf("budget %+v: %v", tc.budget, err)
			}
			continue
		}
		var res temporal.RunResult
		if err != nil || env.GetWorkflowResult(&res) != nil || res.Usage == nil || res.Usage.Tokens() != 20*150 {
			t.Fatalf("budget %+v: %v, %+v", tc.budget, err, res.Usage)
		}
	}
}

// meteredCalls counts the model calls metered_agent() sessions made, on
// any worker.
var meteredCalls atomic.Int64

// meteredAgent makes its model calls through the session's meter, as an
// agent behind the model gateway does: up to calls of them, 90 tokens
// each, until the meter refuses one (the gateway answers 429 and the
// agent gives up). Its own usage report claims a million tokens, which
// must not count.
type meteredAgent struct{ calls int }

func (a *meteredAgent) Name() string { return "metered" }
func (a *meteredAgent) Meters(_ *eval.AgentRequest, sb *eval.SandboxSession) bool {
	return sb == nil
}
func (a *meteredAgent) Run(_ context.Context, req *eval.AgentRequest, exec *eval.AgentExecution) (*eval.AgentResponse, error) {
	if exec.Meter == nil {
		return nil, errors.New("the session is not metered on its worker")
	}
	for range a.calls {
		if exec.Meter.Reserve() != nil {
			break
		}
		meteredCalls.Add(1)
		if err := exec.Meter.Charge(eval.Usage{InputTokens: 70, OutputTokens: 20}, req.Model); err != nil {
			return nil, err
		}
		if len(req.Tools) > 0 {
			if _, err := req.Tools[0].Call(context.Background(), map[string]any{}); err != nil {
				break // the tool call was refused: the agent gives up
			}
		}
	}
	return &eval.AgentResponse{Text: "done", Usage: `{"input_tokens": 1000000}`}, nil
}

var meteredExtension = &starlib.Extension{Name: "metered", Builtins: []*starlib.Builtin{{
	Name: "metered_agent", Group: "providers", Doc: "A test provider whose sessions are metered.",
	Params: []starlib.Param{{Name: "calls", Type: "int"}},
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		n, _, _ := c.Int("calls")
		return &starlib.AgentProviderValue{Provider: &meteredAgent{calls: int(n)}}, nil
	},
}}}

// TestMeteredOnTheWorker: a session of a metering provider is metered on
// its worker against what the run's budgets had left when it started: a
// token budget stops it at the call that crosses it, there and not at its
// end; a model_calls budget refuses the call past it; what the worker
// counted is the run's spend (the agent's own report is not counted
// again).
func TestMeteredOnTheWorker(t *testing.T) {
	for _, tc := range []struct {
		name, budget  string
		calls         int
		made          int64
		tokens, model int64
		fails         string
	}{
		{"no budget", `{}`, 5, 15, 1350, 15, ""},
		{"tokens", `{"tokens": 1000}`, 50, 12, 1080, 12, "the run's tokens budget is exceeded (1,080 of 1,000 spent)"},
		{"model calls", `{"model_calls": 7}`, 5, 7, 630, 7, "the run's model_calls budget is used up (7 of 7 spent)"},
		{"tool calls", `{"tool_calls": 4}`, 3, 5, 450, 5, "the run's tool_calls budget is used up (4 of 4 spent)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meteredCalls.Store(0)
			src := "p = metered_agent(calls = " + strconv.Itoa(tc.calls) + ")\nconfigure(agent_provider = p, budget = " + tc.budget + ")\n\n" +
				"t = define_tool(name = \"t\", description = \"d\", execute = lambda input: \"ok\")\n" +
				"def main():\n    return [evaluate(agent(tool(t), \"step %d\" % i)) for i in range(3)]\n"
			b := packSource(t, t.TempDir(), "metered.star", src)
			env := testEnv(temporal.Options{Extensions: []*starlib.Extension{meteredExtension}})
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
			err := env.GetWorkflowError()
			var usage *eval.Usage
			if tc.fails == "" {
				var res temporal.RunResult
				if err != nil || env.GetWorkflowResult(&res) != nil {
					t.Fatalf("the run failed: %v", err)
				}
				usage = res.Usage
			} else {
				var ae *sdktemporal.ApplicationError
				if !errors.As(err, &ae) || !strings.Contains(ae.Error(), tc.fails) {
					t.Fatalf("want %q, got %v", tc.fails, err)
				}
				var f temporal.RunFailure
				if err := ae.Details(&f); err != nil {
					t.Fatal(err)
				}
				usage = f.Usage
			}
			if meteredCalls.Load() != tc.made || usage == nil || usage.Tokens() != tc.tokens || usage.ModelCalls != tc.model {
				t.Fatalf("%d calls made, %+v counted; want %d calls, %d tokens, %d model calls", meteredCalls.Load(), usage, tc.made, tc.tokens, tc.model)
			}
		})
	}
}

// limitedAgent fails its first two sessions as a model's rate limit
// does, then answers.
type limitedAgent struct{ calls atomic.Int64 }

func (a *limitedAgent) Name() string { return "limited" }
func (a *limitedAgent) Run(_ context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	if a.calls.Add(1) <= 2 {
		return nil, &eval.RateLimitError{RetryAfter: 3 * time.Second, Err: errors.New("429 Too Many Requests")}
	}
	return &eval.AgentResponse{Text: "through"}, nil
}

// TestRateLimitedSessionOnAWorker: a session that a rate limit ended on
// its worker is run again by workflow code, after the wait the limit
// asked for (a workflow timer), as in process; the bound holds too.
func TestRateLimitedSessionOnAWorker(t *testing.T) {
	for _, tc := range []struct {
		attempts string
		calls    int64
		fails    string
	}{
		{"5", 3, ""},
		{"2", 2, "a rate limit ended it 2 times"},
	} {
		agent := &limitedAgent{}
		src := "configure(rate_limit_retry = {\"attempts\": " + tc.attempts + "})\n\ndef main():\n    return agent(\"x\")\n"
		b := packSource(t, t.TempDir(), "limited.star", src)
		env := testEnv(temporal.Options{DefaultAgent: agent})
		env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{Bundle: b})
		err := env.GetWorkflowError()
		if agent.calls.Load() != tc.calls {
			t.Errorf("attempts %s: %d sessions, want %d (%v)", tc.attempts, agent.calls.Load(), tc.calls, err)
		}
		if tc.fails == "" {
			var res temporal.RunResult
			if err != nil || env.GetWorkflowResult(&res) != nil || res.Text != "through" {
				t.Errorf("attempts %s: %v, %q", tc.attempts, err, res.Text)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.fails) || !strings.Contains(err.Error(), "429 Too Many Requests") {
			t.Errorf("attempts %s: %v, want %q", tc.attempts, err, tc.fails)
		}
	}
}
