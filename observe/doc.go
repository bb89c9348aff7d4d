// Package observe holds trace sinks over the public event stream of
// package eval: the console tree (ConsoleTracer), JSON lines
// (JSONLinesTracer) and content-free run summaries (SummaryCollector).
// Each implements eval.TraceSink and is passed in eval.Options.Trace; the
// evaluator itself knows none of them. The OpenTelemetry exporter lives in
// observe/otlp.
//
// The sinks know the event names of the shared ACP engine (for example,
// the console tree leaves out streaming acp.session.update chunks, and the
// summary counts ACP tool calls): those names are part of the portable
// trace contract that every ACP provider emits.
//
// Every sink is safe for concurrent use and may serve several runs.
package observe
