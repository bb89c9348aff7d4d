package temporal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/temporal/wire"
)

// Client starts, follows, answers and cancels AML runs on Temporal, for a
// Go service that submits runs to its own workers. Its methods are safe
// for concurrent use.
type Client struct {
	c         client.Client
	taskQueue string
	// namespace, blobs and owned are Dial's: the namespace and blob
	// store it was given, and that Close closes c.
	namespace string
	blobs     wire.DialOptions
	owned     bool
}

// NewClient returns a Client over c that starts runs on taskQueue (the
// task queue of the workers that Register served).
func NewClient(c client.Client, taskQueue string) *Client {
	return &Client{c: c, taskQueue: taskQueue}
}

// Start starts a run of b and returns its id.
func (c *Client) Start(ctx context.Context, b *Bundle, opts StartOptions) (string, error) {
	if err := b.Verify(); err != nil {
		return "", err
	}
	id := opts.ID
	if id == "" {
		id = "aml-" + eval.NewRunID()
	}
	cwd := opts.Cwd
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return "", fmt.Errorf("the working directory the run's relative paths resolve from: %w", err)
		}
	}
	_, err := c.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: c.taskQueue, Memo: opts.Memo, WorkflowTaskTimeout: WorkflowTaskTimeout}, WorkflowName,
		RunInput{Bundle: b, Entry: opts.Entry, Limits: opts.Limits, ContinueAfter: opts.ContinueAfter, Cwd: cwd, Budget: opts.Budget, Prices: opts.Prices})
	if err != nil {
		return "", fmt.Errorf("starting run %s: %w", id, err)
	}
	return id, nil
}

// Result waits for run id to end (across continue-as-new) and returns
// its text, or a *RunError.
func (c *Client) Result(ctx context.Context, id string) (string, error) {
	res, err := c.Wait(ctx, id)
	return res.Text, err
}

// Wait waits for run id to end (across continue-as-new) and returns its
// result, with the print() lines of its last execution, or a *RunError.
func (c *Client) Wait(ctx context.Context, id string) (RunResult, error) {
	var res RunResult
	err := c.c.GetWorkflow(ctx, id, "").Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	// Only the run's own end is a *RunError: a wait that timed out or
	// failed (the service's deadline may pass a moment before ctx's) is
	// not an outcome.
	var wee *sdktemporal.WorkflowExecutionError
	if ctx.Err() != nil || !errors.As(err, &wee) {
		return res, err
	}
	re := &RunError{RunID: id, Msg: err.Error(), Err: err}
	var ae *sdktemporal.ApplicationError
	var ce *sdktemporal.CanceledError
	switch {
	case errors.As(err, &ae):
		re.Msg = ae.Message()
		var f RunFailure
		if ae.HasDetails() && ae.Details(&f) == nil {
			re.Backtrace, re.Code, re.Prints, re.Usage = f.Backtrace, f.Code, f.Prints, f.Usage
		}
	case errors.As(err, &ce):
		re.Msg, re.Cancelled = "the run was cancelled", true
	}
	return res, re
}

// State returns what run id waits for (StateQuery).
func (c *Client) State(ctx context.Context, id string) (RunState, error) {
	var st RunState
	v, err := c.c.QueryWorkflow(ctx, id, "", StateQuery)
	if err != nil {
		return st, err
	}
	err = v.Get(&st)
	return st, err
}

// Trace returns the run's trace events from sequence from (TraceQuery).
func (c *Client) Trace(ctx context.Context, id string, from int) (TracePage, error) {
	var p TracePage
	v, err := c.c.QueryWorkflow(ctx, id, "", TraceQuery, from)
	if err != nil {
		return p, err
	}
	err = v.Get(&p)
	return p, err
}

// Prints returns the run's print() lines from position from
// (PrintQuery).
func (c *Client) Prints(ctx context.Context, id string, from int) (PrintPage, error) {
	var p PrintPage
	v, err := c.c.QueryWorkflow(ctx, id, "", PrintQuery, from)
	if err != nil {
		return p, err
	}
	err = v.Get(&p)
	return p, err
}

// Answer answers questions run id waits for: each answer must name a
// pending question and be valid for its schema (eval.CheckAnswer), or
// nothing is sent.
func (c *Client) Answer(ctx context.Context, id string, answers ...Answer) error {
	st, err := c.State(ctx, id)
	if err != nil {
		return fmt.Errorf("reading the questions of run %s: %w", id, err)
	}
	for _, a := range answers {
		var q *eval.Question
		for i := range st.Questions {
			if st.Questions[i].ID == a.ID {
				q = &st.Questions[i]
			}
		}
		if q == nil {
			return fmt.Errorf("run %s does not wait for an answer to %q", id, a.ID)
		}
		if err := eval.CheckAnswer(*q, a.Value); err != nil {
			return err
		}
	}
	for _, a := range answers {
		if err := c.c.SignalWorkflow(ctx, id, "", AnswerSignal, a); err != nil {
			return fmt.Errorf("answering %q: %w", a.ID, err)
		}
	}
	return nil
}

// Cancel cancels run id and waits, at most grace, until it has ended:
// its workflow code stopped (at its next pause, see PaceSteps), its
// sessions, scripts and scopes released on every worker. A run that has
// not ended by then (no worker serves it, or its workflow code does not
// pause) is terminated, and the result says so: its activities then end
// on their workers at their next heartbeat, and the scopes it held are
// released by the workers' sweep (Leases.Sweep). A run that had ended
// already is ErrAlreadyEnded.
func (c *Client) Cancel(ctx context.Context, id string, grace time.Duration) (Cancelled, error) {
	started := time.Now()
	desc, err := c.c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return Cancelled{}, fmt.Errorf("run %s: %w", id, err)
	}
	if desc.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return Cancelled{}, fmt.Errorf("run %s: %w", id, ErrAlreadyEnded)
	}
	if err := c.c.CancelWorkflow(ctx, id, ""); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// It ended meanwhile.
			return Cancelled{}, fmt.Errorf("run %s: %w", id, ErrAlreadyEnded)
		}
		return Cancelled{}, fmt.Errorf("run %s: %w", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	_, err = c.Result(wctx, id)
	cancel()
	var re *RunError
	switch {
	case errors.As(err, &re) && re.Cancelled:
		return Cancelled{Took: time.Since(started)}, nil
	case err == nil || re != nil:
		// It ended otherwise (succeeded, or failed) before the
		// cancellation reached it.
		return Cancelled{Took: time.Since(started)}, fmt.Errorf("run %s: %w", id, ErrAlreadyEnded)
	case ctx.Err() != nil:
		return Cancelled{}, ctx.Err()
	}
	reason := fmt.Sprintf("aml cancel: the run did not end within %s of its cancellation", grace)
	if err := c.c.TerminateWorkflow(ctx, id, "", reason); err != nil {
		return Cancelled{}, fmt.Errorf("terminating run %s: %w", id, err)
	}
	return Cancelled{Terminated: true, Took: time.Since(started)}, nil
}
