package temporal

import (
	"sync"

	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/internal/redact"
)

// print() on Temporal. Workflow code keeps the lines that print() wrote
// (at the top level, in component bodies, in respond functions and in
// tools that workflow code calls) in the workflow's memory, in order, and
// PrintQuery serves them to the submitter, which shows them as aml run
// shows its own; the lines a tool prints on a worker, while an agent
// session calls it there, come back with the session's result and join
// the run's lines when it ends. Like the trace (trace.go), the lines are
// rebuilt identically when another worker replays the run, and never
// enter history.

// PrintQuery returns a PrintPage of the run's print() lines; its
// argument is the position to start from.
const PrintQuery = "aml.prints"

// maxPrintLines bounds the lines a run keeps for its followers; older
// ones are dropped, and a follower that fell behind is told how many.
const maxPrintLines = 20000

// maxPrintPage bounds the lines one query returns.
const maxPrintPage = 2000

// printBuffer keeps a run's print() lines in workflow code. Starlark
// prints from the coroutine that runs it and queries read from the
// workflow's goroutine, hence the lock.
type printBuffer struct {
	mu    sync.Mutex
	lines []string
	base  int
}

func (b *printBuffer) add(lines ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, lines...)
	if len(b.lines) > maxPrintLines {
		n := len(b.lines) - maxPrintLines/2
		b.lines = append([]string(nil), b.lines[n:]...)
		b.base += n
	}
}

// page returns the lines from position from.
func (b *printBuffer) page(from int) PrintPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := PrintPage{}
	if from < b.base {
		p.Dropped, from = b.base-from, b.base
	}
	i := min(from-b.base, len(b.lines))
	end := min(len(b.lines), i+maxPrintPage)
	p.Lines = append([]string(nil), b.lines[i:end]...)
	p.Next = b.base + end
	return p
}

// printCollector collects the lines printed on a worker during one
// activity. It is safe for concurrent use: tools run on the agent's
// goroutines.
type printCollector struct {
	mu    sync.Mutex
	lines []string
}

func (c *printCollector) print(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, msg)
}

func (c *printCollector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.lines
	c.lines = nil
	return out
}

// maxTailBytes bounds the print() lines a run's outcome carries: a
// follower has read the others while the run went on.
const maxTailBytes = 64 << 10

// tail returns the last lines the run keeps, at most maxTailBytes of
// them, redacted, for its outcome: the first of them is at position
// Next-len(Lines).
func (b *printBuffer) tail(wctx workflow.Context, red redact.Redactor) *PrintPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) == 0 {
		return nil
	}
	first, size := len(b.lines), 0
	for first > 0 && size+len(b.lines[first-1]) <= maxTailBytes {
		first--
		size += len(b.lines[first])
	}
	p := &PrintPage{Next: b.base + len(b.lines), Execution: workflow.GetInfo(wctx).WorkflowExecution.RunID}
	p.Lines = make([]string, 0, len(b.lines)-first)
	for _, l := range b.lines[first:] {
		p.Lines = append(p.Lines, red.String(l))
	}
	return p
}
