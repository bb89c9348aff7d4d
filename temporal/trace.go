package temporal

import (
	"sync"

	"github.com/aml-go/aml/eval"
)

// The live view of a run on Temporal. Workflow code evaluates with a
// trace sink that keeps the run's trace events (metadata only: no prompt,
// output or other content) in the workflow's memory, and TraceQuery
// serves them by sequence to whoever follows the run (aml run --temporal
// feeds them to its live view and trace sinks). Queries never enter
// history. The events are produced by workflow code, which replays
// identically, so a worker that takes the run over after another died
// rebuilds the same sequence and a follower goes on where it was; only the
// timestamps are those of the worker that produced them.

// TraceQuery returns a TracePage of the run's trace events; its argument
// is the sequence number to start from.
const TraceQuery = "aml.trace"

// maxTraceEvents bounds the events a run keeps for its followers; older
// ones are dropped, and a follower that fell behind is told how many.
const maxTraceEvents = 20000

// maxTracePage bounds the events one query returns.
const maxTracePage = 2000

// traceBuffer is the run's trace sink in workflow code. The evaluator
// delivers events from its dispatch goroutine; queries read them from
// the workflow's, hence the lock.
type traceBuffer struct {
	mu     sync.Mutex
	events []TraceEvent
	// base is the position in the run's stream of events[0].
	base int
}

// HandleTrace implements eval.TraceSink.
func (b *traceBuffer) HandleTrace(e eval.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, TraceEvent{Type: e.Type, RunID: e.RunID, SpanID: e.SpanID, ParentSpanID: e.ParentSpanID, Sequence: e.Sequence,
		Timestamp: e.Timestamp, Kind: e.Kind, Name: e.Name, Status: e.Status, DurationMS: e.DurationMS, Attributes: e.Attributes})
	if len(b.events) > maxTraceEvents {
		n := len(b.events) - maxTraceEvents/2
		b.events = append([]TraceEvent(nil), b.events[n:]...)
		b.base += n
	}
	return nil
}

// page returns the events from position from.
func (b *traceBuffer) page(from int) TracePage {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := TracePage{}
	if from < b.base {
		p.Dropped, from = b.base-from, b.base
	}
	i := from - b.base
	if i > len(b.events) {
		i = len(b.events)
	}
	end := min(len(b.events), i+maxTracePage)
	p.Events = append([]TraceEvent(nil), b.events[i:end]...)
	p.Next = b.base + end
	return p
}

var _ eval.TraceSink = (*traceBuffer)(nil)
