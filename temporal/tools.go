package temporal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
)

// Tools defined in component bodies. A tool that the workflow defined
// while it ran (a define_tool() in a component body, a closure) cannot be
// defined again by the worker that runs the agent session, so its calls
// go back to the workflow: the worker signals the call (ToolSignal) and
// waits for its result, which it reads with ToolResultQuery; the workflow
// runs the tool's execute function on a coroutine of its own, as the
// evaluator runs any tool call (traced, with its checks). Updates are not
// used: Temporal caps them per workflow. A call costs one signal in
// history; its result never enters history.

// ToolSignal carries a ToolCall to the run; ToolResultQuery returns its
// ToolResult.
const (
	ToolSignal      = "aml.tool"
	ToolResultQuery = "aml.toolresult"
)

// ToolCall is one call of a workflow-defined tool by an agent session.
type ToolCall struct {
	// Session names the session's grants (AgentCall.ToolSession); ID is
	// the call's id, unique in the run.
	Session string `json:"session"`
	ID      string `json:"id"`
	Tool    string `json:"tool"`
	Input   any    `json:"input"`
}

// ToolResult is the outcome of a ToolCall.
type ToolResult struct {
	Done   bool   `json:"done"`
	Output any    `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

// toolPollInterval is how often a worker asks for a call's result.
const toolPollInterval = 50 * time.Millisecond

// toolRelay serves the calls of workflow-defined tools in workflow code.
// Coroutines run one at a time, so it needs no lock.
type toolRelay struct {
	sessions map[string][]*eval.AgentTool
	results  map[string]ToolResult
	next     int
	ctx      context.Context
}

// listen starts serving ToolSignal and ToolResultQuery.
func (r *toolRelay) listen(wctx workflow.Context, ctx context.Context) error {
	r.sessions, r.results, r.ctx = map[string][]*eval.AgentTool{}, map[string]ToolResult{}, ctx
	if err := workflow.SetQueryHandler(wctx, ToolResultQuery, func(id string) (ToolResult, error) {
		return r.results[id], nil
	}); err != nil {
		return err
	}
	workflow.Go(wctx, func(c workflow.Context) {
		ch := workflow.GetSignalChannel(c, ToolSignal)
		for {
			var call ToolCall
			if !ch.Receive(c, &call) {
				return
			}
			r.serve(c, call)
		}
	})
	return nil
}

// open registers the granted tools of a session and returns its name;
// close forgets them and their results.
func (r *toolRelay) open(tools []*eval.AgentTool) string {
	r.next++
	name := "s" + strconv.Itoa(r.next)
	r.sessions[name] = tools
	return name
}

func (r *toolRelay) close(name string) {
	delete(r.sessions, name)
	prefix := name + "/"
	for id := range r.results {
		if len(id) > len(prefix) && id[:len(prefix)] == prefix {
			delete(r.results, id)
		}
	}
}

// serve runs one call on a coroutine of its own.
func (r *toolRelay) serve(c workflow.Context, call ToolCall) {
	if _, seen := r.results[call.ID]; seen {
		return // a signal sent again: the call runs once
	}
	r.results[call.ID] = ToolResult{}
	var tool *eval.AgentTool
	for _, t := range r.sessions[call.Session] {
		if t.Name == call.Tool {
			tool = t
		}
	}
	if tool == nil {
		r.results[call.ID] = ToolResult{Done: true, Error: fmt.Sprintf("tool %q is not granted to this session, or the session ended", call.Tool)}
		return
	}
	workflow.Go(c, func(c workflow.Context) {
		out, err := tool.Call(withWorkflow(r.ctx, c), call.Input)
		res := ToolResult{Done: true, Output: out}
		if err != nil {
			res = ToolResult{Done: true, Error: err.Error()}
		}
		r.results[call.ID] = res
	})
}

// remoteTool is the grant, on a worker, of a tool that the workflow
// defined while it ran: its calls go to the workflow.
func remoteTool(ctx context.Context, c client.Client, ref ToolRef, session string, seq *atomic.Int64) *eval.AgentTool {
	info := activity.GetInfo(ctx)
	return eval.NewCallTool(ref.Name, ref.Description, ref.InputSchema, func(callCtx context.Context, input any) (any, error) {
		if callCtx == nil {
			callCtx = ctx
		}
		if c == nil {
			return nil, fmt.Errorf("tool %q was defined in a component body, and this worker has no Temporal client to relay its calls to the run with (temporal.Options.Client)", ref.Name)
		}
		id := fmt.Sprintf("%s/%d/%d", session, info.Attempt, seq.Add(1))
		wf := info.WorkflowExecution
		call := ToolCall{Session: session, ID: id, Tool: ref.Name, Input: input}
		if err := c.SignalWorkflow(callCtx, wf.ID, wf.RunID, ToolSignal, call); err != nil {
			return nil, fmt.Errorf("tool %q: the call cannot reach the run: %w", ref.Name, err)
		}
		t := time.NewTicker(toolPollInterval)
		defer t.Stop()
		for {
			v, err := c.QueryWorkflow(callCtx, wf.ID, wf.RunID, ToolResultQuery, id)
			if err == nil {
				var res ToolResult
				if err := v.Get(&res); err == nil && res.Done {
					if res.Error != "" {
						return nil, errors.New(res.Error)
					}
					return res.Output, nil
				}
			}
			select {
			case <-callCtx.Done():
				return nil, context.Cause(callCtx)
			case <-t.C:
			}
		}
	})
}
