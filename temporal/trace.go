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
