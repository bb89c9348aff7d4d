package eval

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// EvaluationError reports an invalid authored value, a placement rule, a
// limit, a missing provider or another evaluator contract. It names the
// source position of the authored node when one is known.
type EvaluationError struct {
	// Msg says which rule was broken and how to fix it.
	Msg string
	// Pos is the position of the authored node; it may be zero.
	Pos Position
	// Backtrace is the Starlark call stack when the error arose in
	// Starlark code, or "".
	Backtrace string
	// Err is the underlying cause, or nil.
	Err error
}

func newError(pos Position, msg string) *EvaluationError {
	return &EvaluationError{Msg: msg, Pos: pos}
}

// Error formats the error as "file:line:col: message: cause" (without
// a cause whose text is the message).
func (e *EvaluationError) Error() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		if cause := e.Err.Error(); cause != e.Msg {
			if e.Msg != "" {
				b.WriteString(": ")
			}
			b.WriteString(cause)
		}
	}
	return b.String()
}

// LimitError reports that an evaluation exceeded one of its Limits. It
// arrives as the cause of an *EvaluationError that names the authored
// node (errors.As finds it), so that a program can tell a run stopped by
// a limit from one that failed.
type LimitError struct {
	// Limit is the limit's configure() name: "max_agent_calls",
	// "max_steps", "max_depth", "max_turns_per_agent" or
	// "max_prompt_bytes".
	Limit string
	// Max is the limit's value.
	Max int
	// Msg says what was exceeded and how to raise the limit.
	Msg string
}

// Error returns Msg.
func (e *LimitError) Error() string { return e.Msg }

// limitError is an *EvaluationError at pos whose cause is a LimitError.
func limitError(pos Position, limit string, max int, msg string) *EvaluationError {
	return &EvaluationError{Msg: msg, Pos: pos, Err: &LimitError{Limit: limit, Max: max, Msg: msg}}
}

// Unwrap returns the cause.
func (e *EvaluationError) Unwrap() error { return e.Err }

// BranchFailure is one failed branch of a parallel() or evaluate_all().
type BranchFailure struct {
	// Index is the zero-based authored index of the branch.
	Index int
	// Err is the branch's original error.
	Err error
}

// ParallelError reports every failed branch of a parallel() or
// evaluate_all() after all branches settled, in authored order.
type ParallelError struct {
	// Failures lists the failed branches in authored order.
	Failures []BranchFailure
	// Branches is the number of branches that ran.
	Branches int
	// Pos is the position of the parallel() or evaluate_all() call.
	Pos Position
}

// Error lists every failed branch with its cause.
func (e *ParallelError) Error() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d of %d parallel branches failed", len(e.Failures), e.Branches)
	// Branches that failed with the same words (a budget that ran out
	// stops many at once) are listed once.
	type group struct {
		text    string
		indexes []int
	}
	var groups []*group
	byText := map[string]*group{}
	for _, f := range e.Failures {
		text := f.Err.Error()
		g := byText[text]
		if g == nil {
			g = &group{text: text}
			byText[text] = g
			groups = append(groups, g)
		}
		g.indexes = append(g.indexes, f.Index)
	}
	for _, g := range groups {
		if len(g.indexes) == 1 {
			b.WriteString("\n  branch ")
			b.WriteString(strconv.Itoa(g.indexes[0]))
		} else {
			b.WriteString("\n  branches ")
			b.WriteString(indexList(g.indexes))
		}
		b.WriteString(": ")
		b.WriteString(strings.ReplaceAll(g.text, "\n", "\n    "))
	}
	return b.String()
}

// indexList renders ascending branch indexes with runs collapsed: "0, 2-5,
// 9".
func indexList(ix []int) string {
	var b strings.Builder
	for i := 0; i < len(ix); {
		j := i
		for j+1 < len(ix) && ix[j+1] == ix[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(ix[i]))
		if j > i {
			if j == i+1 {
				b.WriteString(", ")
			} else {
				b.WriteString("-")
			}
			b.WriteString(strconv.Itoa(ix[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Unwrap returns the branch errors so errors.Is and errors.As see them.
func (e *ParallelError) Unwrap() []error {
	errs := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		errs[i] = f.Err
	}
	return errs
}

// ToolInputError reports tool input that failed JSON or schema validation;
// the tool's executor did not run.
type ToolInputError struct {
	Tool string
	Msg  string
	Err  error
}

// Error implements error.
func (e *ToolInputError) Error() string {
	s := fmt.Sprintf("tool %q: invalid input: %s", e.Tool, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *ToolInputError) Unwrap() error { return e.Err }

// ToolOutputError reports tool output that failed validation or is not
// JSON; the tool may already have performed its effect.
type ToolOutputError struct {
	Tool string
	Msg  string
	Err  error
}

// Error implements error.
func (e *ToolOutputError) Error() string {
	s := fmt.Sprintf("tool %q: invalid output: %s", e.Tool, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *ToolOutputError) Unwrap() error { return e.Err }

// WorkspaceConflictCode is the stable code of a WorkspaceConflictError.
const WorkspaceConflictCode = "AML_WORKSPACE_CONFLICT"

// WorkspaceConflictError reports that another healthy writer owns the same
// workspace identity.
type WorkspaceConflictError struct {
	WorkspaceID string
	Err         error
}

// Error implements error.
func (e *WorkspaceConflictError) Error() string {
	s := fmt.Sprintf("workspace %q is locked by another writer (%s)", e.WorkspaceID, WorkspaceConflictCode)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *WorkspaceConflictError) Unwrap() error { return e.Err }

// AgentTimeoutError is the cancellation cause of an agent session whose
// timeout_ms expired.
type AgentTimeoutError struct {
	TimeoutMS int64
	Pos       Position
}

// Error implements error.
func (e *AgentTimeoutError) Error() string {
	return fmt.Sprintf("%s: agent() timed out after timeout_ms=%d", e.Pos, e.TimeoutMS)
}

// errorType names an error's type for traces (error.type).
func errorType(err error) string {
	var (
		ee *EvaluationError
		pe *ParallelError
		te *AgentTimeoutError
	)
	switch {
	case errors.As(err, &te):
		return "AgentTimeoutError"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.As(err, &pe):
		return "ParallelError"
	case errors.As(err, &ee):
		return "EvaluationError"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
}

// canceled wraps the cancellation cause of ctx so that it names where
// evaluation stopped.
func canceled(ctx context.Context, pos Position) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = ctx.Err()
	}
	var be *BudgetError
	if errors.As(cause, &be) {
		return budgetStop(pos, be)
	}
	return &EvaluationError{Msg: "evaluation cancelled", Pos: pos, Err: cause}
}
