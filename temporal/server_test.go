package temporal_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/temporal"
)

// TestRunOnServer: against a real Temporal server, a run of the fan-out
// workflow gives the in-process text, and its recorded history replays
// without a non-determinism error.
func TestRunOnServer(t *testing.T) {
	srv := temporaltest.Start(t)
	c := srv.Dial(t)
	agent := &echoAgent{}
	w := worker.New(c, "aml", worker.Options{})
	temporal.Register(w, temporal.Options{DefaultAgent: agent})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	path := filepath.Join(t.TempDir(), "fan.star")
	if err := os.WriteFile(path, []byte(fanOutFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, path, &echoAgent{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := temporal.Pack(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "fan", TaskQueue: "aml"}, temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Text != want {
		t.Fatalf("on the server:\n%s\nin process:\n%s", res.Text, want)
	}
	t.Logf("%d sessions in %s", agent.calls.Load(), time.Since(started).Round(time.Millisecond))

	iter := c.GetWorkflowHistory(ctx, "fan", run.GetRunID(), false, 0)
	replayer := worker.NewWorkflowReplayer()
	temporal.RegisterWorkflow(replayer, temporal.Options{})
	hist := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	if err := replayer.ReplayWorkflowHistory(quiet{}, hist); err != nil {
		t.Fatalf("the recorded history does not replay: %v", err)
	}
}
