package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aml-go/aml/eval"
)

// ScopeName is the instrumentation scope of the exported spans.
const ScopeName = "github.com/aml-go/aml/observe/otlp"

// DefaultServiceName is the service.name of an exporter whose options and
// environment name none.
const DefaultServiceName = "aml"

// DefaultMaxOpenSpans is the bound on open spans of an Options that sets
// none.
const DefaultMaxOpenSpans = 4096

// maxEndedSpans bounds the span contexts of ended spans that the exporter
// remembers (across all runs in flight) so that a span started under an
// already ended parent still joins the trace.
const maxEndedSpans = 1 << 16

// tracesPath is the OTLP/HTTP traces path appended to a base endpoint.
const tracesPath = "/v1/traces"

var (
	// ErrUnknownSpan is wrapped by the error HandleTrace returns for an
	// event whose span (or parent span) is not open: already ended, never
	// started, or of a run that already finished. The event is dropped.
	ErrUnknownSpan = errors.New("otlp: unknown or ended span")
	// ErrTooManySpans is wrapped by the error HandleTrace returns for a
	// span.start dropped because Options.MaxOpenSpans spans are open.
	ErrTooManySpans = errors.New("otlp: too many open spans")
	// ErrShutdown is returned by HandleTrace after Shutdown.
	ErrShutdown = errors.New("otlp: exporter is shut down")
)

// Options configure an Exporter.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL, for example
	// "http://localhost:4318" or "localhost:4318"; "/v1/traces" is appended
	// to its path unless the path already ends with it. "" leaves the
	// endpoint to the SDK's environment handling
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string
	// Insecure sends plain HTTP to an Endpoint without a scheme. An
	// http:// Endpoint is always plain HTTP and an https:// one always uses
	// TLS; with an empty Endpoint the environment decides.
	Insecure bool
	// Headers are sent with every export request (for example an
	// authorization header); nil keeps OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string
	// ServiceName is the service.name resource attribute; "" means
	// OTEL_SERVICE_NAME, else DefaultServiceName.
	ServiceName string
	// CaptureContent makes the evaluator send content attributes (prompts,
	// results, error messages) to this exporter, which then exports them.
	CaptureContent bool
	// Timeout bounds one export request; 0 keeps the SDK default (10s, or
	// OTEL_EXPORTER_OTLP_TIMEOUT).
	Timeout time.Duration
	// MaxOpenSpans bounds the spans open at once across all runs; a
	// span.start beyond it is dropped. 0 means DefaultMaxOpenSpans.
	MaxOpenSpans int
	// OnError, when set, receives every failed export. It is called from
	// the SDK's export goroutine and must not block for long.
	OnError func(error)
}

// Stats are an exporter's counters.
type Stats struct {
	// Spans is the number of spans started.
	Spans uint64
	// Events is the number of point events recorded as span events.
	Events uint64
	// Dropped is the number of trace events dropped: for unknown or ended
	// spans, beyond MaxOpenSpans, or after Shutdown.
	Dropped uint64
	// Unterminated is the number of spans ended by the exporter because
	// their run's root span ended first (or Shutdown came first).
	Unterminated uint64
	// ExportErrors is the number of failed export requests.
	ExportErrors uint64
	// OpenRuns and OpenSpans are the runs and spans currently tracked.
	OpenRuns  int
	OpenSpans int
}

// Exporter converts AML trace events into OpenTelemetry spans and exports
// them over OTLP/HTTP. It implements eval.TraceSink and
// eval.ContentCapturer and is safe for concurrent use; see the package
// documentation for the mapping and the concurrency contract.
type Exporter struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	capture  bool
	maxOpen  int
	sink     *errorRecorder

	mu        sync.Mutex
	runs      map[string]*runState
	open      int
	ended     int
	stats     Stats
	closed    bool
	closeErr  error
	closeOnce sync.Once
}

// runState is the exporter's view of one run in flight.
type runState struct {
	open  map[string]*openSpan
	ended map[string]trace.SpanContext
}

// openSpan is an OpenTelemetry span started for an AML span.
type openSpan struct {
	span   trace.Span
	start  time.Time
	parent string
}

var (
	_ eval.TraceSink       = (*Exporter)(nil)
	_ eval.ContentCapturer = (*Exporter)(nil)
)

// New returns an exporter for opts. ctx is used only while setting up
// (resource detection); export requests run in the background. An invalid
// Endpoint is an error; an unreachable collector is not (its failures
// surface from ForceFlush, Shutdown and Options.OnError).
func New(ctx context.Context, opts Options) (*Exporter, error) {
	if opts.MaxOpenSpans < 0 {
		return nil, fmt.Errorf("otlp: MaxOpenSpans must not be negative, got %d", opts.MaxOpenSpans)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("otlp: Timeout must not be negative, got %s", opts.Timeout)
	}
	httpOpts, err := clientOptions(opts)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, opts.ServiceName)
	if err != nil {
		return nil, err
	}
	client, err := otlptrace.New(ctx, otlptracehttp.NewClient(httpOpts...))
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	rec := &errorRecorder{next: client, onError: opts.OnError}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(rec),
	)
	maxOpen := opts.MaxOpenSpans
	if maxOpen == 0 {
		maxOpen = DefaultMaxOpenSpans
	}
	return &Exporter{
		provider: provider,
		tracer:   provider.Tracer(ScopeName),
		capture:  opts.CaptureContent,
		maxOpen:  maxOpen,
		sink:     rec,
		runs:     map[string]*runState{},
	}, nil
}

// clientOptions translates opts into otlptracehttp options.
func clientOptions(opts Options) ([]otlptracehttp.Option, error) {
	var o []otlptracehttp.Option
	if opts.Endpoint != "" {
		host, path, insecure, err := parseEndpoint(opts.Endpoint, opts.Insecure)
		if err != nil {
			return nil, err
		}
		o = append(o, otlptracehttp.WithEndpoint(host), otlptracehttp.WithURLPath(path))
		if insecure {
			o = append(o, otlptracehttp.WithInsecure())
		}
	}
	if opts.Headers != nil {
		o = append(o, otlptracehttp.WithHeaders(opts.Headers))
	}
	if opts.Timeout > 0 {
		o = append(o, otlptracehttp.WithTimeout(opts.Timeout))
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION") == "" && os.Getenv("OTEL_EXPORTER_OTLP_COMPRESSION") == "" {
		o = append(o, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	return o, nil
}

// parseEndpoint splits a base endpoint into host[:port], the traces URL
// path and whether to use plain HTTP.
func parseEndpoint(endpoint string, insecure bool) (host, path string, plain bool, err error) {
	raw := strings.TrimSpace(endpoint)
	plain = insecure
	if !strings.Contains(raw, "://") {
		raw = "//" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", false, fmt.Errorf("otlp: invalid endpoint %q: %w", endpoint, err)
	}
	switch u.Scheme {
	case "":
	case "http":
		plain = true
	case "https":
		plain = false
	default:
		return "", "", false, fmt.Errorf("otlp: invalid endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" {
		return "", "", false, fmt.Errorf("otlp: invalid endpoint %q: no host", endpoint)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", false, fmt.Errorf("otlp: invalid endpoint %q: only scheme, host, port and path are allowed", endpoint)
	}
	path = strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(path, tracesPath) {
		path += tracesPath
	}
	return u.Host, path, plain, nil
}

// newResource builds the resource: service.name (explicit, else
// OTEL_SERVICE_NAME, else "aml"), the SDK attributes and
// OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, serviceName string) (*resource.Resource, error) {
	ro := []resource.Option{
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithFromEnv(),
	}
	if serviceName != "" {
		ro = append(ro, resource.WithAttributes(attribute.String("service.name", serviceName)))
	}
	res, err := resource.New(ctx, ro...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("otlp: resource: %w", err)
	}
	return res, nil
}

// CaptureContent implements eval.ContentCapturer.
func (x *Exporter) CaptureContent() bool { return x.capture }

// HandleTrace implements eval.TraceSink. It never blocks on the network.
// Events it cannot place are dropped and reported as an error wrapping
// ErrUnknownSpan (or ErrTooManySpans, ErrShutdown).
func (x *Exporter) HandleTrace(ev eval.Event) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		x.stats.Dropped++
		return ErrShutdown
	}
	switch ev.Type {
	case eval.SpanStart:
		return x.startSpan(ev)
	case eval.SpanEnd:
		return x.endSpan(ev)
	case eval.PointEvent:
		return x.pointEvent(ev)
	}
	x.stats.Dropped++
	return fmt.Errorf("otlp: unknown trace event type %q (run %s, span %s)", ev.Type, ev.RunID, ev.SpanID)
}

func (x *Exporter) unknown(ev eval.Event, what string) error {
	x.stats.Dropped++
	return fmt.Errorf("%w: %s %q for run %s span %s", ErrUnknownSpan, what, ev.Name, ev.RunID, ev.SpanID)
}

func (x *Exporter) startSpan(ev eval.Event) error {
	r := x.runs[ev.RunID]
	if r != nil {
		if _, dup := r.open[ev.SpanID]; dup {
			x.stats.Dropped++
			return fmt.Errorf("otlp: duplicate span.start for run %s span %s", ev.RunID, ev.SpanID)
		}
	}
	ctx := context.Background()
	opts := make([]trace.SpanStartOption, 0, 4)
	if ev.ParentSpanID == "" {
		opts = append(opts, trace.WithNewRoot())
	} else {
		if r == nil {
			return x.unknown(ev, "span.start with unknown parent "+ev.ParentSpanID)
		}
		if p := r.open[ev.ParentSpanID]; p != nil {
			ctx = trace.ContextWithSpan(ctx, p.span)
		} else if sc, ok := r.ended[ev.ParentSpanID]; ok {
			ctx = trace.ContextWithSpanContext(ctx, sc)
		} else {
			return x.unknown(ev, "span.start with unknown parent "+ev.ParentSpanID)
		}
	}
	if x.open >= x.maxOpen {
		x.stats.Dropped++
		return fmt.Errorf("%w: %d open, dropping run %s span %s", ErrTooManySpans, x.open, ev.RunID, ev.SpanID)
	}
	if r == nil {
		r = &runState{open: map[string]*openSpan{}, ended: map[string]trace.SpanContext{}}
		x.runs[ev.RunID] = r
	}
	start := eventTime(ev)
	kv := make([]attribute.KeyValue, 0, len(ev.Attributes)+3)
	kv = appendAttributes(kv, ev.Attributes)
	kv = append(kv,
		attribute.String("aml.run_id", ev.RunID),
		attribute.String("aml.span_id", ev.SpanID),
		attribute.String("aml.kind", ev.Kind))
	opts = append(opts, trace.WithTimestamp(start), trace.WithAttributes(kv...), trace.WithSpanKind(trace.SpanKindInternal))
	_, sp := x.tracer.Start(ctx, ev.Name, opts...)
	r.open[ev.SpanID] = &openSpan{span: sp, start: start, parent: ev.ParentSpanID}
	x.open++
	x.stats.Spans++
	return nil
}

func (x *Exporter) endSpan(ev eval.Event) error {
	r := x.runs[ev.RunID]
	if r == nil {
		return x.unknown(ev, "span.end")
	}
	s := r.open[ev.SpanID]
	if s == nil {
		return x.unknown(ev, "span.end")
	}
	if len(ev.Attributes) > 0 {
		s.span.SetAttributes(appendAttributes(nil, ev.Attributes)...)
	}
	switch ev.Status {
	case eval.StatusError:
		desc, _ := ev.Attributes["error.message"].(string)
		if desc == "" {
			desc, _ = ev.Attributes["error.type"].(string)
		}
		if desc == "" {
			desc = "error"
		}
		s.span.SetStatus(codes.Error, desc)
	case eval.StatusOK:
		s.span.SetStatus(codes.Ok, "")
	}
	end := endTime(s.start, ev)
	s.span.End(trace.WithTimestamp(end))
	delete(r.open, ev.SpanID)
	x.open--
	if s.parent == "" {
		// The root ended: the run is over. End what is still open and
		// forget the run.
		for id, o := range r.open {
			o.span.SetAttributes(attribute.Bool("aml.unterminated", true))
			o.span.End(trace.WithTimestamp(maxTime(end, o.start)))
			delete(r.open, id)
			x.open--
			x.stats.Unterminated++
		}
		x.ended -= len(r.ended)
		delete(x.runs, ev.RunID)
		return nil
	}
	if x.ended < maxEndedSpans {
		r.ended[ev.SpanID] = s.span.SpanContext()
		x.ended++
	}
	return nil
}

// endTime is the span's start plus the AML duration, which keeps the
// duration exact; the event timestamp when the duration is unusable.
func endTime(start time.Time, ev eval.Event) time.Time {
	d := ev.DurationMS
	if d >= 0 && !math.IsNaN(d) && !math.IsInf(d, 0) && d < float64(math.MaxInt64/int64(time.Millisecond)) {
		return start.Add(time.Duration(d * float64(time.Millisecond)))
	}
	return maxTime(eventTime(ev), start)
}

// eventTime is the event's timestamp, or now for an event without one.
func eventTime(ev eval.Event) time.Time {
	if ev.Timestamp <= 0 {
		return time.Now()
	}
	return time.UnixMilli(ev.Timestamp)
}

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

func (x *Exporter) pointEvent(ev eval.Event) error {
	r := x.runs[ev.RunID]
	if r == nil {
		return x.unknown(ev, "event")
	}
	s := r.open[ev.SpanID]
	if s == nil {
		return x.unknown(ev, "event")
	}
	s.span.AddEvent(ev.Name, trace.WithTimestamp(eventTime(ev)), trace.WithAttributes(appendAttributes(nil, ev.Attributes)...))
	x.stats.Events++
	return nil
}

// appendAttributes appends m's attributes in key order.
func appendAttributes(kv []attribute.KeyValue, m map[string]any) []attribute.KeyValue {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if a, ok := toAttribute(k, m[k]); ok {
			kv = append(kv, a)
		}
	}
	return kv
}

// toAttribute converts one AML attribute value, keeping its type. Values
// outside the documented scalar set are rendered as strings (JSON where
// possible); nil values are omitted.
func toAttribute(k string, v any) (attribute.KeyValue, bool) {
	switch v := v.(type) {
	case nil:
		return attribute.KeyValue{}, false
	case bool:
		return attribute.Bool(k, v), true
	case int64:
		return attribute.Int64(k, v), true
	case float64:
		return attribute.Float64(k, v), true
	case string:
		return attribute.String(k, v), true
	case []string:
		return attribute.StringSlice(k, v), true
	case int:
		return attribute.Int(k, v), true
	case int8:
		return attribute.Int64(k, int64(v)), true
	case int16:
		return attribute.Int64(k, int64(v)), true
	case int32:
		return attribute.Int64(k, int64(v)), true
	case uint8:
		return attribute.Int64(k, int64(v)), true
	case uint16:
		return attribute.Int64(k, int64(v)), true
	case uint32:
		return attribute.Int64(k, int64(v)), true
	case uint:
		if uint64(v) <= math.MaxInt64 {
			return attribute.Int64(k, int64(v)), true
		}
		return attribute.String(k, fmt.Sprint(v)), true
	case uint64:
		if v <= math.MaxInt64 {
			return attribute.Int64(k, int64(v)), true
		}
		return attribute.String(k, fmt.Sprint(v)), true
	case float32:
		return attribute.Float64(k, float64(v)), true
	case []bool:
		return attribute.BoolSlice(k, v), true
	case []int64:
		return attribute.Int64Slice(k, v), true
	case []int:
		return attribute.IntSlice(k, v), true
	case []float64:
		return attribute.Float64Slice(k, v), true
	case []any:
		s := make([]string, len(v))
		for i, e := range v {
			str, ok := e.(string)
			if !ok {
				return attribute.String(k, jsonString(v)), true
			}
			s[i] = str
		}
		return attribute.StringSlice(k, s), true
	case error:
		return attribute.String(k, v.Error()), true
	case fmt.Stringer:
		return attribute.String(k, v.String()), true
	}
	return attribute.String(k, jsonString(v)), true
}

func jsonString(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// Stats returns the exporter's counters.
func (x *Exporter) Stats() Stats {
	x.mu.Lock()
	s := x.stats
	s.OpenRuns = len(x.runs)
	s.OpenSpans = x.open
	x.mu.Unlock()
	s.ExportErrors = x.sink.count()
	return s
}

// ForceFlush exports every span ended so far and returns the errors of
// this flush and of the background exports that failed since the previous
// ForceFlush or Shutdown. Spans still open are not exported.
func (x *Exporter) ForceFlush(ctx context.Context) error {
	err := x.provider.ForceFlush(ctx)
	return errors.Join(err, x.sink.take())
}

// Shutdown ends the spans still open (marking them aml.unterminated),
// flushes every pending span and shuts the tracer provider down, bounded by
// ctx. It returns the flush and shutdown errors joined with the export
// failures not yet reported by ForceFlush. Later calls return the first
// call's result; HandleTrace drops every event after it.
func (x *Exporter) Shutdown(ctx context.Context) error {
	x.closeOnce.Do(func() {
		x.mu.Lock()
		x.closed = true
		now := time.Now()
		for runID, r := range x.runs {
			for _, o := range r.open {
				o.span.SetAttributes(attribute.Bool("aml.unterminated", true))
				o.span.End(trace.WithTimestamp(maxTime(now, o.start)))
				x.stats.Unterminated++
			}
			delete(x.runs, runID)
		}
		x.open, x.ended = 0, 0
		x.mu.Unlock()
		flushErr := x.provider.ForceFlush(ctx)
		shutErr := x.provider.Shutdown(ctx)
		x.closeErr = errors.Join(flushErr, shutErr, x.sink.take())
	})
	return x.closeErr
}

// errorRecorder wraps the OTLP exporter: it counts failed exports, hands
// them to Options.OnError and keeps them for ForceFlush and Shutdown, so
// they are reported to the caller instead of the process-wide OTel error
// handler.
type errorRecorder struct {
	next    sdktrace.SpanExporter
	onError func(error)

	mu      sync.Mutex
	total   uint64
	pending uint64
	last    error
}

func (e *errorRecorder) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.next.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("otlp: exporting %d spans: %w", len(spans), err)
	e.mu.Lock()
	e.total++
	e.pending++
	e.last = err
	e.mu.Unlock()
	if e.onError != nil {
		e.onError(err)
	}
	return nil
}

func (e *errorRecorder) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

func (e *errorRecorder) count() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// take returns the export failures since the previous call, or nil.
func (e *errorRecorder) take() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending == 0 {
		return nil
	}
	err := e.last
	if e.pending > 1 {
		err = fmt.Errorf("%d exports failed; last: %w", e.pending, e.last)
	}
	e.pending, e.last = 0, nil
	return err
}
