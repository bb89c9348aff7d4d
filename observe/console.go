package observe

import (
	"encoding/json"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aml-go/aml/eval"
)

// ConsoleTracer writes trace events as the original's compact tree: two
// spaces of indentation per span level, "▶" for a span start, "✓"/"✗"
// for an ok/failed end with its duration, "•" for a point event, and
// attributes as key=<JSON value> sorted by key. Streaming ACP chunk updates
// (agent_message_chunk, agent_thought_chunk, tool_call_update) are omitted
// to keep the tree readable. It is safe for concurrent use; each event is
// written as one complete line.
type ConsoleTracer struct {
	w       io.Writer
	capture bool
	// NoDurations omits durations, for reproducible output in tests.
	NoDurations bool

	mu     sync.Mutex
	depths map[spanKey]int
}

// spanKey identifies a span across runs: span IDs are unique only within
// one run, and a tracer may serve concurrent runs.
type spanKey struct{ run, span string }

// NewConsoleTracer returns a console tracer writing to w. With
// captureContent it also receives sensitive content attributes.
func NewConsoleTracer(w io.Writer, captureContent bool) *ConsoleTracer {
	return &ConsoleTracer{w: w, capture: captureContent, depths: map[spanKey]int{}}
}

// CaptureContent implements eval.ContentCapturer.
func (c *ConsoleTracer) CaptureContent() bool { return c.capture }

var consoleHidden = map[string]bool{"agent_message_chunk": true, "agent_thought_chunk": true, "tool_call_update": true}

// HandleTrace implements eval.TraceSink.
func (c *ConsoleTracer) HandleTrace(e eval.Event) error {
	if e.Type == eval.PointEvent && e.Name == "acp.session.update" {
		if s, _ := e.Attributes["sessionUpdate"].(string); consoleHidden[s] {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	depth := 0
	switch e.Type {
	case eval.SpanStart:
		if e.ParentSpanID != "" {
			if d, ok := c.depths[spanKey{e.RunID, e.ParentSpanID}]; ok {
				depth = d + 1
			}
		}
		c.depths[spanKey{e.RunID, e.SpanID}] = depth
		indent(&b, depth)
		b.WriteString("▶ ")
		b.WriteString(spanLabel(e.Kind, e.Name))
	case eval.SpanEnd:
		key := spanKey{e.RunID, e.SpanID}
		depth = c.depths[key]
		delete(c.depths, key)
		indent(&b, depth)
		if e.Status == eval.StatusError {
			b.WriteString("✗ ")
		} else {
			b.WriteString("✓ ")
		}
		b.WriteString(spanLabel(e.Kind, e.Name))
		if !c.NoDurations {
			b.WriteByte(' ')
			b.WriteString(FormatDuration(e.DurationMS))
		}
	default:
		depth = c.depths[spanKey{e.RunID, e.SpanID}]
		indent(&b, depth)
		b.WriteString("• ")
		b.WriteString(e.Name)
	}
	keys := make([]string, 0, len(e.Attributes))
	for k := range e.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := json.Marshal(e.Attributes[k])
		if err != nil {
			return err
		}
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.Write(v)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(c.w, b.String())
	return err
}

func indent(b *strings.Builder, depth int) {
	for i := 0; i < depth; i++ {
		b.WriteString("  ")
	}
}

// spanLabel is "<kind> <name>", or just the name when it already starts
// with "<kind>.".
func spanLabel(kind, name string) string {
	if kind == "" || strings.HasPrefix(name, kind+".") {
		return name
	}
	return kind + " " + name
}

// FormatDuration renders milliseconds as the console tracer does: "8.1ms"
// below 10 ms, "412ms" below a second, "1.2s" above.
func FormatDuration(ms float64) string {
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(ms/1000, 'f', 1, 64) + "s"
}
