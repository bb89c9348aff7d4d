package report

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
)

// build folds events into a model.
func build(events []eval.Event) *model {
	s := newSpanSet()
	for _, e := range events {
		s.add(e)
	}
	return buildModel(s, "test")
}

// childLabels returns the labels of row i's children.
func childLabels(m *model, i int) []string {
	var out []string
	for j := range m.rows {
		if m.rows[j].parent == i {
			out = append(out, m.rows[j].label)
		}
	}
	return out
}

func findRow(t *testing.T, m *model, label string) int {
	t.Helper()
	for i := range m.rows {
		if m.rows[i].label == label {
			return i
		}
	}
	t.Fatalf("no row %q", label)
	return -1
}

func TestModelTree(t *testing.T) {
	m := build(smallRun(t, false))
	if len(m.rows) != smallSpans {
		t.Fatalf("%d rows, want %d", len(m.rows), smallSpans)
	}
	// Pre-order: every row's parent comes before it, with depth one less,
	// and a subtree is contiguous.
	for i, r := range m.rows {
		if i == 0 {
			if r.parent != -1 || r.label != "run" || r.span.kind != "evaluation" {
				t.Fatalf("row 0 is %+v, want the run", r)
			}
			continue
		}
		if r.parent < 0 || r.parent >= i || r.depth != m.rows[r.parent].depth+1 {
			t.Fatalf("row %d (%s): parent %d, depth %d", i, r.label, r.parent, r.depth)
		}
		for a := i - 1; a != r.parent; a = m.rows[a].parent {
			if a < 0 {
				t.Fatalf("row %d (%s) is not contiguous with its parent's subtree", i, r.label)
			}
		}
	}
	want := map[string][]string{
		"run":             {"main"},
		"main":            {`agent "planner"`, "parallel"},
		`agent "planner"`: {"session"},
		"parallel":        {`agent "bad"`, `agent "good"`},
	}
	for label, kids := range want {
		got := childLabels(m, findRow(t, m, label))
		slices.Sort(got)
		if !slices.Equal(got, kids) {
			t.Errorf("children of %s = %q, want %q", label, got, kids)
		}
	}
	planner := findRow(t, m, `agent "planner"`)
	sess := m.rows[planner].session
	if sess < 0 || m.rows[sess].label != "session" {
		t.Fatalf("the planner's session row is %d", sess)
	}
	if got := childLabels(m, sess); !slices.Equal(got, []string{"turn 1", "turn 2", "cleanup"}) {
		t.Fatalf("the session's children are %q, want the two turns and the cleanup in order", got)
	}
	if sub := m.rows[planner].sub; sub != "sessions · fake-1" {
		t.Errorf("the planner's sub-label is %q, want provider and model", sub)
	}
	if sub := m.rows[sess+1].sub; sub != "initial · end_turn" {
		t.Errorf("turn 1's sub-label is %q", sub)
	}
	for i, r := range m.rows {
		if r.end < r.start {
			t.Errorf("row %d (%s) ends at %v before it starts at %v", i, r.label, r.end, r.start)
		}
		if r.parent >= 0 && r.start < m.rows[r.parent].start {
			t.Errorf("row %d (%s) starts at %v before its parent at %v", i, r.label, r.start, m.rows[r.parent].start)
		}
	}
	// Sequential siblings do not overlap on the axis even when they ran
	// within one millisecond.
	turn1, turn2 := m.rows[sess+1], m.rows[sess+2]
	if turn2.start < turn1.end {
		t.Errorf("turn 2 starts at %v before turn 1 ends at %v", turn2.start, turn1.end)
	}
}

func TestModelStatusesAndFailures(t *testing.T) {
	for _, capture := range []bool{false, true} {
		m := build(smallRun(t, capture))
		failed := map[string]bool{}
		for _, r := range m.rows {
			if r.status == statusError {
				failed[r.label] = true
			}
			if r.status == statusOpen {
				t.Errorf("row %s is open in a finished run", r.label)
			}
		}
		// The failing agent's session, the agent, and everything above it.
		wantFailed := []string{"run", "main", "parallel", `agent "bad"`, "session"}
		if len(failed) != len(wantFailed) || m.totals.failed != len(wantFailed) {
			t.Errorf("failed rows %v (%d spans), want %v", failed, m.totals.failed, wantFailed)
		}
		for _, l := range wantFailed {
			if !failed[l] {
				t.Errorf("%s is not failed", l)
			}
		}
		if failed[`agent "good"`] || failed[`agent "planner"`] {
			t.Error("an agent that succeeded is shown as failed")
		}
		if len(m.failures) != 1 {
			t.Fatalf("%d failures, want the one of agent bad: %+v", len(m.failures), m.failures)
		}
		f := m.failures[0]
		if f.label != `agent "bad"` || f.source != "flow.star:5:3" || f.errType != "EvaluationError" || f.propagated != 3 {
			t.Errorf("failure %+v, want agent bad at flow.star:5:3, an EvaluationError, propagated to 3 spans", f)
		}
		if m.rows[f.row].label != `agent "bad"` {
			t.Errorf("the failure points at row %s", m.rows[f.row].label)
		}
		if capture != strings.Contains(f.message, failMessage) {
			t.Errorf("capture=%v: failure message %q", capture, f.message)
		}
		if capture && !strings.HasPrefix(f.message, "flow.star:5:3: ") {
			t.Errorf("the message %q does not start with the position", f.message)
		}
		if len(m.runs) != 1 || m.runs[0].id != "run-1" || m.runs[0].status != statusError || m.runs[0].root != 0 {
			t.Errorf("runs %+v", m.runs)
		}
	}
}

func TestModelTotals(t *testing.T) {
	m := build(smallRun(t, false))
	tt := m.totals
	if tt.spans != smallSpans || tt.agents != 3 || tt.agentsFailed != 1 || tt.agentsOpen != 0 || tt.replayed != 0 {
		t.Errorf("spans %d, agents %d (failed %d, open %d, replayed %d)", tt.spans, tt.agents, tt.agentsFailed, tt.agentsOpen, tt.replayed)
	}
	if tt.sessions != 3 || tt.turns != 2 || tt.usageTurns != 2 || tt.cleanups != 1 || tt.cleanupFailed != 0 {
		t.Errorf("sessions %d, turns %d (%d with usage), cleanups %d (%d failed)", tt.sessions, tt.turns, tt.usageTurns, tt.cleanups, tt.cleanupFailed)
	}
	// The agents' spans carry what the evaluator counted from the turns'
	// reports: those are the totals.
	want := []sum{{"input_tokens", 20}, {"output_tokens", 10}, {"model_calls", 2}}
	if !slices.Equal(tt.tokens, want) {
		t.Errorf("tokens %v, want %v", tt.tokens, want)
	}
	if !slices.Equal(tt.providers, []count{{"deterministic", 2}, {"sessions", 1}}) || !slices.Equal(tt.models, []count{{"fake-1", 1}}) {
		t.Errorf("providers %v, models %v", tt.providers, tt.models)
	}
	if tt.slowestAgent < 0 || m.rows[tt.slowestAgent].span.name != "Agent" || tt.sessionTotalMS <= 0 {
		t.Errorf("slowest agent row %d, session time %v", tt.slowestAgent, tt.sessionTotalMS)
	}
	kinds := map[string]kindStat{}
	for _, k := range m.kinds {
		kinds[k.kind] = k
	}
	for kind, n := range map[string]int{"agent": 3, "agent.session": 3, "agent.turn": 2, "agent.cleanup": 1, "parallel": 1, "component": 1, "evaluation": 1} {
		if kinds[kind].count != n {
			t.Errorf("kind %s: %d rows, want %d", kind, kinds[kind].count, n)
		}
	}
	if kinds["agent"].failed != 1 || kinds["agent.session"].failed != 1 {
		t.Errorf("failed agents %d, sessions %d", kinds["agent"].failed, kinds["agent.session"].failed)
	}
}

func TestModelContentOnlyWhenCaptured(t *testing.T) {
	for _, capture := range []bool{false, true} {
		m := build(smallRun(t, capture))
		if m.content != capture {
			t.Errorf("capture=%v: the model says content=%v", capture, m.content)
		}
		found := false
		for _, r := range m.rows {
			for _, a := range r.span.attrs {
				if contentKeys[a.key] {
					found = true
					if !capture {
						t.Errorf("row %s has content attribute %s without capture", r.label, a.key)
					}
				}
			}
		}
		if capture && !found {
			t.Error("no content attribute with capture")
		}
		page := string(render(t, smallRun(t, capture), Options{}))
		if strings.Contains(page, "PROMPT-SECRET-42") != capture {
			t.Errorf("capture=%v: the prompt is in the page: %v", capture, !capture)
		}
		if strings.Contains(page, failMessage) != capture {
			t.Errorf("capture=%v: the error message is in the page: %v", capture, !capture)
		}
	}
}

func TestModelQueueWait(t *testing.T) {
	// An agent that starts at 0 ms and gets its session at 40 ms waited
	// 40 ms for a slot.
	ev := func(typ eval.EventType, seq uint64, ts int64, id, parent, name string, dur float64) eval.Event {
		e := eval.Event{Type: typ, RunID: "r", SpanID: id, ParentSpanID: parent, Sequence: seq, Timestamp: 1000 + ts, Kind: "agent", Name: name, Attributes: map[string]any{}}
		if typ == eval.SpanEnd {
			e.Status, e.DurationMS = eval.StatusOK, dur
		}
		return e
	}
	root := func(typ eval.EventType, seq uint64, ts int64) eval.Event {
		e := ev(typ, seq, ts, "1", "", "run", 100)
		e.Kind = "evaluation"
		return e
	}
	m := build([]eval.Event{
		root(eval.SpanStart, 1, 0),
		ev(eval.SpanStart, 2, 0, "2", "1", "Agent", 0),
		ev(eval.SpanStart, 3, 40, "3", "2", "agent.session", 0),
		ev(eval.SpanEnd, 4, 90, "3", "2", "agent.session", 50),
		ev(eval.SpanEnd, 5, 90, "2", "1", "Agent", 90),
		root(eval.SpanEnd, 6, 100),
	})
	if m.totals.queueTotalMS != 40 || m.totals.queueMaxMS != 40 || m.totals.queued != 1 {
		t.Fatalf("queue total %v, max %v, %d queued; want 40 ms for one agent", m.totals.queueTotalMS, m.totals.queueMaxMS, m.totals.queued)
	}
	if r := m.rows[1]; r.start != 0 || r.end != 90 || m.rows[r.session].start != 40 {
		t.Fatalf("agent %v..%v, session from %v", r.start, r.end, m.rows[r.session].start)
	}
}

func TestModelUnfinishedSpans(t *testing.T) {
	events := smallRun(t, false)
	// Cut the trace after the planner's session started: the run, main,
	// the agent and its session never end.
	cut := -1
	for i, e := range events {
		if e.Type == eval.SpanStart && e.Name == "agent.turn" {
			cut = i
			break
		}
	}
	if cut < 0 {
		t.Fatal("no turn in the trace")
	}
	m := build(events[:cut+1])
	open := 0
	for _, r := range m.rows {
		if r.status != statusOpen {
			t.Errorf("%s is %v in a cut trace", r.label, r.status)
		}
		if r.end != m.hi {
			t.Errorf("the open row %s ends at %v, not at the end of the trace %v", r.label, r.end, m.hi)
		}
		open++
	}
	if open != 5 || m.totals.open != 5 || m.totals.agentsOpen != 1 || len(m.failures) != 0 {
		t.Fatalf("%d open rows (totals %d, agents %d), %d failures", open, m.totals.open, m.totals.agentsOpen, len(m.failures))
	}
	if m.runs[0].status != statusOpen {
		t.Fatalf("the run is %v", m.runs[0].status)
	}
	// An end without its start (a trace that begins late) still makes a
	// row, placed before its end by its duration.
	m = build(events[len(events)-1:])
	if len(m.rows) != 1 || m.rows[0].status != statusError || m.rows[0].start > m.rows[0].end || m.lo > m.rows[0].start {
		t.Fatalf("rows %+v, lo %v", m.rows, m.lo)
	}
}

func TestModelOrphansAndCycles(t *testing.T) {
	start := func(seq uint64, id, parent string) eval.Event {
		return eval.Event{Type: eval.SpanStart, RunID: "r", SpanID: id, ParentSpanID: parent, Sequence: seq, Timestamp: 5, Kind: "component", Name: "c" + id}
	}
	m := build([]eval.Event{
		start(1, "1", "9"), // parent never seen
		start(2, "2", "3"), // 2 and 3 are each other's parent
		start(3, "3", "2"),
		start(4, "4", "4"), // its own parent
		{Type: eval.PointEvent, RunID: "r", SpanID: "1", Sequence: 5, Timestamp: 5, Name: "note"},
		{Type: eval.PointEvent, RunID: "r", Sequence: 6, Timestamp: 5, Name: "loose"},
	})
	if len(m.rows) != 4 {
		t.Fatalf("%d rows, want every span once", len(m.rows))
	}
	seen := map[string]bool{}
	for _, r := range m.rows {
		seen[r.span.id] = true
		if r.parent >= 0 && m.rows[r.parent].depth != r.depth-1 {
			t.Errorf("span %s has a bad depth", r.span.id)
		}
	}
	if len(seen) != 4 || len(m.points) != 2 || m.totals.events != 2 {
		t.Fatalf("spans %v, %d points", seen, len(m.points))
	}
}

func TestModelSeveralRuns(t *testing.T) {
	a := smallRun(t, false)
	b := wideRun(t, 4)
	for i := range b {
		b[i].RunID = "run-2"
	}
	m := build(append(append([]eval.Event(nil), b...), a...))
	if len(m.runs) != 2 || m.totals.agents != 7 {
		t.Fatalf("%d runs, %d agents", len(m.runs), m.totals.agents)
	}
	roots := 0
	for _, r := range m.rows {
		if r.parent < 0 {
			roots++
		}
	}
	if roots != 2 {
		t.Fatalf("%d roots, want one per run", roots)
	}
}

func TestModelUsageAndCost(t *testing.T) {
	var seq uint64
	ev := func(typ eval.EventType, id, parent, name string, attrs map[string]any) eval.Event {
		seq++
		e := eval.Event{Type: typ, RunID: "r", SpanID: id, ParentSpanID: parent, Sequence: seq, Timestamp: int64(seq), Kind: "agent", Name: name, Attributes: attrs}
		if typ == eval.SpanEnd {
			e.Status = eval.StatusOK
		}
		if typ == eval.PointEvent {
			e.Kind = ""
		}
		return e
	}
	update := func(session string, amount float64) map[string]any {
		return map[string]any{"sessionId": session, "sessionUpdate": "usage_update",
			"update": `{"sessionUpdate":"usage_update","used":100,"size":1000,"cost":{"amount":` + strconv.FormatFloat(amount, 'f', -1, 64) + `,"currency":"USD"}}`}
	}
	m := build([]eval.Event{
		ev(eval.SpanStart, "1", "", "Agent", nil),
		ev(eval.SpanStart, "2", "1", "agent.session", nil),
		ev(eval.SpanStart, "3", "2", "agent.turn", map[string]any{"index": int64(1), "kind": "initial"}),
		ev(eval.PointEvent, "3", "2", "acp.session.update", update("a", 0.5)),
		ev(eval.PointEvent, "3", "2", "acp.session.update", update("a", 1.25)), // cumulative: the last counts
		ev(eval.PointEvent, "3", "2", "acp.session.update", map[string]any{"sessionId": "b", "sessionUpdate": "usage_update"}),
		ev(eval.SpanEnd, "3", "2", "agent.turn", map[string]any{"usage": `{"inputTokens":7,"outputTokens":5,"totalTokens":12,"thoughtTokens":2}`}),
		ev(eval.SpanStart, "4", "2", "agent.turn", map[string]any{"index": int64(2), "kind": "follow-up"}),
		ev(eval.PointEvent, "4", "2", "acp.session.update", update("c", 0.25)),
		ev(eval.SpanEnd, "4", "2", "agent.turn", map[string]any{"usage": "not json"}),
		ev(eval.SpanEnd, "2", "1", "agent.session", nil),
		ev(eval.SpanEnd, "1", "", "Agent", nil),
	})
	if got, want := m.totals.tokens, []sum{{"inputTokens", 7}, {"outputTokens", 5}, {"totalTokens", 12}, {"thoughtTokens", 2}}; !slices.Equal(got, want) {
		t.Errorf("tokens %v, want %v", got, want)
	}
	if m.totals.turns != 2 || m.totals.usageTurns != 1 {
		t.Errorf("%d turns, %d with usage", m.totals.turns, m.totals.usageTurns)
	}
	if got, want := m.totals.cost, []sum{{"USD", 1.5}}; !slices.Equal(got, want) {
		t.Errorf("cost %v, want %v", got, want)
	}
	if !m.content {
		t.Error("the usage updates are content")
	}
	if len(m.points) != 4 || m.points[0].row != 2 {
		t.Errorf("points %+v", m.points)
	}
}
