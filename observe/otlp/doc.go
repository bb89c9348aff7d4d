// Package otlp exports AML trace events to an OpenTelemetry collector over
// OTLP/HTTP (protobuf), using the OpenTelemetry Go SDK.
//
// An [Exporter] is an eval.TraceSink (and an eval.ContentCapturer): add it
// to eval.Options.Trace and every evaluation of that runtime is exported as
// one OpenTelemetry trace.
//
//	exp, err := otlp.New(ctx, otlp.Options{Endpoint: "http://localhost:4318"})
//	if err != nil { ... }
//	defer exp.Shutdown(context.Background())
//	rt, err := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{exp}})
//
// # Mapping
//
// AML spans are identified by (run id, span id); span ids are small decimal
// integers that are unique only within one run. The exporter keeps a table
// from that pair to the OpenTelemetry span it started and maps events as
// follows:
//
//   - span.start starts an OpenTelemetry span named after the AML span name,
//     at the event's timestamp (trace.WithTimestamp). A span without a parent
//     span id (the root "evaluation" span of a run) starts a new trace; every
//     other span becomes a child of its parent's OpenTelemetry span, so the
//     trace has the same tree as the AML run. The span kind is Internal.
//   - Attributes: aml.run_id, aml.span_id and aml.kind (the AML span kind:
//     evaluation, component, agent, tool, ...) plus every AML attribute of the
//     event (aml.source, provider, model, ...) with its type kept: bool,
//     int64, float64, string and []string map to the OpenTelemetry attribute
//     types of the same shape; other values are rendered as strings.
//   - span.end adds the end event's attributes and ends the span at its start
//     time plus the AML duration, which keeps the AML duration exactly. An
//     "ok" end sets status Ok; an "error" end sets status Error with the
//     error.type attribute as description (error.message instead, when
//     content is captured and the evaluator sent it).
//   - A point event becomes a span event, with its name, timestamp and
//     attributes, on the span that owns it.
//   - When a run's root span ends, the run's state is forgotten: spans of the
//     run still open are ended at the root's end time with the attribute
//     aml.unterminated=true, so a run's memory is released when it finishes.
//
// Content attributes (prompt, system, result, error.message, ...) are
// exported only when Options.CaptureContent is set: the evaluator sends them
// only to sinks whose CaptureContent returns true.
//
// Events that name a span the exporter does not know (already ended, never
// started, or of a run already finished) are dropped, counted in
// [Stats].Dropped and reported as an error wrapping [ErrUnknownSpan]; they
// never panic. The evaluator passes sink errors to eval.Options.OnTraceError
// and never fails a run because of them.
//
// # Delivery
//
// Spans are handed to a batch span processor and sent in the background, so
// HandleTrace never waits for the network and an unreachable or slow
// collector never blocks or fails an evaluation. Failed exports are counted
// in [Stats].ExportErrors, passed to Options.OnError and returned (joined)
// by the next [Exporter.ForceFlush] or [Exporter.Shutdown]. Shutdown flushes
// every pending span and must be called before the process exits.
//
// # Configuration
//
// Options.Endpoint is the collector's base URL, like
// OTEL_EXPORTER_OTLP_ENDPOINT: "/v1/traces" is appended to its path unless
// the path already ends with it. An http:// endpoint is sent in plain text,
// an https:// endpoint over TLS, and an endpoint without a scheme
// ("localhost:4318") over TLS unless Options.Insecure is set. With an empty
// Endpoint the SDK's own environment handling applies
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_INSECURE, ...); the SDK's
// default is https://localhost:4318/v1/traces. Exports are gzip-compressed
// unless OTEL_EXPORTER_OTLP_COMPRESSION or
// OTEL_EXPORTER_OTLP_TRACES_COMPRESSION says otherwise. The service.name
// resource attribute is Options.ServiceName, else OTEL_SERVICE_NAME, else
// "aml"; OTEL_RESOURCE_ATTRIBUTES adds further resource attributes. The
// sampler follows OTEL_TRACES_SAMPLER (default: always sample).
//
// # Concurrency
//
// An Exporter is safe for concurrent use. The evaluator calls HandleTrace
// serially, in sequence order, for the events of one run, and one Exporter
// may serve any number of concurrent runs (of one or several runtimes): the
// exporter's state is keyed by run id and guarded by one mutex, held only
// for the bookkeeping and the SDK's non-blocking span calls. Run ids must be
// unique among the runs in flight. ForceFlush, Shutdown and Stats may be
// called from any goroutine; after Shutdown, HandleTrace drops every event
// and returns [ErrShutdown]. Options.OnError is called from the SDK's export
// goroutine.
package otlp
