package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/providers/workspace/persist"
	s3ws "github.com/aml-go/aml/providers/workspace/s3"
)

// TestErrorCode: each kind of failure gets its code, also wrapped, joined
// or inside a parallel() branch.
func TestErrorCode(t *testing.T) {
	branch := func(err error) error {
		return &eval.ParallelError{Failures: []eval.BranchFailure{{Index: 0, Err: errors.New("other")}, {Index: 1, Err: err}}}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&eval.WorkspaceConflictError{WorkspaceID: "w"}, "AML_WORKSPACE_CONFLICT"},
		{branch(&eval.WorkspaceConflictError{WorkspaceID: "w"}), "AML_WORKSPACE_CONFLICT"},
		{&persist.IndexError{WorkspaceID: "w", Missing: true}, "AML_WORKSPACE_CORRUPT"},
		{fmt.Errorf("acquire: %w", &persist.CorruptError{WorkspaceID: "w"}), "AML_WORKSPACE_CORRUPT"},
		{fmt.Errorf("save: %w", s3ws.ErrLockLost), "AML_WORKSPACE_STALE"},
		{fmt.Errorf("publish: %w", persist.ErrPreconditionFailed), "AML_WORKSPACE_STALE"},
		{fmt.Errorf("refused: %w", s3ws.ErrUntrusted), "AML_S3_UNTRUSTED"},
		{&eval.DivergenceError{ID: "agent#0"}, "AML_RESUME_CHANGED"},
		{errors.Join(&eval.DivergenceError{ID: "agent#0"}, &eval.DivergenceError{ID: "agent#1"}), "AML_RESUME_CHANGED"},
		{fmt.Errorf("open: %w", journal.ErrLocked), "AML_RUN_LOCKED"},
		{&eval.EvaluationError{Msg: "timed out", Err: &eval.AgentTimeoutError{TimeoutMS: 5}}, "AML_AGENT_TIMEOUT"},
		{&eval.ToolInputError{Tool: "t"}, "AML_TOOL_INPUT"},
		{&interruptError{signal: "SIGINT"}, "AML_CANCELLED"},
		{errors.New("boom"), "AML_FAILED"},
		{nil, ""},
	} {
		if got := errorCode(c.err); got != c.want {
			t.Errorf("errorCode(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
