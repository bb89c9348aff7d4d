package report

import (
	"io"

	"github.com/aml-go/aml/eval"
)

// Options configure a report.
type Options struct {
	// Title is shown in the header and the page title, e.g. the workflow
	// file; "" means "AML run".
	Title string
	// CaptureContent makes a Collector ask the evaluator for content
	// attributes (prompts, results, error messages; see
	// eval.ContentCapturer), so that its report shows them. Treat such a
	// report as sensitive. Write shows whatever content the events carry.
	CaptureContent bool
}

// title returns the effective title.
func (o Options) title() string {
	if o.Title == "" {
		return "AML run"
	}
	return o.Title
}

// Write writes the report of events to w. The events may belong to
// several runs and may come in any order; Sequence orders them within a
// run. Spans that never ended are shown as unfinished. Write only reads
// events.
func Write(w io.Writer, events []eval.Event, opts Options) error {
	s := newSpanSet()
	for _, e := range events {
		s.add(e)
	}
	title := opts.title()
	return writePage(w, title, encodeData(buildModel(s, title)))
}
