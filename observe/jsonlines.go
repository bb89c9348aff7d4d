package observe

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/aml-go/aml/eval"
)

// JSONLinesTracer writes every event as one JSON object per line, in the
// wire shape of eval.Event.MarshalJSON. It is safe for concurrent use.
type JSONLinesTracer struct {
	w       io.Writer
	capture bool
	mu      sync.Mutex
}

// NewJSONLinesTracer returns a JSON-lines sink writing to w. With
// captureContent it also receives sensitive content attributes.
func NewJSONLinesTracer(w io.Writer, captureContent bool) *JSONLinesTracer {
	return &JSONLinesTracer{w: w, capture: captureContent}
}

// CaptureContent implements eval.ContentCapturer.
func (j *JSONLinesTracer) CaptureContent() bool { return j.capture }

// HandleTrace implements eval.TraceSink.
func (j *JSONLinesTracer) HandleTrace(e eval.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err = j.w.Write(b)
	return err
}
