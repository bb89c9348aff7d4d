package cli

import (
	"context"
	"errors"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/providers/workspace/persist"
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
	codeSuspended         = "AML_SUSPENDED"            // a journaled run waits for answers
	codeLimit             = "AML_LIMIT_EXCEEDED"       // a run exceeded one of its limits
	codeBudget            = "AML_BUDGET_EXCEEDED"      // a budget stopped the run
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
		waiting  *eval.SuspendedError
		limit    *eval.LimitError
		budget   *eval.BudgetError
	)
	failure := services.NoFailure
	if err != nil && linked.Classify != nil {
		failure = linked.Classify(err)
	}
	switch {
	case err == nil:
		return ""
	case errors.As(err, &waiting):
		return codeSuspended
	case errors.As(err, &conflict):
		return codeWorkspaceConflict
	case failure == services.S3Untrusted:
		return codeS3Untrusted
	case errors.Is(err, persist.ErrCorrupt):
		return codeWorkspaceCorrupt
	case failure == services.S3LockLost, errors.Is(err, persist.ErrPreconditionFailed):
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
	case errors.As(err, &limit):
		return codeLimit
	case errors.As(err, &budget):
		return codeBudget
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

// exitCodeTable documents the exit codes every command follows; the
// command reference (docs/reference/cli.md) is generated from it.
var exitCodeTable = []struct {
	code    int
	meaning string
}{
	{exitOK, "success"},
	{exitFailure, "the run failed (a provider, a tool, a Starlark error at run time), a test failed, `aml check` found an error, `aml fmt` met a file that does not parse"},
	{exitUsage, "usage error (an unknown command or flag, a missing argument) or a workflow that does not load: a syntax error, an undefined name, an unknown keyword or any other error `aml check` reports (`aml run` checks the file first, so these fail before anything runs), a failing top level, or a command that needs `aml-full` (the companion that links the Docker, Modal, Daytona, S3 and Temporal clients) when it is not installed"},
	{exitSuspended, "a journaled run waits for answers to its `ask()` questions: answer them with `aml resume RUN --answer ID=VALUE`"},
	{exitLimit, "the run exceeded one of its limits (`max_agent_calls`, `max_steps`, `max_depth`, `max_turns_per_agent`, `max_prompt_bytes`; `--json` code `AML_LIMIT_EXCEEDED`) or a budget stopped it (`configure(budget=)`, `budget()`, `agent(budget=)`, the `--max-*` spend flags; `--json` code `AML_BUDGET_EXCEEDED`)"},
	{exitSIGINT, "cancelled by SIGINT (Ctrl-C)"},
	{exitSIGTERM, "cancelled by SIGTERM"},
}

// jsonCodeTable documents the codes of a failed run's --json envelope.
var jsonCodeTable = []struct {
	code, meaning string
}{
	{codeWorkspaceConflict, "another run holds the workspace's writer lock"},
	{codeWorkspaceCorrupt, "a lost or damaged workspace index, or a revision that does not match it"},
	{codeWorkspaceStale, "the save lost its lock, or another writer published first: reload"},
	{codeS3Untrusted, "the S3 service ignores conditional writes"},
	{codeResumeChanged, "a resume found the workflow or its inputs changed (`--rerun-changed` runs the changed steps again)"},
	{codeRunLocked, "another process holds the journaled run"},
	{codeAgentTimeout, "an `agent()` exceeded its `timeout_ms`"},
	{codeToolInput, "a tool's input did not validate against its schema"},
	{codeToolOutput, "a tool's output did not validate against its schema"},
	{codeLoad, "the workflow did not load: a syntax error, an undefined name, an error `aml check` reports, a failing top level"},
	{codeSuspended, "a journaled run waits for answers to its questions (`success` is false, there is no `error`; `questions` lists them)"},
	{codeLimit, "the run exceeded one of its limits (`max_agent_calls`, `max_steps`, `max_depth`, `max_turns_per_agent`, `max_prompt_bytes`)"},
	{codeBudget, "a budget stopped the run: tokens, cost, model calls, tool calls or wall time (the error names the budget, what was spent and its limit)"},
	{codeCancelled, "a signal or `aml cancel` cancelled the run"},
	{codeFailed, "any other failure"},
}
