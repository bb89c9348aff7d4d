package temporal_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

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

// TestSecretsStayOutOfHistory: an env() value that a prompt carries, that
// the agent says back and that a failure quotes reaches the result as it
// is, but no event of the run's history holds it.
func TestSecretsStayOutOfHistory(t *testing.T) {
	const secret = "s3cr3t-token-4242"
	srv := temporaltest.Start(t)
	c := srv.Dial(t)
	env := func(name string) (string, bool) {
		if name == "TOKEN" {
			return secret, true
		}
		return "", false
	}
	w := worker.New(c, "secrets", worker.Options{})
	agent := &echoAgent{}
	temporal.Register(w, temporal.Options{DefaultAgent: agent, Env: env, EnvKey: []byte("k")})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(id, src string) (string, error) {
		b := packSource(t, dir, id+".star", src)
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "secrets"}, temporal.WorkflowName, temporal.RunInput{Bundle: b})
		if err != nil {
			t.Fatal(err)
		}
		var res temporal.RunResult
		err = r.Get(ctx, &res)
		iter := c.GetWorkflowHistory(ctx, id, r.GetRunID(), false, 0)
		for iter.HasNext() {
			ev, herr := iter.Next()
			if herr != nil {
				t.Fatal(herr)
			}
			b, _ := proto.Marshal(ev)
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("history event %d (%s) of run %s holds the secret", ev.EventId, ev.EventType, id)
			}
		}
		return res.Text, err
	}
	// The workflow computes with what the agent said (the value is back
	// in it), and returns something else: a result is stored as it is.
	src := "def main():\n    said = evaluate(agent(\"use \" + env(\"TOKEN\") + \" now\"))\n    return \"%s %d\" % (said == \"<use \" + env(\"TOKEN\") + \" now|>\", len(said))\n"
	text, err := run("ok", src)
	if want := fmt.Sprintf("True %d", len("<use "+secret+" now|>")); err != nil || text != want {
		t.Fatalf("text %q, %v; want %q", text, err, want)
	}
	if p := agent.prompts; len(p) != 1 || p[0] != "use "+secret+" now" {
		t.Fatalf("the agent was given %q", p)
	}
	// A worker replays the run with the value the run read, whatever its
	// own environment holds; one without the key cannot replay it.
	replay := func(lookup func(string) (string, bool), key string) error {
		iter := c.GetWorkflowHistory(ctx, "ok", "", false, 0)
		hist := &historypb.History{}
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			hist.Events = append(hist.Events, ev)
		}
		r := worker.NewWorkflowReplayer()
		temporal.RegisterWorkflow(r, temporal.Options{Env: lookup, EnvKey: []byte(key)})
		return r.ReplayWorkflowHistory(quiet{}, hist)
	}
	other := func(name string) (string, bool) { return "another-token", name == "TOKEN" }
	if err := replay(other, "k"); err != nil {
		t.Fatalf("replay on a worker with another TOKEN: %v", err)
	}
	if err := replay(env, "another key"); err == nil {
		t.Fatal("a worker with another key replayed the run")
	}
	_, err = run("fails", "def main():\n    return agent(\"fail with \" + env(\"TOKEN\"))\n")
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("a failure quoting the secret: %v", err)
	}
}

// scopesFromBranches opens scopes in parallel() branches: host scripts
// that share the run's host lease, sandboxes of their own and a workspace
// acquired in one branch and released when the run ends, in another
// coroutine than the one that opened its session.
const scopesFromBranches = `configure(sandbox_provider = local_sandbox(workspace = %q), workspace_provider = deterministic_workspace())

def _branch(i):
    return sandbox(script("printf s%%d" %% i, shell = "sh"), access = "read-write")

def main():
    return [
        parallel(script("printf a", shell = "sh"), script("printf b", shell = "sh")),
        "|",
        parallel([_branch(i) for i in range(3)]),
        "|",
        parallel(workspace(file("x", path = "x.txt"), include(path = "x.txt", title = False)), script("printf c", shell = "sh")),
    ]
`

// TestScopesFromBranchesOnServer: scopes whose Temporal sessions parallel()
// branches open, and whose release another coroutine runs, give the
// in-process text on a real server (the SDK completes a session through
// the context of the coroutine that created it, so a session completed
// from another branch once blocked the run for good).
func TestScopesFromBranchesOnServer(t *testing.T) {
	srv := temporaltest.Start(t)
	c := srv.Dial(t)
	w := worker.New(c, "branches", worker.Options{EnableSessionWorker: true})
	leases := temporal.Register(w, temporal.Options{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	dir := t.TempDir()
	b := packSource(t, dir, "branches.star", fmt.Sprintf(scopesFromBranches, t.TempDir()))
	want, err := inProcess(t, filepath.Join(dir, "branches.star"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "branches", TaskQueue: "branches"}, temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the run: %v", err)
	}
	if res.Text != want {
		t.Fatalf("on the server %q, in process %q", res.Text, want)
	}
	if n := leases.Len(); n != 0 {
		t.Fatalf("%d leases still held after the run", n)
	}
}
