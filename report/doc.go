// Package report turns the trace events of a run into one self-contained
// HTML file: a header with the run's totals, an "Errors" section, and the
// executed tree aligned with a timeline (Gantt chart) on a shared time
// axis.
//
// Events come from a live evaluation through a [Collector], which is an
// eval.TraceSink, or from a JSON-lines trace file (the wire form of
// eval.Event, as observe.JSONLinesTracer and `aml run --trace-file` write
// it) through [ReadTrace] and [Write].
//
// # What the report shows
//
//   - Totals: runs and their status, wall time, agents (failed, replayed,
//     unfinished), sessions, turns, tokens summed from the usage that
//     providers report on agent.turn spans, the session cost that ACP
//     usage updates carry when content was captured, the time agents
//     waited before their session started, spans by kind.
//   - The tree: one row per span, indented, expandable and collapsible,
//     with a bar on the time axis coloured by status (ok, error,
//     unfinished). An agent's bar has a lighter segment for the wait
//     before its session started (the scheduler queue); session bars hold
//     the nested bars of their turns and of their cleanup.
//   - Errors: every failed node where the failure started, with its
//     source position (file:line:col), its error type, its message when
//     the trace captured it, and how many enclosing spans failed with it.
//   - Details: clicking a row shows the span's attributes, its point
//     events, and its content (prompt, system text, result, error
//     message, ...) only when the trace carries it.
//
// # Time
//
// Trace timestamps have millisecond resolution while durations are
// measured in microseconds. The timeline places every event at its
// timestamp, refined within the millisecond by the event order and the
// reported durations, so that short sequential spans do not collapse onto
// one point. The durations shown are the reported ones.
//
// # The file
//
// The page needs no network: one <style>, one <script>, the data embedded
// as JSON in a non-executed script element, and a Content-Security-Policy
// that forbids every fetch. The data is compact (rows as arrays, strings
// in one table), and the rows are virtualized: only the rows in view are
// in the DOM, so a run of ten thousand agents stays small and opens fast.
// Every bar element carries data-span (the span id) and data-status (ok,
// error or open).
package report
