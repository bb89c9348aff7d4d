package temporal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/aml-go/aml/eval"
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
