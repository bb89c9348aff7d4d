package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
)

// Activities run the effects of AML runs on a worker, with the providers
// the worker links. It is safe for concurrent use: Temporal runs many
// activities at once.
type Activities struct {
	// Agents are the agent providers by the name the workflow's provider
	// has (eval.AgentProvider.Name).
	Agents map[string]eval.AgentProvider
	// DefaultAgent runs sessions whose workflow configured no provider,
	// and sessions of a provider that Agents does not name; nil refuses
	// them.
	DefaultAgent eval.AgentProvider
}

// Register registers the AML workflow and activities on r (a worker, or
// the SDK's test environment), so that a Go service that already runs
// Temporal workers adds AML runs to them.
func Register(r worker.Registry, a *Activities) {
	r.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(a.Agent, activity.RegisterOptions{Name: AgentActivity})
}

// Agent is AgentActivity: one agent() session with the named provider. It
// heartbeats every HeartbeatInterval while the provider works, so that a
// worker that dies is noticed within HeartbeatTimeout.
func (a *Activities) Agent(ctx context.Context, call AgentCall) (*eval.AgentResponse, error) {
	p := a.Agents[call.Provider]
	if p == nil {
		p = a.DefaultAgent
	}
	if p == nil {
		err := fmt.Errorf("this worker has no agent provider %q and no default one", call.Provider)
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), agentFailure, err)
	}
	req := &eval.AgentRequest{
		Prompt: call.Prompt, FollowUps: call.FollowUps, System: call.System, Model: call.Model,
		Name: call.Name, Permissions: call.Permissions,
	}
	if call.OutputSchema != nil {
		req.Output = &eval.OutputRequest{JSONSchema: call.OutputSchema}
	}
	exec := &eval.AgentExecution{RunID: call.RunID}
	stop := heartbeat(ctx)
	resp, err := p.Run(ctx, req, exec)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), agentFailure, err)
	}
	if resp == nil {
		err := errors.New("provider returned no response")
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), agentFailure, err)
	}
	return resp, nil
}

// heartbeat records a heartbeat now and every HeartbeatInterval until the
// returned function is called.
func heartbeat(ctx context.Context) func() {
	activity.RecordHeartbeat(ctx)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
