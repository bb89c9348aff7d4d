package temporal

import (
	"context"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/aml-go/aml/temporal/wire"
)

// Dial connects to the Temporal service opts names and returns a Client
// that owns the connection (Close closes it): the one the aml command
// uses for aml run --temporal, aml runs, aml cancel, aml answer and aml
// worker. With opts.Blobs, payloads too large for history are kept
// there (BlobDriver).
func Dial(opts wire.DialOptions) (*Client, error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	co := client.Options{HostPort: opts.Address, Namespace: opts.Namespace, Logger: sdkLogger{}}
	if opts.Blobs != nil {
		d, err := NewBlobDriver(opts.Blobs, "")
		if err != nil {
			return nil, fmt.Errorf("--blob-store: %w", err)
		}
		co.ExternalStorage = d.ExternalStorage(0)
	}
	c, err := client.Dial(co)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w", opts.Address, opts.Namespace, err)
	}
	return &Client{c: c, taskQueue: opts.TaskQueue, namespace: opts.Namespace, blobs: opts, owned: true}, nil
}

// Close closes the connection of a Client that Dial made; it does
// nothing for one NewClient made (its caller owns the connection).
func (c *Client) Close() {
	if c.owned {
		c.c.Close()
	}
}

// sdkLogger drops the Temporal SDK's own logs: aml reports what matters.
type sdkLogger struct{}

func (sdkLogger) Debug(string, ...any) {}
func (sdkLogger) Info(string, ...any)  {}
func (sdkLogger) Warn(string, ...any)  {}
func (sdkLogger) Error(string, ...any) {}

// Runs lists the runs of the namespace of a Client that Dial made, newest first: a run that
// continued as new once, by its latest execution.
func (c *Client) Runs(ctx context.Context) ([]wire.RunSummary, error) {
	var out []wire.RunSummary
	var token []byte
	for {
		resp, err := c.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", WorkflowName), NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing the runs of namespace %s: %w", c.namespace, err)
		}
		for _, e := range resp.Executions {
			s := wire.RunSummary{ID: e.Execution.GetWorkflowId(), Workflow: memoString(e.Memo, wire.MemoWorkflow),
				State: c.stateLabel(ctx, e.Execution.GetWorkflowId(), e.Status), Started: e.GetStartTime().AsTime()}
			if ct := e.GetCloseTime(); ct != nil && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				s.Closed = ct.AsTime()
			}
			out = append(out, s)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return out, nil
		}
	}
}

// Show returns run id's state, its effects as its history records them
// (across continue-as-new), and its result or error.
func (c *Client) Show(ctx context.Context, id string) (*wire.RunDetail, error) {
	desc, err := c.c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("run %s in namespace %s: %w", id, c.namespace, err)
	}
	info := desc.RawResponse.WorkflowExecutionInfo
	d := &wire.RunDetail{
		RunSummary: wire.RunSummary{ID: id, State: c.stateLabel(ctx, id, info.Status), Workflow: memoString(info.Memo, wire.MemoWorkflow), Started: info.GetStartTime().AsTime()},
		Running:    info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		Completed:  info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	}
	dc := converter.GetDefaultDataConverter()
	// A run that continued as new is a chain of executions: their
	// histories, oldest first, hold its effects.
	chain, err := executionChain(ctx, c.c, id, info.GetExecution().GetRunId())
	if err != nil {
		return nil, fmt.Errorf("reading the history of run %s: %w", id, err)
	}
	d.Executions = len(chain)
	for _, execution := range chain {
		byScheduled := map[int64]int{}
		iter := c.c.GetWorkflowHistory(ctx, id, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				return nil, fmt.Errorf("reading the history of run %s: %w", id, err)
			}
			effect := func(scheduled int64) *wire.ShownEffect {
				if i, ok := byScheduled[scheduled]; ok {
					return &d.Effects[i]
				}
				return nil
			}
			switch a := ev.Attributes.(type) {
			case *historypb.HistoryEvent_ActivityTaskScheduledEventAttributes:
				if internalActivity(a.ActivityTaskScheduledEventAttributes.GetActivityType().GetName()) {
					continue
				}
				e := wire.ShownEffect{Label: activityLabel(dc, a.ActivityTaskScheduledEventAttributes), State: "scheduled"}
				if id := a.ActivityTaskScheduledEventAttributes.GetActivityId(); strings.Contains(id, "#") {
					// The effect's identity, as aml run --journal names it.
					e.Label += " [" + id + "]"
				}
				byScheduled[ev.EventId] = len(d.Effects)
				d.Effects = append(d.Effects, e)
			case *historypb.HistoryEvent_ActivityTaskStartedEventAttributes:
				if e := effect(a.ActivityTaskStartedEventAttributes.ScheduledEventId); e != nil {
					e.State, e.Worker, e.Attempt = "running", a.ActivityTaskStartedEventAttributes.Identity, a.ActivityTaskStartedEventAttributes.Attempt
				}
			case *historypb.HistoryEvent_ActivityTaskCompletedEventAttributes:
				if e := effect(a.ActivityTaskCompletedEventAttributes.ScheduledEventId); e != nil {
					e.State = "finished"
				}
			case *historypb.HistoryEvent_ActivityTaskFailedEventAttributes:
				if e := effect(a.ActivityTaskFailedEventAttributes.ScheduledEventId); e != nil {
					e.State = "failed: " + a.ActivityTaskFailedEventAttributes.GetFailure().GetMessage()
				}
			case *historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes:
				if e := effect(a.ActivityTaskTimedOutEventAttributes.ScheduledEventId); e != nil {
					e.State = "timed out"
				}
			case *historypb.HistoryEvent_ActivityTaskCanceledEventAttributes:
				if e := effect(a.ActivityTaskCanceledEventAttributes.ScheduledEventId); e != nil {
					e.State = "cancelled"
				}
			case *historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes:
				var res RunResult
				if p := a.WorkflowExecutionCompletedEventAttributes.GetResult().GetPayloads(); len(p) == 1 && dc.FromPayload(p[0], &res) == nil {
					d.Result = res.Text
				}
			case *historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes:
				d.Failure = a.WorkflowExecutionFailedEventAttributes.GetFailure().GetMessage()
			}
		}
	}
	if d.Running {
		if st, err := c.State(ctx, id); err == nil {
			d.Questions = st.Questions
		}
	}
	return d, nil
}

// stateLabel is a run's state as aml runs and aml runs show print it:
// its Temporal status, or, for a running run that waits for answers,
// how many.
func (c *Client) stateLabel(ctx context.Context, id string, status enumspb.WorkflowExecutionStatus) string {
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if st, err := c.State(ctx, id); err == nil && len(st.Questions) > 0 {
			return fmt.Sprintf("waiting for an answer (%d question(s))", len(st.Questions))
		}
	}
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "succeeded"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued"
	}
	return "unknown"
}

// internalActivity reports whether an activity is Temporal's own
// machinery (a session's creation or completion) rather than an effect
// of the run.
func internalActivity(name string) bool {
	return strings.HasPrefix(name, "internalSession")
}

func memoString(m *commonpb.Memo, key string) string {
	if m == nil || m.Fields[key] == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(m.Fields[key], &s); err != nil {
		return ""
	}
	return s
}

// executionChain returns the executions of run id, oldest first, from
// the latest (last): each execution's first event names the one it
// continued.
func executionChain(ctx context.Context, c client.Client, id, last string) ([]string, error) {
	chain := []string{last}
	for len(chain) < 10000 {
		iter := c.GetWorkflowHistory(ctx, id, chain[0], false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !iter.HasNext() {
			break
		}
		ev, err := iter.Next()
		if err != nil {
			return nil, err
		}
		prev := ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			break
		}
		chain = append([]string{prev}, chain...)
	}
	return chain, nil
}

// activityLabel names an effect of a run's history by its activity: the
// agent and where it was authored, the script's command, the scope.
func activityLabel(dc converter.DataConverter, a *historypb.ActivityTaskScheduledEventAttributes) string {
	name := a.GetActivityType().GetName()
	p := a.GetInput().GetPayloads()
	if len(p) != 1 {
		return name
	}
	// An env() value travels as a token naming its variable.
	shown := func(s string) string {
		s = strings.ReplaceAll(s, "\x00aml-env:", "$")
		return strings.ReplaceAll(s, "\x00", "")
	}
	switch name {
	case AgentActivity:
		var call AgentCall
		if dc.FromPayload(p[0], &call) == nil {
			provider := call.Provider
			if provider == "" {
				provider = "default"
			}
			return fmt.Sprintf("agent %s at %s", provider, call.Source)
		}
	case ExecActivity:
		var call ExecCall
		if dc.FromPayload(p[0], &call) == nil {
			return "script " + shown(strings.Join(append([]string{call.Command}, call.Args...), " "))
		}
	case AcquireActivity:
		var call AcquireCall
		if dc.FromPayload(p[0], &call) == nil {
			label := "acquire " + call.Kind
			if call.Workspace != nil {
				label += fmt.Sprintf(" %q", call.Workspace.ID)
			}
			if call.Provider != "" && call.Kind != "host" {
				label += " (" + call.Provider + ")"
			}
			if call.Restore != "" {
				label += ", restored from its checkpoint"
			}
			return label
		}
	case FileActivity:
		var call FileCall
		if dc.FromPayload(p[0], &call) == nil {
			return strings.TrimSpace("file " + call.Op + " " + call.Path)
		}
	case SaveActivity:
		return "save the workspace"
	case ReleaseActivity:
		return "release"
	}
	return name
}

// Worker is a worker that NewWorker made: the SDK's worker with the
// workflow and activities registered, and the leases it holds. Its
// methods are safe for concurrent use.
type Worker struct {
	c      *Client
	w      worker.Worker
	leases *WorkerLeases
}

// NewWorker makes a worker serving the Client's task queue with opts;
// its workspace checkpoints go to the Client's blob store. Start starts
// it.
func (c *Client) NewWorker(opts wire.WorkerOptions) *Worker {
	w := worker.New(c.c, c.taskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: opts.MaxAgents,
		DeadlockDetectionTimeout:           opts.DeadlockTimeout,
		Identity:                           opts.Identity,
		// sandbox() and workspace() scopes are held in sessions.
		EnableSessionWorker:               true,
		MaxConcurrentSessionExecutionSize: opts.MaxSessions,
	})
	leases := Register(w, Options{Extensions: opts.Extensions, EnvKey: opts.EnvKey, Checkpoints: c.blobs.Blobs, Client: c.c, ErrorCode: opts.ErrorCode})
	return &Worker{c: c, w: w, leases: leases}
}

// Start starts the worker.
func (w *Worker) Start() error { return w.w.Start() }

// Stop stops the worker: it takes no more tasks, and the sessions in
// flight run again on another worker.
func (w *Worker) Stop() { w.w.Stop() }

// Sweep releases what runs that ended without releasing it held here
// (Leases.Sweep), by run.
func (w *Worker) Sweep(ctx context.Context) (map[string]int, error) {
	return w.leases.Sweep(ctx, w.c.c)
}

// Held counts the sandbox and workspace leases held here.
func (w *Worker) Held() int { return w.leases.Len() }

// Release releases every lease held here (Leases.Release).
func (w *Worker) Release(ctx context.Context) error { return w.leases.Release(ctx) }
