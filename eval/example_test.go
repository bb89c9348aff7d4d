package eval_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

// A tree is evaluated by a Runtime: here one agent session whose prompt
// is the text of its children, answered by the credential-free
// deterministic provider (which echoes the prompt).
func ExampleRuntime_Evaluate() {
	agent, err := deterministic.New(deterministic.Options{})
	if err != nil {
		panic(err)
	}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		panic(err)
	}
	out, err := rt.Evaluate(context.Background(), &eval.Agent{Provider: agent, Children: []any{"Review ", "main.go"}})
	fmt.Println(out, err)
	// Output: Review main.go <nil>
}

// shout is an agent provider: AgentProvider is the whole contract, a name
// and Run, safe for concurrent use; the optional capabilities are other
// interfaces it may also implement.
type shout struct{ sessions atomic.Int64 }

func (s *shout) Name() string { return "shout" }

func (s *shout) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("shout: %w", context.Cause(ctx))
	}
	s.sessions.Add(1)
	return &eval.AgentResponse{Text: strings.ToUpper(req.Prompt)}, nil
}

// Implementing a provider: the evaluator calls Run once per agent()
// session, here for two branches that run in parallel, whose texts are
// joined in branch order.
func Example_provider() {
	p := &shout{}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		panic(err)
	}
	out, err := rt.Evaluate(context.Background(), &eval.Parallel{Branches: []any{
		&eval.Agent{Provider: p, Children: []any{"left"}},
		&eval.Agent{Provider: p, Children: []any{"right"}},
	}})
	fmt.Printf("%q %v, %d sessions\n", out, err, p.sessions.Load())
	// Output: "LEFTRIGHT" <nil>, 2 sessions
}

// A journaled run records each effect (here each agent session); resuming
// it from its journal replays what was recorded and runs live only what
// was not, as after a crash.
func ExampleRuntime_Resume() {
	p := &shout{}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		panic(err)
	}
	tree := func() any {
		return []any{
			&eval.Agent{Provider: p, Children: []any{"one"}},
			" and ",
			&eval.Agent{Provider: p, Children: []any{"two"}},
		}
	}
	j := eval.NewMemoryJournal()
	out, err := rt.Evaluate(context.Background(), tree(), eval.EvaluateOptions{RunID: "r", Journal: j})
	fmt.Println(out, err, p.sessions.Load(), "sessions,", j.Len(), "effects recorded")

	// A crash after the first session leaves a journal of one effect.
	crashed := j.Truncated(1)
	p.sessions.Store(0)
	out, err = rt.Resume(context.Background(), tree(), eval.ResumeOptions{RunID: "r", Journal: crashed})
	fmt.Println(out, err, p.sessions.Load(), "session run again")
	// Output:
	// ONE and TWO <nil> 2 sessions, 2 effects recorded
	// ONE and TWO <nil> 1 session run again
}
