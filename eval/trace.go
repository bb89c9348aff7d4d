package eval

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// EventType discriminates trace events.
type EventType string

// The three trace event types of the original AML event union.
const (
	SpanStart  EventType = "span.start"
	SpanEnd    EventType = "span.end"
	PointEvent EventType = "event"
)

// Span status values on span.end events.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Event is one immutable trace event. Attribute values are scalars only:
// bool, int64, float64, string or []string.
type Event struct {
	Type         EventType
	RunID        string
	SpanID       string
	ParentSpanID string
	// Sequence is the authoritative order of events within a run.
	Sequence uint64
	// Timestamp is the wall clock in Unix milliseconds.
	Timestamp int64
	// Kind is the span kind (span.start and span.end only).
	Kind string
	// Name is the span or event name.
	Name string
	// Status is "ok" or "error" (span.end only).
	Status string
	// DurationMS is the span's duration (span.end only).
	DurationMS float64
	// Attributes are the event's scalar attributes.
	Attributes map[string]any
}

// MarshalJSON encodes the event in the original's wire shape: runId,
// spanId, parentSpanId, sequence, timestamp, type, kind, name, status,
// durationMs and attributes, omitting fields that do not apply to the type.
func (e Event) MarshalJSON() ([]byte, error) {
	type wire struct {
		Type         EventType      `json:"type"`
		RunID        string         `json:"runId"`
		SpanID       string         `json:"spanId"`
		ParentSpanID string         `json:"parentSpanId,omitempty"`
		Sequence     uint64         `json:"sequence"`
		Timestamp    int64          `json:"timestamp"`
		Kind         string         `json:"kind,omitempty"`
		Name         string         `json:"name"`
		Status       string         `json:"status,omitempty"`
		DurationMS   *float64       `json:"durationMs,omitempty"`
		Attributes   map[string]any `json:"attributes"`
	}
	w := wire{e.Type, e.RunID, e.SpanID, e.ParentSpanID, e.Sequence, e.Timestamp, e.Kind, e.Name, e.Status, nil, e.Attributes}
	if e.Type == SpanEnd {
		d := e.DurationMS
		w.DurationMS = &d
	}
	if w.Attributes == nil {
		w.Attributes = map[string]any{}
	}
	return json.Marshal(w)
}

// TraceSink receives trace events. The evaluator calls HandleTrace from a
// single dispatch goroutine per evaluation, in sequence order, so a sink
// sees the events of one run serially; sinks shared by concurrent
// evaluations must be safe for concurrent use. A returned error goes to
// Options.OnTraceError and never changes the workflow result.
type TraceSink interface {
	HandleTrace(Event) error
}

// attrs is an ordered list of attribute key/value pairs; building a slice
// is cheaper than a map on the hot path.
type attrs []any

// tracer assigns sequence numbers and span identities and hands events to
// the sinks on one dispatch goroutine. A nil *tracer is valid and
// discards everything.
type tracer struct {
	runID   string
	sinks   []TraceSink
	capture []bool
	anyCap  bool
	onError func(error, Event)

	mu      sync.Mutex
	seq     uint64
	spanSeq uint64
	// open holds the open spans by identity, so that what an agent
	// spent is added to the component spans around it (span.sum).
	open   map[string]*span
	queue  []queued
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

type queued struct {
	ev      Event
	content map[string]any
}

func newTracer(runID string, sinks []TraceSink, onError func(error, Event)) *tracer {
	if len(sinks) == 0 {
		return nil
	}
	t := &tracer{runID: runID, sinks: sinks, onError: onError, wake: make(chan struct{}, 1), done: make(chan struct{})}
	t.capture = make([]bool, len(sinks))
	for i, s := range sinks {
		if c, ok := s.(ContentCapturer); ok && c.CaptureContent() {
			t.capture[i] = true
			t.anyCap = true
		}
	}
	go t.dispatch()
	return t
}

// captures reports whether any sink wants content, so callers can skip
// building content attributes.
func (t *tracer) captures() bool { return t != nil && t.anyCap }

// span is an open span. A nil *span (from a nil tracer) is inert.
type span struct {
	t      *tracer
	id     string
	parent string
	kind   string
	name   string
	start  time.Time
	// sum is what the agents under the span spent, under the tracer's
	// mu; a component span ends with it (spendSums).
	sum Usage
}

// ID returns the span's identity, or "" for an inert span.
func (s *span) ID() string {
	if s == nil {
		return ""
	}
	return s.id
}

func (t *tracer) startSpan(parent, kind, name string, pos Position, a attrs, content attrs) *span {
	if t == nil {
		return nil
	}
	now := time.Now()
	t.mu.Lock()
	t.spanSeq++
	id := strconv.FormatUint(t.spanSeq, 10)
	s := &span{t: t, id: id, parent: parent, kind: kind, name: name, start: now}
	if t.open == nil {
		t.open = map[string]*span{}
	}
	t.open[id] = s
	t.mu.Unlock()
	m := toMap(a, 1)
	if pos.IsValid() {
		m["aml.source"] = pos.String()
	}
	t.emit(Event{Type: SpanStart, SpanID: id, ParentSpanID: parent, Kind: kind, Name: name, Attributes: m}, now, content)
	return s
}

func (s *span) end(err error, a attrs, content attrs) {
	if s == nil {
		return
	}
	now := time.Now()
	status := StatusOK
	s.t.mu.Lock()
	delete(s.t.open, s.id)
	sum := s.sum
	s.t.mu.Unlock()
	if s.kind == "component" && s.name != "Budget" && !sum.IsZero() {
		// What the agents under a component spent (a budget() span
		// carries its scope's own count).
		a = append(a, sumAttrs(sum)...)
	}
	m := toMap(a, 1)
	if err != nil {
		status = StatusError
		m["error.type"] = errorType(err)
		if s.t.anyCap {
			content = append(content, "error.message", err.Error())
		}
	}
	s.t.emit(Event{Type: SpanEnd, SpanID: s.id, ParentSpanID: s.parent, Kind: s.kind, Name: s.name, Status: status,
		DurationMS: float64(now.Sub(s.start).Microseconds()) / 1000, Attributes: m}, now, content)
}

// spent adds what an agent under the span spent to it and to every
// open span around it.
func (s *span) spent(u Usage) {
	if s == nil || u.IsZero() {
		return
	}
	t := s.t
	t.mu.Lock()
	for id := s.parent; id != ""; {
		p := t.open[id]
		if p == nil {
			break
		}
		p.sum = p.sum.Add(u)
		id = p.parent
	}
	t.mu.Unlock()
}

// event records a point event inside the span.
func (s *span) event(name string, a attrs, content attrs) {
	if s == nil {
		return
	}
	s.t.emit(Event{Type: PointEvent, SpanID: s.id, ParentSpanID: s.parent, Name: name, Attributes: toMap(a, 0)}, time.Now(), content)
}

func toMap(a attrs, extra int) map[string]any {
	m := make(map[string]any, len(a)/2+extra)
	for i := 0; i+1 < len(a); i += 2 {
		m[a[i].(string)] = a[i+1]
	}
	return m
}

func (t *tracer) emit(ev Event, now time.Time, content attrs) {
	ev.RunID = t.runID
	ev.Timestamp = now.UnixMilli()
	var c map[string]any
	if t.anyCap && len(content) > 0 {
		c = toMap(content, 0)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.seq++
	ev.Sequence = t.seq
	t.queue = append(t.queue, queued{ev: ev, content: c})
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *tracer) dispatch() {
	defer close(t.done)
	var batch []queued
	for {
		t.mu.Lock()
		batch, t.queue = t.queue, batch[:0]
		closed := t.closed
		t.mu.Unlock()
		for _, q := range batch {
			t.deliver(q)
		}
		if len(batch) == 0 {
			if closed {
				return
			}
			<-t.wake
		}
	}
}

func (t *tracer) deliver(q queued) {
	var full Event
	haveFull := false
	for i, s := range t.sinks {
		ev := q.ev
		if t.capture[i] && q.content != nil {
			if !haveFull {
				full = q.ev
				full.Attributes = make(map[string]any, len(q.ev.Attributes)+len(q.content))
				for k, v := range q.ev.Attributes {
					full.Attributes[k] = v
				}
				for k, v := range q.content {
					full.Attributes[k] = v
				}
				haveFull = true
			}
			ev = full
		}
		t.callSink(s, ev)
	}
}

func (t *tracer) callSink(s TraceSink, ev Event) {
	defer func() {
		if r := recover(); r != nil {
			t.report(fmt.Errorf("trace sink panicked: %v", r), ev)
		}
	}()
	if err := s.HandleTrace(ev); err != nil {
		t.report(err, ev)
	}
}

func (t *tracer) report(err error, ev Event) {
	if t.onError != nil {
		t.onError(err, ev)
	}
}

// drainTimeout bounds how long Evaluate waits for slow sinks after the
// evaluation finished.
const drainTimeout = 10 * time.Second

// close stops accepting events and waits until every queued event reached
// the sinks, or drainTimeout passed; a sink that is still blocked then is
// reported to OnTraceError and left behind.
func (t *tracer) close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
		t.report(fmt.Errorf("trace sinks did not finish within %s after the run; remaining events are delivered in the background", drainTimeout), Event{RunID: t.runID})
	}
}
