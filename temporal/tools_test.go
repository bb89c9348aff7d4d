package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/temporal"
)

// callingAgent is a Go agent provider that calls every tool it is granted,
// in order, with the input {"n": <index>} and answers with what they
// returned (or the error a call got).
type callingAgent struct{}

func (callingAgent) Name() string { return "tools" }
func (callingAgent) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	var out []string
	for i, t := range req.Tools {
		v, err := t.Call(ctx, map[string]any{"n": i})
		if err != nil {
			out = append(out, t.Name+" failed: "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("%s=%v", t.Name, v))
	}
	if len(out) == 0 {
		return nil, errors.New("no tools granted")
	}
	return &eval.AgentResponse{Text: strings.Join(out, ",") + ";"}, nil
}

const componentToolsFlow = `def _top(input):
    return "top%d" % input["n"]

top = define_tool(name = "top", description = "A tool of the top level.", input = schema.object(n = schema.integer()), execute = _top)

def Review(label):
    def _local(input):
        if input["n"] > 5:
            fail("too big")
        return "%s-local%d" % (label, input["n"])
    local = define_tool(name = "local", description = "A tool of a component body.", input = schema.object(n = schema.integer()), execute = _local)
    return agent("use them", tool(top), tool(local))

def main():
    return parallel([Review("r%d" % i) for i in range(4)])
`

// TestComponentToolsOnServer: a tool that a component body defines (a
// closure over the component's argument) is called when an agent on a
// worker calls it: the call goes back to the workflow, which runs the
// body, and the result reaches the agent. The text is the in-process one.
func TestComponentToolsOnServer(t *testing.T) {
	srv := temporaltest.Start(t)
	c := srv.Dial(t)
	w := worker.New(c, "tools", worker.Options{})
	temporal.Register(w, temporal.Options{DefaultAgent: callingAgent{}, Client: c})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	path := filepath.Join(t.TempDir(), "tools.star")
	if err := os.WriteFile(path, []byte(componentToolsFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := inProcess(t, path, callingAgent{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := temporal.Pack(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "tools", TaskQueue: "tools"}, temporal.WorkflowName, temporal.RunInput{Bundle: b})
	if err != nil {
		t.Fatal(err)
	}
	var res temporal.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Text != want || !strings.Contains(res.Text, "local=r3-local1") {
		t.Fatalf("on the server:\n%s\nin process:\n%s", res.Text, want)
	}
}
