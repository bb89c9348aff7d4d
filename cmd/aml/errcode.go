package main

import (
	"context"
	"errors"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/providers/workspace/persist"
	s3ws "github.com/aml-go/aml/providers/workspace/s3"
	"github.com/aml-go/aml/starlib"
)

// The machine-readable codes of failed runs: the --json envelope's
// "code", beside the message, for programs that decide what to do.
const (
	codeWorkspaceConflict = eval.WorkspaceConflictCode // another run holds the workspace's lock
	codeWorkspaceCorrupt  = "AML_WORKSPACE_CORRUPT"    // a lost or damaged index, a revision that does not match it
	codeWorkspaceStale    = "AML_WORKSPACE_STALE"      // the save lost its lock or another writer published first
	codeS3Untrusted       = "AML_S3_UNTRUSTED"         // the S3 service ignores conditional writes
	codeResumeChanged     = "AML_RESUME_CHANGED"       // a resume found changes (--rerun-changed)
	codeRunLocked         = "AML_RUN_LOCKED"           // another process holds the journaled run
	codeAgentTimeout      = "AML_AGENT_TIMEOUT"        // an agent() exceeded its timeout_ms
	codeToolInput         = "AML_TOOL_INPUT"           // a tool's input did not validate
	codeToolOutput        = "AML_TOOL_OUTPUT"          // a tool's output did not validate
	codeLoad              = "AML_LOAD_ERROR"           // the workflow did not load
	codeCancelled         = "AML_CANCELLED"            // a signal cancelled the run
	codeFailed            = "AML_FAILED"               // any other failure
)

// errorCode returns the code of a failed run's error: the most specific
// cause found in it (a failure inside a parallel() branch counts).
func errorCode(err error) string {
	var (
		conflict *eval.WorkspaceConflictError
		diverged *eval.DivergenceError
		timeout  *eval.AgentTimeoutError
		toolIn   *eval.ToolInputError
		toolOut  *eval.ToolOutputError
		load     *starlib.LoadError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &conflict):
		return codeWorkspaceConflict
	case errors.Is(err, s3ws.ErrUntrusted):
		return codeS3Untrusted
	case errors.Is(err, persist.ErrCorrupt):
		return codeWorkspaceCorrupt
	case errors.Is(err, s3ws.ErrLockLost), errors.Is(err, persist.ErrPreconditionFailed):
		return codeWorkspaceStale
	case errors.As(err, &diverged):
		return codeResumeChanged
	case errors.Is(err, journal.ErrLocked):
		return codeRunLocked
	case errors.As(err, &timeout):
		return codeAgentTimeout
	case errors.As(err, &toolIn):
		return codeToolInput
	case errors.As(err, &toolOut):
		return codeToolOutput
	case errors.As(err, &load):
		return codeLoad
	case errors.Is(err, context.Canceled):
		return codeCancelled
	}
	// An error that crossed from a Temporal worker or run carries the
	// code its side gave it.
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() != "" {
		return coded.ErrorCode()
	}
	return codeFailed
}
