package temporal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/temporal"
)

// hangAgent runs until its session is cancelled.
type hangAgent struct{ started chan struct{} }

func (hangAgent) Name() string { return "hang" }
func (a hangAgent) Run(ctx context.Context, _ *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	select {
	case a.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// TestClientOnServer: temporal.Client starts a run, follows it to its
// result, answers its questions (refusing an answer its schema does not
// accept, or one for a question it does not wait for) and cancels a run
// whose session hangs, which ends as cancelled.
func TestClientOnServer(t *testing.T) {
	srv := temporaltest.Start(t)
	c := srv.Dial(t)
	hang := hangAgent{started: make(chan struct{}, 1)}
	w := worker.New(c, "client", worker.Options{})
	temporal.Register(w, temporal.Options{DefaultAgent: hang})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ac := temporal.NewClient(c, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	id, err := ac.Start(ctx, packSource(t, t.TempDir(), "ask.star", askFlow), temporal.StartOptions{})
	if err != nil || !strings.HasPrefix(id, "aml-") {
		t.Fatalf("Start: %q, %v", id, err)
	}
	waitFor := func(qid string) {
		t.Helper()
		for end := time.Now().Add(time.Minute); ; {
			st, err := ac.State(ctx, id)
			if err == nil && len(st.Questions) == 1 && st.Questions[0].ID == qid {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("the run never asked %q: %+v, %v", qid, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("reviewer")
	if err := ac.Answer(ctx, id, temporal.Answer{ID: "nobody", Value: "x"}); err == nil || !strings.Contains(err.Error(), `does not wait for an answer to "nobody"`) {
		t.Fatalf("an answer to no question: %v", err)
	}
	if err := ac.Answer(ctx, id, temporal.Answer{ID: "reviewer", Value: "ana"}); err != nil {
		t.Fatal(err)
	}
	waitFor("c#0/ask#1")
	if err := ac.Answer(ctx, id, temporal.Answer{ID: "c#0/ask#1", Value: "maybe"}); err == nil {
		t.Fatal("a string answered a boolean question")
	}
	if err := ac.Answer(ctx, id, temporal.Answer{ID: "c#0/ask#1", Value: true}); err != nil {
		t.Fatal(err)
	}
	if text, err := ac.Result(ctx, id); err != nil || text != "ana True" {
		t.Fatalf("Result: %q, %v", text, err)
	}

	id, err = ac.Start(ctx, packSource(t, t.TempDir(), "hang.star", "def main():\n    return agent(\"wait\")\n"), temporal.StartOptions{ID: "hanging"})
	if err != nil || id != "hanging" {
		t.Fatalf("Start: %q, %v", id, err)
	}
	<-hang.started
	if res, err := ac.Cancel(ctx, id, time.Minute); err != nil || res.Terminated {
		t.Fatalf("Cancel: %+v, %v", res, err)
	}
	if _, err := ac.Cancel(ctx, id, time.Minute); !errors.Is(err, temporal.ErrAlreadyEnded) {
		t.Fatalf("Cancel of a run that ended: %v", err)
	}
	_, err = ac.Result(ctx, id)
	var re *temporal.RunError
	if !errors.As(err, &re) || !re.Cancelled {
		t.Fatalf("the cancelled run's result: %v", err)
	}
}
