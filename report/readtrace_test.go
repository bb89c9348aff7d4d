package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/observe"
)

func TestReadTraceRoundTripsRealEvents(t *testing.T) {
	for _, capture := range []bool{false, true} {
		var buf bytes.Buffer
		events, err := evaluate(t, smallTree(), capture, observe.NewJSONLinesTracer(&buf, capture))
		if err == nil {
			t.Fatal("the small run succeeded")
		}
		got, err := ReadTrace(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(events) {
			t.Fatalf("capture=%v: read %d events, the run emitted %d", capture, len(got), len(events))
		}
		for i := range events {
			if !reflect.DeepEqual(got[i], events[i]) {
				t.Errorf("capture=%v: event %d\n got %#v\nwant %#v", capture, i, got[i], events[i])
			}
		}
	}
}

func TestReadTraceAttributeTypes(t *testing.T) {
	want := []eval.Event{
		{Type: eval.SpanStart, RunID: "r", SpanID: "1", Sequence: 1, Timestamp: 1000, Kind: "agent", Name: "Agent",
			Attributes: map[string]any{"replayed": true, "index": int64(3), "ratio": 1.5, "whole": 2.0, "followUps": []string{"a", "b"}, "aml.source": "f.star:1:2"}},
		{Type: eval.SpanEnd, RunID: "r", SpanID: "1", Sequence: 2, Timestamp: 1002, Kind: "agent", Name: "Agent", Status: eval.StatusOK, DurationMS: 2.125,
			Attributes: map[string]any{}},
		{Type: eval.PointEvent, RunID: "r", SpanID: "1", ParentSpanID: "", Sequence: 3, Timestamp: 1003, Name: "capability.tool",
			Attributes: map[string]any{"name": "lookup"}},
	}
	var buf bytes.Buffer
	for _, e := range want {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteString("\r\n\n") // CRLF and a blank line are fine
	}
	got, err := ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// 2.0 is written as 2, so it reads back as an integer.
	want[0].Attributes["whole"] = int64(2)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

func TestReadTraceNamesTheBadLine(t *testing.T) {
	good := `{"type":"span.start","runId":"r","spanId":"1","sequence":1,"timestamp":1,"kind":"evaluation","name":"run","attributes":{}}`
	tests := []struct {
		name, input, want string
		syntax            bool
	}{
		{"not JSON", good + "\n\n" + "{not json\n", "trace line 3: not a trace event", true},
		{"no type", good + "\n" + `{"runId":"r","spanId":"2"}` + "\n", `trace line 2: the event has no "type"`, false},
		{"unknown type", `{"type":"span.middle","spanId":"1"}`, `trace line 1: unknown event type "span.middle"`, false},
		{"trailing text", good + " {}\n", "trace line 1: not a trace event: text after the JSON object", false},
		{"attributes not an object", `{"type":"event","spanId":"1","attributes":[1]}`, "trace line 1: not a trace event", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, err := ReadTrace(strings.NewReader(tt.input))
			if err == nil {
				t.Fatalf("no error; read %d events", len(events))
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to start with %q", err, tt.want)
			}
			var se *json.SyntaxError
			if tt.syntax && !errors.As(err, &se) {
				t.Fatalf("error %v does not wrap the *json.SyntaxError", err)
			}
		})
	}
}

func TestReadTraceEmpty(t *testing.T) {
	events, err := ReadTrace(strings.NewReader("\n \n"))
	if err != nil || len(events) != 0 {
		t.Fatalf("ReadTrace of blank lines = %v, %v", events, err)
	}
}
