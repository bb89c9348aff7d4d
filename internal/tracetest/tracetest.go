// Package tracetest is a trace sink for tests that keeps every event.
package tracetest

import (
	"sync"

	"github.com/aml-go/aml/eval"
)

// Recorder is an eval.TraceSink that keeps every event. With Content set
// it also receives content attributes (prompts, payloads). It is safe for
// concurrent use.
type Recorder struct {
	// Content makes the recorder a content-capturing sink.
	Content bool

	mu     sync.Mutex
	events []eval.Event
}

// HandleTrace implements eval.TraceSink.
func (r *Recorder) HandleTrace(e eval.Event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	return nil
}

// CaptureContent implements eval.ContentCapturer.
func (r *Recorder) CaptureContent() bool { return r.Content }

// Events returns the events received so far, in order.
func (r *Recorder) Events() []eval.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]eval.Event(nil), r.events...)
}

// Named returns the events with the given span or event name.
func (r *Recorder) Named(name string) []eval.Event {
	var out []eval.Event
	for _, e := range r.Events() {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// Count counts the events with the given name and type.
func (r *Recorder) Count(name string, typ eval.EventType) int {
	n := 0
	for _, e := range r.Named(name) {
		if e.Type == typ {
			n++
		}
	}
	return n
}
