package temporaltest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/internal/temporaltest"
)

func greet(ctx context.Context, name string) (string, error) { return "hello " + name, nil }

// waitThenGreet waits for a signal, then greets its value in an activity.
func waitThenGreet(ctx workflow.Context) (string, error) {
	var name string
	workflow.GetSignalChannel(ctx, "name").Receive(ctx, &name)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, greet, name).Get(ctx, &out)
	return out, err
}

// TestServerKeepsRunsAcrossRestart: the test server keeps a waiting
// workflow across a restart (its database is a file), and the run
// finishes once signalled.
func TestServerKeepsRunsAcrossRestart(t *testing.T) {
	srv := temporaltest.Start(t)
	c := srv.Dial(t)
	w := worker.New(c, "smoke", worker.Options{})
	w.RegisterWorkflow(waitThenGreet)
	w.RegisterActivity(greet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "smoke", TaskQueue: "smoke"}, waitThenGreet)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted the server in %s", time.Since(started).Round(time.Millisecond))
	for {
		err = c.SignalWorkflow(ctx, "smoke", run.GetRunID(), "name", "restart")
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("signal after the restart: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "hello restart") {
		t.Fatalf("result %q", out)
	}
}
