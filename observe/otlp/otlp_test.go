package otlp_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/observe/otlp"
	"github.com/aml-go/aml/providers/deterministic"
)

// span is one span as the receiver decoded it.
type span struct {
	Name      string
	TraceID   string
	SpanID    string
	ParentID  string
	Start     uint64
	End       uint64
	Attrs     map[string]any
	Status    tracepb.Status_StatusCode
	StatusMsg string
	Events    []event
	Resource  map[string]any
	Scope     string
}

type event struct {
	Name  string
	Time  uint64
	Attrs map[string]any
}

// receiver is an in-process OTLP/HTTP trace receiver.
type receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []span
	paths   []string
	headers []http.Header
	gzipped int
	bad     []string
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	fail := func(format string, args ...any) {
		r.mu.Lock()
		r.bad = append(r.bad, fmt.Sprintf(format, args...))
		r.mu.Unlock()
		http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
	}
	if req.Method != http.MethodPost {
		fail("method %s", req.Method)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail("content type %q", ct)
		return
	}
	var body io.Reader = req.Body
	gz := req.Header.Get("Content-Encoding") == "gzip"
	if gz {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			fail("gzip: %v", err)
			return
		}
		defer zr.Close()
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		fail("read: %v", err)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		fail("unmarshal: %v", err)
		return
	}
	var got []span
	for _, rs := range msg.ResourceSpans {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := span{
					Name:      s.Name,
					TraceID:   hex.EncodeToString(s.TraceId),
					SpanID:    hex.EncodeToString(s.SpanId),
					ParentID:  hex.EncodeToString(s.ParentSpanId),
					Start:     s.StartTimeUnixNano,
					End:       s.EndTimeUnixNano,
					Attrs:     attrMap(s.Attributes),
					Status:    s.GetStatus().GetCode(),
					StatusMsg: s.GetStatus().GetMessage(),
					Resource:  res,
					Scope:     ss.GetScope().GetName(),
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, event{Name: e.Name, Time: e.TimeUnixNano, Attrs: attrMap(e.Attributes)})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.paths = append(r.paths, req.URL.Path)
	r.headers = append(r.headers, req.Header.Clone())
	if gz {
		r.gzipped++
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *receiver) snapshot(t *testing.T) []span {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Fatalf("receiver rejected requests: %v", r.bad)
	}
	return append([]span(nil), r.spans...)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = anyValue(kv.Value)
	}
	return m
}

func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, anyValue(e))
		}
		return out
	}
	return fmt.Sprintf("unsupported %T", v.GetValue())
}

// clearOTelEnv unsets the OTel variables that would change what the tests
// observe, restoring them after the test.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
		"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_SDK_DISABLED",
	} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func newExporter(t *testing.T, opts otlp.Options) *otlp.Exporter {
	t.Helper()
	exp, err := otlp.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp
}

func shutdown(t *testing.T, exp *otlp.Exporter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func byName(spans []span) map[string][]span {
	m := map[string][]span{}
	for _, s := range spans {
		m[s.Name] = append(m[s.Name], s)
	}
	return m
}

func one(t *testing.T, spans []span, name string) span {
	t.Helper()
	got := byName(spans)[name]
	if len(got) != 1 {
		t.Fatalf("want one span %q, got %d among %d spans", name, len(got), len(spans))
	}
	return got[0]
}

const ms = uint64(time.Millisecond)

func TestHandBuiltEvents(t *testing.T) {
	clearOTelEnv(t)
	rcv := newReceiver(t)
	exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL, ServiceName: "aml-test", Headers: map[string]string{"Authorization": "Bearer t0ken"}})
	if exp.CaptureContent() {
		t.Fatal("CaptureContent without Options.CaptureContent")
	}
	const run = "run-1"
	const t0 = int64(1_700_000_000_000)
	events := []eval.Event{
		{Type: eval.SpanStart, SpanID: "1", Kind: "evaluation", Name: "run", Timestamp: t0},
		{Type: eval.SpanStart, SpanID: "2", ParentSpanID: "1", Kind: "component", Name: "Review", Timestamp: t0 + 1,
			Attributes: map[string]any{"aml.source": "review.aml:3:1"}},
		{Type: eval.SpanStart, SpanID: "3", ParentSpanID: "2", Kind: "agent", Name: "Agent", Timestamp: t0 + 2,
			Attributes: map[string]any{"aml.source": "review.aml:4:5", "provider": "deterministic", "model": "m1",
				"tags": []string{"a", "b"}, "budget": int64(7), "ratio": 0.25, "retained": true}},
		{Type: eval.SpanStart, SpanID: "4", ParentSpanID: "3", Kind: "agent", Name: "agent.session", Timestamp: t0 + 3,
			Attributes: map[string]any{"aml.source": "review.aml:4:5", "provider": "deterministic"}},
		{Type: eval.PointEvent, SpanID: "4", ParentSpanID: "3", Name: "acp.session.update", Timestamp: t0 + 5,
			Attributes: map[string]any{"sessionUpdate": "tool_call", "index": int64(2)}},
		{Type: eval.SpanEnd, SpanID: "4", ParentSpanID: "3", Kind: "agent", Name: "agent.session", Status: eval.StatusOK, Timestamp: t0 + 9, DurationMS: 6.5},
		{Type: eval.SpanStart, SpanID: "5", ParentSpanID: "3", Kind: "tool", Name: "lint", Timestamp: t0 + 10,
			Attributes: map[string]any{"aml.source": "review.aml:9:1", "tool.caller": "agent"}},
		{Type: eval.SpanEnd, SpanID: "5", ParentSpanID: "3", Kind: "tool", Name: "lint", Status: eval.StatusError, Timestamp: t0 + 12, DurationMS: 2,
			Attributes: map[string]any{"error.type": "ToolInputError"}},
		{Type: eval.SpanEnd, SpanID: "3", ParentSpanID: "2", Kind: "agent", Name: "Agent", Status: eval.StatusOK, Timestamp: t0 + 13, DurationMS: 11},
		{Type: eval.SpanEnd, SpanID: "2", ParentSpanID: "1", Kind: "component", Name: "Review", Status: eval.StatusOK, Timestamp: t0 + 14, DurationMS: 13},
		{Type: eval.SpanEnd, SpanID: "1", Kind: "evaluation", Name: "run", Status: eval.StatusOK, Timestamp: t0 + 15, DurationMS: 15.25},
	}
	for i, ev := range events {
		ev.RunID = run
		ev.Sequence = uint64(i + 1)
		if err := exp.HandleTrace(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if st := exp.Stats(); st.OpenRuns != 0 || st.OpenSpans != 0 || st.Spans != 5 || st.Events != 1 || st.Dropped != 0 {
		t.Fatalf("stats after the run: %+v", st)
	}

	// Events the exporter cannot place are dropped and counted.
	for _, ev := range []eval.Event{
		{Type: eval.SpanEnd, RunID: run, SpanID: "4", Status: eval.StatusOK},       // run already finished
		{Type: eval.PointEvent, RunID: run, SpanID: "3", Name: "late"},             // run already finished
		{Type: eval.PointEvent, RunID: "nope", SpanID: "99", Name: "x"},            // unknown run
		{Type: eval.SpanStart, RunID: "nope", SpanID: "2", ParentSpanID: "1"},      // unknown parent
		{Type: eval.SpanEnd, RunID: "nope", SpanID: "1", Status: eval.StatusError}, // unknown span
	} {
		if err := exp.HandleTrace(ev); !errors.Is(err, otlp.ErrUnknownSpan) {
			t.Fatalf("%+v: want ErrUnknownSpan, got %v", ev, err)
		}
	}
	// Within a live run: an end for an ended span and an event on it.
	live := []eval.Event{
		{Type: eval.SpanStart, RunID: "run-2", SpanID: "1", Kind: "evaluation", Name: "run", Timestamp: t0},
		{Type: eval.SpanStart, RunID: "run-2", SpanID: "2", ParentSpanID: "1", Kind: "agent", Name: "Agent", Timestamp: t0},
		{Type: eval.SpanEnd, RunID: "run-2", SpanID: "2", ParentSpanID: "1", Status: eval.StatusOK, Timestamp: t0},
	}
	for _, ev := range live {
		if err := exp.HandleTrace(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := exp.HandleTrace(eval.Event{Type: eval.SpanEnd, RunID: "run-2", SpanID: "2", Status: eval.StatusOK}); !errors.Is(err, otlp.ErrUnknownSpan) {
		t.Fatalf("second end: %v", err)
	}
	if err := exp.HandleTrace(eval.Event{Type: eval.PointEvent, RunID: "run-2", SpanID: "2", Name: "late"}); !errors.Is(err, otlp.ErrUnknownSpan) {
		t.Fatalf("event on ended span: %v", err)
	}
	// A span started under an ended parent still joins the trace.
	if err := exp.HandleTrace(eval.Event{Type: eval.SpanStart, RunID: "run-2", SpanID: "3", ParentSpanID: "2", Kind: "tool", Name: "late.tool", Timestamp: t0 + 1}); err != nil {
		t.Fatal(err)
	}
	// The root ends while span 3 is open: 3 is ended as unterminated.
	if err := exp.HandleTrace(eval.Event{Type: eval.SpanEnd, RunID: "run-2", SpanID: "1", Status: eval.StatusOK, Timestamp: t0 + 2, DurationMS: 2}); err != nil {
		t.Fatal(err)
	}
	st := exp.Stats()
	if st.Dropped != 7 || st.Unterminated != 1 || st.OpenRuns != 0 || st.OpenSpans != 0 {
		t.Fatalf("stats: %+v", st)
	}

	shutdown(t, exp)
	if err := exp.HandleTrace(events[0]); !errors.Is(err, otlp.ErrShutdown) {
		t.Fatalf("after Shutdown: %v", err)
	}

	var spans []span
	for _, s := range rcv.snapshot(t) {
		if s.Attrs["aml.run_id"] == run {
			spans = append(spans, s)
		}
	}
	if len(spans) != 5 {
		t.Fatalf("want 5 spans of %s, got %d", run, len(spans))
	}
	root := one(t, spans, "run")
	review := one(t, spans, "Review")
	agent := one(t, spans, "Agent")
	session := one(t, spans, "agent.session")
	lint := one(t, spans, "lint")

	for _, s := range spans {
		if s.TraceID != root.TraceID {
			t.Errorf("%s: trace %s, root trace %s", s.Name, s.TraceID, root.TraceID)
		}
		if s.Resource["service.name"] != "aml-test" {
			t.Errorf("%s: resource %v", s.Name, s.Resource)
		}
		if s.Scope != otlp.ScopeName {
			t.Errorf("%s: scope %q", s.Name, s.Scope)
		}
	}
	if root.ParentID != "" {
		t.Errorf("root has parent %s", root.ParentID)
	}
	for _, link := range []struct{ child, parent span }{{review, root}, {agent, review}, {session, agent}, {lint, agent}} {
		if link.child.ParentID != link.parent.SpanID {
			t.Errorf("%s: parent %s, want %s (%s)", link.child.Name, link.child.ParentID, link.parent.SpanID, link.parent.Name)
		}
	}

	// Times: start at the event timestamp, end at start + duration.
	base := uint64(t0) * ms
	if root.Start != base || root.End != base+15*ms+ms/4 {
		t.Errorf("root times %d..%d", root.Start, root.End)
	}
	if session.Start != base+3*ms || session.End != base+3*ms+6*ms+ms/2 {
		t.Errorf("session times %d..%d", session.Start, session.End)
	}

	// Attributes with their types.
	want := map[string]any{
		"aml.run_id": run, "aml.span_id": "3", "aml.kind": "agent", "aml.source": "review.aml:4:5",
		"provider": "deterministic", "model": "m1", "tags": []any{"a", "b"}, "budget": int64(7), "ratio": 0.25, "retained": true,
	}
	for k, v := range want {
		if fmt.Sprint(agent.Attrs[k]) != fmt.Sprint(v) || fmt.Sprintf("%T", agent.Attrs[k]) != fmt.Sprintf("%T", v) {
			t.Errorf("Agent attribute %s = %#v, want %#v", k, agent.Attrs[k], v)
		}
	}
	if root.Attrs["aml.kind"] != "evaluation" || review.Attrs["aml.kind"] != "component" || lint.Attrs["aml.kind"] != "tool" {
		t.Errorf("kinds: %v %v %v", root.Attrs["aml.kind"], review.Attrs["aml.kind"], lint.Attrs["aml.kind"])
	}

	// Statuses.
	for _, s := range []span{root, review, agent, session} {
		if s.Status != tracepb.Status_STATUS_CODE_OK {
			t.Errorf("%s: status %v", s.Name, s.Status)
		}
	}
	if lint.Status != tracepb.Status_STATUS_CODE_ERROR || lint.StatusMsg != "ToolInputError" || lint.Attrs["error.type"] != "ToolInputError" {
		t.Errorf("lint: status %v %q attrs %v", lint.Status, lint.StatusMsg, lint.Attrs)
	}

	// The point event.
	if len(session.Events) != 1 {
		t.Fatalf("session events: %+v", session.Events)
	}
	if e := session.Events[0]; e.Name != "acp.session.update" || e.Time != base+5*ms || e.Attrs["sessionUpdate"] != "tool_call" || e.Attrs["index"] != int64(2) {
		t.Errorf("event: %+v", e)
	}

	// Run 2: the late child is linked to its ended parent and marked.
	var late, run2Agent span
	for _, s := range rcv.snapshot(t) {
		switch {
		case s.Attrs["aml.run_id"] == "run-2" && s.Name == "late.tool":
			late = s
		case s.Attrs["aml.run_id"] == "run-2" && s.Name == "Agent":
			run2Agent = s
		}
	}
	if late.ParentID == "" || late.ParentID != run2Agent.SpanID || late.Attrs["aml.unterminated"] != true {
		t.Errorf("late span %+v, agent %s", late, run2Agent.SpanID)
	}

	// Transport: path, gzip, headers.
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for i, p := range rcv.paths {
		if p != "/v1/traces" {
			t.Errorf("path %q", p)
		}
		if got := rcv.headers[i].Get("Authorization"); got != "Bearer t0ken" {
			t.Errorf("Authorization header %q", got)
		}
	}
	if rcv.gzipped != len(rcv.paths) {
		t.Errorf("%d of %d requests gzipped", rcv.gzipped, len(rcv.paths))
	}
}

// testTree is the node tree of the real evaluations.
func testTree() *eval.Agent {
	return &eval.Agent{
		Position: eval.Position{File: "test.aml", Line: 1, Col: 1},
		Children: []any{"hello", &eval.Agent{Position: eval.Position{File: "test.aml", Line: 2, Col: 5}, Children: []any{"inner"}}},
	}
}

func TestRealEvaluation(t *testing.T) {
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%v", capture), func(t *testing.T) {
			clearOTelEnv(t)
			rcv := newReceiver(t)
			exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL, CaptureContent: capture})
			if exp.CaptureContent() != capture {
				t.Fatal("CaptureContent")
			}
			p, err := deterministic.New(deterministic.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var sinkErrs []error
			rt, err := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}, OnTraceError: func(err error, _ eval.Event) {
				mu.Lock()
				sinkErrs = append(sinkErrs, err)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := rt.Evaluate(context.Background(), testTree(), eval.EvaluateOptions{RunID: "real-run"})
			if err != nil || out != "helloinner" {
				t.Fatalf("Evaluate: %q %v", out, err)
			}
			if st := exp.Stats(); st.OpenRuns != 0 || st.OpenSpans != 0 || st.Dropped != 0 {
				t.Fatalf("stats: %+v", st)
			}
			shutdown(t, exp)
			mu.Lock()
			if len(sinkErrs) > 0 {
				t.Errorf("sink errors: %v", sinkErrs)
			}
			mu.Unlock()

			spans := rcv.snapshot(t)
			names := byName(spans)
			if len(spans) != 5 || len(names["run"]) != 1 || len(names["Agent"]) != 2 || len(names["agent.session"]) != 2 {
				t.Fatalf("spans: %v", spanNames(spans))
			}
			root := names["run"][0]
			if root.ParentID != "" || root.Attrs["aml.kind"] != "evaluation" || root.Attrs["aml.run_id"] != "real-run" {
				t.Errorf("root: %+v", root)
			}
			ids := map[string]span{}
			for _, s := range spans {
				ids[s.SpanID] = s
			}
			for _, s := range spans {
				if s.TraceID != root.TraceID {
					t.Errorf("%s in another trace", s.Name)
				}
				if s.Status != tracepb.Status_STATUS_CODE_OK {
					t.Errorf("%s: status %v", s.Name, s.Status)
				}
				if s.Resource["service.name"] != "aml" {
					t.Errorf("service.name %v", s.Resource["service.name"])
				}
				if s.End < s.Start {
					t.Errorf("%s ends before it starts", s.Name)
				}
				if s.Name == "run" {
					continue
				}
				if _, ok := s.Attrs["aml.source"].(string); !ok {
					t.Errorf("%s: no aml.source in %v", s.Name, s.Attrs)
				}
				parent, ok := ids[s.ParentID]
				if !ok {
					t.Errorf("%s: parent %s not exported", s.Name, s.ParentID)
					continue
				}
				wantParent := map[string]string{"Agent": "run", "agent.session": "Agent"}[s.Name]
				if parent.Name != wantParent {
					t.Errorf("%s: parent %s, want %s", s.Name, parent.Name, wantParent)
				}
				if s.Name == "agent.session" && parent.Attrs["aml.source"] != s.Attrs["aml.source"] {
					t.Errorf("session %v under agent %v", s.Attrs["aml.source"], parent.Attrs["aml.source"])
				}
				if s.Attrs["provider"] != "deterministic" || s.Attrs["aml.kind"] != "agent" {
					t.Errorf("%s: attrs %v", s.Name, s.Attrs)
				}
			}
			prompts := map[any]bool{}
			for _, a := range names["Agent"] {
				_, hasPrompt := a.Attrs["prompt"]
				_, hasResult := a.Attrs["result"]
				if hasPrompt != capture || hasResult != capture {
					t.Errorf("Agent %v: prompt present %v, result present %v, capture %v", a.Attrs["aml.source"], hasPrompt, hasResult, capture)
				}
				prompts[a.Attrs["prompt"]] = true
			}
			if capture && (!prompts["inner"] || !prompts["helloinner"]) {
				t.Errorf("prompts %v", prompts)
			}
		})
	}
}

func TestRealEvaluationFailure(t *testing.T) {
	clearOTelEnv(t)
	rcv := newReceiver(t)
	exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL, CaptureContent: true})
	p, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		return nil, errors.New("provider refused")
	}})
	rt, err := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Evaluate(context.Background(), &eval.Agent{Position: eval.Position{File: "f.aml", Line: 1}, Children: []any{"x"}}); err == nil {
		t.Fatal("evaluation did not fail")
	}
	shutdown(t, exp)
	spans := rcv.snapshot(t)
	if len(spans) != 3 {
		t.Fatalf("spans: %v", spanNames(spans))
	}
	for _, s := range spans {
		if s.Status != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s: status %v", s.Name, s.Status)
		}
		if et, _ := s.Attrs["error.type"].(string); et == "" {
			t.Errorf("%s: no error.type in %v", s.Name, s.Attrs)
		}
		if msg, _ := s.Attrs["error.message"].(string); msg == "" || s.StatusMsg != msg {
			t.Errorf("%s: error.message %q, status message %q", s.Name, msg, s.StatusMsg)
		}
	}
}

func spanNames(spans []span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// hangBound bounds waits that only a real hang exceeds.
const hangBound = time.Minute

// TestUnreachableEndpoint: an unreachable collector never slows
// evaluation nor fails its trace sink; the failed exports surface from
// Shutdown, OnError and Stats. With the batch delay pinned at an hour no
// export runs before Shutdown, so an export on the evaluation's path (a
// synchronous exporter) shows as an export failure during Evaluate, not
// as a slow evaluation that a loaded machine could imitate.
func TestUnreachableEndpoint(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	var mu sync.Mutex
	var exportErrs []error
	exp := newExporter(t, otlp.Options{Endpoint: "http://" + closedPort(t), Timeout: 2 * time.Second, OnError: func(err error) {
		mu.Lock()
		exportErrs = append(exportErrs, err)
		mu.Unlock()
	}})
	p, _ := deterministic.New(deterministic.Options{})
	var traceErrs []error
	rt, err := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}, OnTraceError: func(err error, _ eval.Event) {
		traceErrs = append(traceErrs, err)
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := rt.Evaluate(context.Background(), testTree())
	if err != nil || out != "helloinner" {
		t.Fatalf("Evaluate: %q %v", out, err)
	}
	if d := time.Since(start); d > hangBound {
		t.Fatalf("evaluation took %s", d)
	}
	if st := exp.Stats(); st.ExportErrors != 0 {
		t.Fatalf("%d exports failed during the evaluation: the export ran on its path", st.ExportErrors)
	}
	if len(traceErrs) != 0 {
		t.Fatalf("trace errors: %v", traceErrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	err = exp.Shutdown(ctx)
	if err == nil {
		t.Fatal("Shutdown reported no export failure")
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatalf("Shutdown hit its deadline: %v", err)
	}
	t.Logf("Shutdown: %v", err)
	mu.Lock()
	defer mu.Unlock()
	if len(exportErrs) == 0 {
		t.Error("OnError not called")
	}
	if st := exp.Stats(); st.ExportErrors == 0 {
		t.Errorf("stats: %+v", st)
	}
	if err2 := exp.Shutdown(ctx); err2 != err {
		t.Errorf("second Shutdown: %v", err2)
	}
}

// TestHangingCollectorDoesNotBlock: a collector that never answers (its
// requests are released only at the end of the test, and the export
// timeout is far beyond the test) blocks neither evaluation nor, past
// its context, Shutdown. An export on the evaluation's path would block
// it for the whole export timeout; only that exceeds hangBound.
func TestHangingCollectorDoesNotBlock(t *testing.T) {
	clearOTelEnv(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	exp := newExporter(t, otlp.Options{Endpoint: srv.URL, Timeout: time.Hour})
	p, _ := deterministic.New(deterministic.Options{})
	rt, _ := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}})
	evaluated := make(chan error, 1)
	go func() {
		for i := 0; i < 3; i++ {
			if _, err := rt.Evaluate(context.Background(), testTree()); err != nil {
				evaluated <- err
				return
			}
		}
		evaluated <- nil
	}()
	select {
	case err := <-evaluated:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangBound):
		t.Fatal("evaluations blocked on the hanging collector")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- exp.Shutdown(ctx) }()
	select {
	case err := <-shut:
		if err == nil {
			t.Fatal("Shutdown succeeded against a hanging collector")
		}
	case <-time.After(hangBound):
		t.Fatal("Shutdown ignored its context against a hanging collector")
	}
}

func TestEnvironmentEndpoint(t *testing.T) {
	t.Run("OTEL_EXPORTER_OTLP_ENDPOINT", func(t *testing.T) {
		clearOTelEnv(t)
		rcv := newReceiver(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		exp := newExporter(t, otlp.Options{})
		runOnce(t, exp)
		shutdown(t, exp)
		spans := rcv.snapshot(t)
		if len(spans) != 5 {
			t.Fatalf("spans: %v", spanNames(spans))
		}
		if spans[0].Resource["service.name"] != "from-env" {
			t.Errorf("service.name %v", spans[0].Resource["service.name"])
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if len(rcv.paths) == 0 || rcv.paths[0] != "/v1/traces" {
			t.Errorf("paths %v", rcv.paths)
		}
	})
	t.Run("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", func(t *testing.T) {
		clearOTelEnv(t)
		rcv := newReceiver(t)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rcv.srv.URL+"/custom/traces")
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		exp := newExporter(t, otlp.Options{ServiceName: "explicit"})
		runOnce(t, exp)
		shutdown(t, exp)
		spans := rcv.snapshot(t)
		if len(spans) != 5 || spans[0].Resource["service.name"] != "explicit" {
			t.Fatalf("spans: %v resource %v", spanNames(spans), spans[0].Resource)
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if rcv.paths[0] != "/custom/traces" {
			t.Errorf("paths %v", rcv.paths)
		}
	})
	t.Run("explicit Endpoint wins", func(t *testing.T) {
		clearOTelEnv(t)
		rcv := newReceiver(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+closedPort(t))
		exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL})
		runOnce(t, exp)
		shutdown(t, exp)
		if spans := rcv.snapshot(t); len(spans) != 5 {
			t.Fatalf("spans: %v", spanNames(spans))
		}
	})
}

func runOnce(t *testing.T, exp *otlp.Exporter) {
	t.Helper()
	p, _ := deterministic.New(deterministic.Options{})
	rt, err := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Evaluate(context.Background(), testTree()); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentRuns(t *testing.T) {
	clearOTelEnv(t)
	rcv := newReceiver(t)
	exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL})
	p, _ := deterministic.New(deterministic.Options{})
	rt, _ := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}})
	const runs = 16
	var wg sync.WaitGroup
	for i := 0; i < runs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.Evaluate(context.Background(), testTree()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if st := exp.Stats(); st.OpenRuns != 0 || st.OpenSpans != 0 || st.Dropped != 0 || st.Spans != runs*5 {
		t.Fatalf("stats: %+v", st)
	}
	shutdown(t, exp)
	spans := rcv.snapshot(t)
	if len(spans) != runs*5 {
		t.Fatalf("%d spans", len(spans))
	}
	traces := map[string]map[string]bool{}
	runOf := map[string]any{}
	ids := map[string]span{}
	for _, s := range spans {
		ids[s.SpanID] = s
		if traces[s.TraceID] == nil {
			traces[s.TraceID] = map[string]bool{}
		}
		traces[s.TraceID][fmt.Sprint(s.Attrs["aml.run_id"])] = true
		if r, ok := runOf[s.TraceID]; ok && r != s.Attrs["aml.run_id"] {
			t.Errorf("trace %s mixes runs", s.TraceID)
		}
		runOf[s.TraceID] = s.Attrs["aml.run_id"]
	}
	if len(traces) != runs {
		t.Fatalf("%d traces for %d runs", len(traces), runs)
	}
	for _, s := range spans {
		if s.ParentID == "" {
			continue
		}
		if p, ok := ids[s.ParentID]; !ok || p.TraceID != s.TraceID || p.Attrs["aml.run_id"] != s.Attrs["aml.run_id"] {
			t.Errorf("%s: bad parent", s.Name)
		}
	}
}

func TestShutdownEndsOpenSpans(t *testing.T) {
	clearOTelEnv(t)
	rcv := newReceiver(t)
	exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL})
	now := time.Now().UnixMilli()
	for _, ev := range []eval.Event{
		{Type: eval.SpanStart, RunID: "r", SpanID: "1", Kind: "evaluation", Name: "run", Timestamp: now},
		{Type: eval.SpanStart, RunID: "r", SpanID: "2", ParentSpanID: "1", Kind: "agent", Name: "Agent", Timestamp: now},
	} {
		if err := exp.HandleTrace(ev); err != nil {
			t.Fatal(err)
		}
	}
	shutdown(t, exp)
	spans := rcv.snapshot(t)
	if len(spans) != 2 {
		t.Fatalf("spans: %v", spanNames(spans))
	}
	for _, s := range spans {
		if s.Attrs["aml.unterminated"] != true || s.Status != tracepb.Status_STATUS_CODE_UNSET {
			t.Errorf("%s: %v %v", s.Name, s.Attrs, s.Status)
		}
	}
	if st := exp.Stats(); st.Unterminated != 2 || st.OpenRuns != 0 {
		t.Errorf("stats: %+v", st)
	}
}

func TestMaxOpenSpans(t *testing.T) {
	clearOTelEnv(t)
	rcv := newReceiver(t)
	exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL, MaxOpenSpans: 2})
	evs := []eval.Event{
		{Type: eval.SpanStart, RunID: "r", SpanID: "1", Kind: "evaluation", Name: "run"},
		{Type: eval.SpanStart, RunID: "r", SpanID: "2", ParentSpanID: "1", Name: "a"},
	}
	for _, ev := range evs {
		if err := exp.HandleTrace(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := exp.HandleTrace(eval.Event{Type: eval.SpanStart, RunID: "r", SpanID: "3", ParentSpanID: "2", Name: "b"}); !errors.Is(err, otlp.ErrTooManySpans) {
		t.Fatalf("third span: %v", err)
	}
	// Its end is then unknown, and dropped too.
	if err := exp.HandleTrace(eval.Event{Type: eval.SpanEnd, RunID: "r", SpanID: "3", Status: eval.StatusOK}); !errors.Is(err, otlp.ErrUnknownSpan) {
		t.Fatalf("end of dropped span: %v", err)
	}
	if st := exp.Stats(); st.Dropped != 2 || st.OpenSpans != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	clearOTelEnv(t)
	for _, o := range []otlp.Options{
		{Endpoint: "ftp://localhost:4318"},
		{Endpoint: "http://"},
		{Endpoint: "http://host:4318/?q=1"},
		{MaxOpenSpans: -1},
		{Timeout: -time.Second},
	} {
		if exp, err := otlp.New(context.Background(), o); err == nil {
			_ = exp.Shutdown(context.Background())
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestReceiverDecodesPlainBodies(t *testing.T) {
	// With compression switched off through the environment the exporter
	// sends plain protobuf, which the receiver also accepts.
	clearOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none")
	rcv := newReceiver(t)
	exp := newExporter(t, otlp.Options{Endpoint: rcv.srv.URL})
	runOnce(t, exp)
	shutdown(t, exp)
	if spans := rcv.snapshot(t); len(spans) != 5 {
		t.Fatalf("spans: %v", spanNames(spans))
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.gzipped != 0 {
		t.Errorf("%d gzipped requests", rcv.gzipped)
	}
}
