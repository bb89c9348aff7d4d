package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aml-go/aml/eval"
)

// wireEvent is the JSON-lines form of eval.Event (eval.Event.MarshalJSON).
type wireEvent struct {
	Type         eval.EventType             `json:"type"`
	RunID        string                     `json:"runId"`
	SpanID       string                     `json:"spanId"`
	ParentSpanID string                     `json:"parentSpanId"`
	Sequence     uint64                     `json:"sequence"`
	Timestamp    int64                      `json:"timestamp"`
	Kind         string                     `json:"kind"`
	Name         string                     `json:"name"`
	Status       string                     `json:"status"`
	DurationMS   *float64                   `json:"durationMs"`
	Attributes   map[string]json.RawMessage `json:"attributes"`
}

// ReadTrace parses a JSON-lines trace file (the wire form of eval.Event,
// one event per line). Blank lines are skipped. Attribute values come back
// as the scalar types of eval.Event: bool, int64 (numbers written without
// a fraction or exponent), float64, string and []string. An error names
// the line (counting from 1) and wraps the cause.
func ReadTrace(r io.Reader) ([]eval.Event, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var events []eval.Event
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return events, fmt.Errorf("reading trace line %d: %w", n, err)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			e, perr := parseEvent(trimmed)
			if perr != nil {
				return events, fmt.Errorf("trace line %d: %w", n, perr)
			}
			events = append(events, e)
		}
		if err != nil {
			return events, nil
		}
	}
}

// parseEvent decodes one JSON-lines event.
func parseEvent(line []byte) (eval.Event, error) {
	var w wireEvent
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&w); err != nil {
		return eval.Event{}, fmt.Errorf("not a trace event: %w", err)
	}
	if dec.More() {
		return eval.Event{}, errors.New("not a trace event: text after the JSON object")
	}
	switch w.Type {
	case eval.SpanStart, eval.SpanEnd, eval.PointEvent:
	case "":
		return eval.Event{}, errors.New(`the event has no "type"`)
	default:
		return eval.Event{}, fmt.Errorf("unknown event type %q (want span.start, span.end or event)", w.Type)
	}
	e := eval.Event{Type: w.Type, RunID: w.RunID, SpanID: w.SpanID, ParentSpanID: w.ParentSpanID, Sequence: w.Sequence,
		Timestamp: w.Timestamp, Kind: w.Kind, Name: w.Name, Status: w.Status, Attributes: make(map[string]any, len(w.Attributes))}
	if w.DurationMS != nil {
		e.DurationMS = *w.DurationMS
	}
	for k, raw := range w.Attributes {
		v, err := attrValue(raw)
		if err != nil {
			return eval.Event{}, fmt.Errorf("attribute %q: %w", k, err)
		}
		e.Attributes[k] = v
	}
	return e, nil
}

// attrValue decodes one attribute value into the scalar types of
// eval.Event.
func attrValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return scalar(v), nil
}

// scalar converts decoded JSON into eval's attribute types; values that are
// not scalars (objects, mixed arrays) are kept as decoded.
func scalar(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := v.String()
		if !strings.ContainsAny(s, ".eE") {
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
		f, _ := v.Float64()
		return f
	case []any:
		strs := make([]string, 0, len(v))
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				break
			}
			strs = append(strs, s)
		}
		if len(strs) == len(v) {
			return strs
		}
		for i, x := range v {
			v[i] = scalar(x)
		}
		return v
	case map[string]any:
		for k, x := range v {
			v[k] = scalar(x)
		}
		return v
	}
	return v
}
