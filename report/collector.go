package report

import (
	"io"
	"sync"

	"github.com/aml-go/aml/eval"
)

// Collector gathers a run's trace events for a report. It implements
// eval.TraceSink and is safe for concurrent use: HandleTrace may be called
// from any goroutine, by one run or several, while WriteHTML may be called
// at any time to report what arrived so far. It folds events into spans as
// they arrive and keeps no event itself.
//
// It is an eval.ContentCapturer: it receives content attributes (prompts,
// results, error messages) only when Options.CaptureContent is set, and
// metadata otherwise.
type Collector struct {
	opts Options

	mu    sync.Mutex
	spans *spanSet
}

var (
	_ eval.TraceSink       = (*Collector)(nil)
	_ eval.ContentCapturer = (*Collector)(nil)
)

// CaptureContent implements eval.ContentCapturer: Options.CaptureContent.
func (c *Collector) CaptureContent() bool { return c.opts.CaptureContent }

// NewCollector returns an empty Collector whose reports use opts.
func NewCollector(opts Options) *Collector {
	return &Collector{opts: opts, spans: newSpanSet()}
}

// HandleTrace implements eval.TraceSink. It never fails.
func (c *Collector) HandleTrace(e eval.Event) error {
	c.mu.Lock()
	c.spans.add(e)
	c.mu.Unlock()
	return nil
}

// WriteHTML writes the report of the events gathered so far; call it
// after the run ended. Spans that are still open are shown as unfinished.
// Events that arrive while it assembles the report wait for it and appear
// in the next one; writing to w happens without holding up HandleTrace.
func (c *Collector) WriteHTML(w io.Writer) error {
	title := c.opts.title()
	c.mu.Lock()
	data := encodeData(buildModel(c.spans, title))
	c.mu.Unlock()
	return writePage(w, title, data)
}
