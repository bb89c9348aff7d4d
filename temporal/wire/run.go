// Package wire holds what a client of AML's Temporal workflows and the
// workflows exchange: the bundle a run is started with (Pack), the
// options of the start, the pages of a run's print() lines and trace
// events, its questions and answers, and its result or error; and the
// shapes of what aml runs lists and shows.
//
// It imports no Temporal package: the aml command, which links no
// Temporal client (see internal/services), reads and makes these
// values, and package temporal, which serves and calls the workflows,
// declares its names for them.
package wire

import (
	"errors"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/starlib"
)

// StartOptions configure the start of a run (temporal.Client.Start).
type StartOptions struct {
	// ID is the run's id (its workflow id); "" makes one, "aml-<run id>".
	ID string
	// Entry is the component to evaluate ("" for the file's entry).
	Entry string
	// Limits, when set, replace the workflow's configure() limits.
	Limits *eval.Limits
	// Memo is Temporal's memo of the run (aml runs shows "workflow").
	Memo map[string]any
	// ContinueAfter is temporal.RunInput.ContinueAfter.
	ContinueAfter int
	// Cwd is temporal.RunInput.Cwd, the directory the run's relative paths
	// resolve from; "" is this process's working directory.
	Cwd string
	// Budget and Prices are temporal.RunInput's.
	Budget *eval.Budget
	Prices map[string]eval.Price
}

// RunError is how a run failed: the evaluation's message (with the
// authored position, as aml run reports it), or that it was cancelled.
type RunError struct {
	RunID     string
	Msg       string
	Cancelled bool
	// Backtrace is the Starlark backtrace of a failure that arose in
	// Starlark code, and Code its machine-readable code (see
	// temporal.Options.ErrorCode), as aml run reports them.
	Backtrace, Code string
	// Prints and Usage are as RunResult's.
	Prints *PrintPage
	Usage  *eval.Usage
	Err    error
}

// ErrorCode returns the failure's code ("" for none).
func (e *RunError) ErrorCode() string { return e.Code }

func (e *RunError) Error() string { return e.Msg }

// Unwrap returns the Temporal error.
func (e *RunError) Unwrap() error { return e.Err }

// Cancelled is how a cancellation (temporal.Client.Cancel) ended a run.
type Cancelled struct {
	// Terminated reports that the run did not end within the grace
	// period and was terminated.
	Terminated bool
	// Took is how long it took the run to end.
	Took time.Duration
}

// ErrAlreadyEnded is the error of Cancel for a run that had ended before
// it could be cancelled.
var ErrAlreadyEnded = errors.New("the run ended before it could be cancelled")

// PrintPage is a page of a run's print() lines.
type PrintPage struct {
	Lines []string `json:"lines"`
	// Next is the position to ask for next.
	Next int `json:"next"`
	// Dropped counts the lines before the page that the run no longer
	// keeps.
	Dropped int `json:"dropped,omitempty"`
	// Execution is the run id of the execution the lines are of: a run
	// that continued as new starts its lines again.
	Execution string `json:"execution"`
}

// TracePage is a page of a run's trace events.
type TracePage struct {
	Events []TraceEvent `json:"events"`
	// Next is the sequence to ask for next.
	Next int `json:"next"`
	// Dropped counts the events before the page that the run no longer
	// keeps.
	Dropped int `json:"dropped,omitempty"`
	// Execution is the run id of the execution the events are of: a run
	// that continued as new starts its sequence again.
	Execution string `json:"execution"`
}

// TraceEvent is an eval.Event as a query carries it.
type TraceEvent struct {
	Type         eval.EventType `json:"type"`
	RunID        string         `json:"runId"`
	SpanID       string         `json:"spanId,omitempty"`
	ParentSpanID string         `json:"parentSpanId,omitempty"`
	Sequence     uint64         `json:"sequence"`
	Timestamp    int64          `json:"timestamp"`
	Kind         string         `json:"kind,omitempty"`
	Name         string         `json:"name,omitempty"`
	Status       string         `json:"status,omitempty"`
	DurationMS   float64        `json:"durationMs,omitempty"`
	Attributes   map[string]any `json:"attributes,omitempty"`
}

// Event returns the eval.Event.
func (e TraceEvent) Event() eval.Event {
	return eval.Event{Type: e.Type, RunID: e.RunID, SpanID: e.SpanID, ParentSpanID: e.ParentSpanID, Sequence: e.Sequence,
		Timestamp: e.Timestamp, Kind: e.Kind, Name: e.Name, Status: e.Status, DurationMS: e.DurationMS, Attributes: e.Attributes}
}

// Answer is the payload of the answer signal (temporal.AnswerSignal).
type Answer struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// RunState is what the state query (temporal.StateQuery) returns: the questions the run waits for,
// in the order they were asked.
type RunState struct {
	Questions []eval.Question `json:"questions"`
}

// RunResult is a finished run's result: the entry's text.
type RunResult struct {
	Text string `json:"text"`
	// Usage is what the run's agent sessions spent, in all its
	// executions.
	Usage *eval.Usage `json:"usage,omitempty"`
	// Prints are the print() lines of the run's last execution (see
	// temporal.PrintQuery), redacted as its errors are, so that a follower
	// shows the last of them without querying a closed run (which a
	// worker answers by replaying it whole).
	Prints *PrintPage `json:"prints,omitempty"`
}

// MemoWorkflow is the field of a run's Temporal memo that names its
// workflow file (aml run --temporal sets it; aml runs shows it).
const MemoWorkflow = "workflow"

// DialOptions name a Temporal service and how to reach it
// (temporal.Dial).
type DialOptions struct {
	// Address is the frontend's HOST:PORT.
	Address string
	// Namespace is the Temporal namespace ("" for "default").
	Namespace string
	// TaskQueue is the task queue of the workers runs start on.
	TaskQueue string
	// Blobs, when set, keeps the payloads too large for history (see
	// temporal.BlobDriver), and a worker's workspace checkpoints; every
	// worker and client of the namespace must share it.
	Blobs persist.Storage
}

// RunSummary is one run as aml runs --temporal lists it.
type RunSummary struct {
	// ID is the run's id (its workflow id).
	ID string
	// State is the run's state: running, waiting for an answer (N
	// question(s)), succeeded, failed, cancelled, terminated, timed out,
	// continued or unknown.
	State string
	// Workflow is the workflow file's name, "" when the run's memo has
	// none.
	Workflow string
	// Started is when the run started; Closed when it ended (zero while
	// it runs).
	Started, Closed time.Time
}

// RunDetail is one run as aml runs show --temporal shows it.
type RunDetail struct {
	RunSummary
	// Running and Completed report the Temporal status: still running,
	// or ended with a result.
	Running, Completed bool
	// Executions counts the run's executions (a run that continued as
	// new has several).
	Executions int
	// Questions are what a running run waits for.
	Questions []eval.Question
	// Effects are the run's effects as its history records them, in
	// order.
	Effects []ShownEffect
	// Result is the result of a completed run; Failure the message of a
	// failed one.
	Result, Failure string
}

// ShownEffect is one effect of a run's history.
type ShownEffect struct {
	// Label names the effect: the agent and where it was authored, the
	// script's command, the scope.
	Label string
	// State is scheduled, running, finished, failed: MESSAGE, timed out
	// or cancelled.
	State string
	// Worker is the identity of the worker that ran it, and Attempt its
	// attempt (1 for the first).
	Worker  string
	Attempt int32
}

// WorkerOptions configure a worker (temporal.Client.NewWorker).
type WorkerOptions struct {
	// MaxAgents bounds the agent sessions the worker runs at once (0:
	// the SDK's default).
	MaxAgents int
	// DeadlockTimeout is how long a task of workflow code may run
	// without pausing.
	DeadlockTimeout time.Duration
	// Identity names the worker in the runs' histories.
	Identity string
	// MaxSessions bounds the sessions (leases) the worker holds.
	MaxSessions int
	// Extensions, EnvKey and ErrorCode are temporal.Options'.
	Extensions []*starlib.Extension
	EnvKey     []byte
	ErrorCode  func(error) string
}
