package observe

import (
	"maps"
	"sync"

	"github.com/aml-go/aml/eval"
)

// Timing aggregates the durations of one kind of span.
type Timing struct {
	Count           int
	TotalDurationMS float64
	// SlowestMS is the longest duration; zero when Count is zero.
	SlowestMS float64
}

func (t *Timing) add(ms float64) {
	t.Count++
	t.TotalDurationMS += ms
	if ms > t.SlowestMS {
		t.SlowestMS = ms
	}
}

// RunSummary is a content-free summary of one run, derived from its trace
// events.
type RunSummary struct {
	RunID string
	// Status is "ok" or "error".
	Status     string
	DurationMS float64
	// AgentSessions times agent.session spans; Turns times agent.turn.
	AgentSessions Timing
	Turns         Timing
	// Tools times tool executions (component and model calls).
	Tools Timing
	// Resources times sandbox, workspace, script and file spans.
	Resources Timing
	// Applications times with_trace_span spans by name.
	Applications map[string]Timing
	// ACPToolCalls counts initial tool_call updates reported over ACP, in
	// total and by the provider-reported tool name.
	ACPToolCalls ACPToolCalls
	// ProviderUsage holds the serialized usage reports providers sent.
	ProviderUsage []string
	// Cleanup counts agent.cleanup outcomes.
	Cleanup CleanupOutcomes
}

// ACPToolCalls counts provider-reported tool calls.
type ACPToolCalls struct {
	Total  int
	ByName map[string]int
}

// CleanupOutcomes counts agent session cleanups by outcome.
type CleanupOutcomes struct {
	OK     int
	Failed int
}

// SummaryCollector is an eval.TraceSink that keeps a RunSummary per run. It is
// safe for concurrent use by any number of runs; a completed summary is
// kept until DeleteRun, so a long-lived collector should delete the runs
// it has read.
type SummaryCollector struct {
	mu   sync.Mutex
	runs map[string]*collecting
}

type collecting struct {
	sum  RunSummary
	root string
	done bool
}

// NewSummaryCollector returns an empty collector.
func NewSummaryCollector() *SummaryCollector {
	return &SummaryCollector{runs: map[string]*collecting{}}
}

// HandleTrace implements eval.TraceSink.
func (c *SummaryCollector) HandleTrace(e eval.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[e.RunID]
	if r == nil {
		r = &collecting{sum: RunSummary{RunID: e.RunID, Applications: map[string]Timing{}, ACPToolCalls: ACPToolCalls{ByName: map[string]int{}}}}
		c.runs[e.RunID] = r
	}
	s := &r.sum
	switch e.Type {
	case eval.SpanStart:
		if e.Kind == "evaluation" && e.ParentSpanID == "" {
			r.root = e.SpanID
		}
	case eval.SpanEnd:
		switch {
		case e.SpanID == r.root:
			s.Status, s.DurationMS, r.done = e.Status, e.DurationMS, true
		case e.Name == "agent.session":
			s.AgentSessions.add(e.DurationMS)
		case e.Name == "agent.turn":
			s.Turns.add(e.DurationMS)
			if u, ok := e.Attributes["usage"].(string); ok && u != "" {
				s.ProviderUsage = append(s.ProviderUsage, u)
			}
		case e.Name == "agent.cleanup":
			if e.Status == eval.StatusError {
				s.Cleanup.Failed++
			} else {
				s.Cleanup.OK++
			}
		case e.Kind == "tool":
			s.Tools.add(e.DurationMS)
		case e.Kind == "application":
			t := s.Applications[e.Name]
			t.add(e.DurationMS)
			s.Applications[e.Name] = t
		case e.Kind == "sandbox" || e.Kind == "workspace" || e.Kind == "script" || e.Kind == "file":
			s.Resources.add(e.DurationMS)
		}
	case eval.PointEvent:
		if e.Name == "acp.session.update" && e.Attributes["sessionUpdate"] == "tool_call" {
			s.ACPToolCalls.Total++
			if name, ok := e.Attributes["toolName"].(string); ok && name != "" {
				s.ACPToolCalls.ByName[name]++
			}
		}
	}
	return nil
}

// ForRun returns the summary of a completed run; ok is false while the
// run is still going or when it is unknown.
func (c *SummaryCollector) ForRun(runID string) (summary RunSummary, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[runID]
	if r == nil || !r.done {
		return RunSummary{}, false
	}
	s := r.sum
	s.Applications = maps.Clone(s.Applications)
	s.ACPToolCalls.ByName = maps.Clone(s.ACPToolCalls.ByName)
	s.ProviderUsage = append([]string(nil), s.ProviderUsage...)
	return s, true
}

// DeleteRun forgets a run's summary.
func (c *SummaryCollector) DeleteRun(runID string) {
	c.mu.Lock()
	delete(c.runs, runID)
	c.mu.Unlock()
}
