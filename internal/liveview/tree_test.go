package liveview

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/aml-go/aml/eval"
)

// spanStartEv is the span.start of span id below parent at liveT0+at;
// kv are attribute keys and values.
func spanStartEv(id, parent, kind, name string, at time.Duration, kv ...string) eval.Event {
	attrs := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		attrs[kv[i]] = kv[i+1]
	}
	return eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: id, ParentSpanID: parent, Kind: kind, Name: name,
		Timestamp: liveT0.Add(at).UnixMilli(), Attributes: attrs}
}

// spanEndEv is the span.end of span id at liveT0+at.
func spanEndEv(id, parent, kind, name, status string, at time.Duration) eval.Event {
	return eval.Event{Type: eval.SpanEnd, RunID: "run1", SpanID: id, ParentSpanID: parent, Kind: kind, Name: name,
		Status: status, Timestamp: liveT0.Add(at).UnixMilli(), Attributes: map[string]any{}}
}

// under moves the event e below span parent.
func under(e eval.Event, parent string) eval.Event {
	e.ParentSpanID = parent
	return e
}

// reviewRun feeds the span tree of a review workflow, 9.3 s into the run:
//
//	Review (component)
//	  planner (agent, done)
//	  workspace (local) > sandbox (docker)
//	    parallel > security (running, calling a tool), style (failed),
//	               tests, docs (queued), lint (done)
//	    script (done)
func reviewRun(t *testing.T, lv *View) {
	t.Helper()
	s := time.Second
	ms := time.Millisecond
	evs := []eval.Event{
		spanStartEv("1", "", "evaluation", "run", 0),
		spanStartEv("2", "1", "component", "Review", 0, "aml.source", "review.star:3:1"),
		spanStartEv("3", "2", "agent", "Agent", 0, "aml.source", "review.star:5:10", "agent.name", "planner", "provider", "anthropic", "model", "claude-sonnet"),
		spanStartEv("3s", "3", "agent", "agent.session", 0),
		spanStartEv("3t", "3s", "agent", "agent.turn", 0),
		spanEndEv("3t", "3s", "agent", "agent.turn", eval.StatusOK, 3100*ms),
		spanEndEv("3s", "3", "agent", "agent.session", eval.StatusOK, 3100*ms),
		spanEndEv("3", "2", "agent", "Agent", eval.StatusOK, 3100*ms),
		spanStartEv("4", "2", "workspace", "Workspace", 3100*ms, "aml.source", "review.star:6:5", "provider", "local", "workspace.id", "ws-1"),
		spanStartEv("5", "4", "sandbox", "Sandbox", 3200*ms, "aml.source", "review.star:7:9", "provider", "docker", "access", "read-write"),
		spanStartEv("6", "5", "component", "Parallel", 3300*ms, "aml.source", "review.star:8:13"),
	}
	for i, name := range []string{"security", "style", "tests", "docs", "lint"} {
		id := "a" + strconv.Itoa(i)
		provider, model := "anthropic", "claude-sonnet"
		if i%2 == 1 {
			provider, model = "openai", "gpt-5"
		}
		evs = append(evs, spanStartEv(id, "6", "agent", "Agent", 3300*ms, "aml.source", "review.star:14:9", "agent.name", name, "provider", provider, "model", model))
	}
	evs = append(evs,
		spanStartEv("a0s", "a0", "agent", "agent.session", 3300*ms),
		spanStartEv("a1s", "a1", "agent", "agent.session", 3300*ms),
		spanStartEv("a1t", "a1s", "agent", "agent.turn", 3300*ms),
		spanEndEv("a1t", "a1s", "agent", "agent.turn", eval.StatusError, 4500*ms),
		spanEndEv("a1s", "a1", "agent", "agent.session", eval.StatusError, 4500*ms),
		spanEndEv("a1", "6", "agent", "Agent", eval.StatusError, 4500*ms),
		spanStartEv("a4s", "a4", "agent", "agent.session", 4500*ms),
		spanEndEv("a4s", "a4", "agent", "agent.session", eval.StatusOK, 7*s),
		spanEndEv("a4", "6", "agent", "Agent", eval.StatusOK, 7*s),
		spanStartEv("a0t", "a0s", "agent", "agent.turn", 3300*ms),
		spanStartEv("9", "a0t", "tool", "search", 8900*ms, "aml.source", "tools.star:30:1", "tool.caller", "agent"),
		spanStartEv("10", "5", "script", "Script", 3300*ms, "aml.source", "review.star:9:9", "environment", "sandbox"),
		spanEndEv("10", "5", "script", "Script", eval.StatusOK, 3800*ms),
		spanStartEv("11", "2", "system", "System", 3300*ms, "aml.source", "review.star:4:9"),
	)
	for _, e := range evs {
		if err := lv.HandleTrace(e); err != nil {
			t.Fatal(err)
		}
	}
}

// finishReview feeds the end of reviewRun at 9.5 s to 9.9 s: security
// finishes, the queued agents are cancelled, and the failure of style
// fails every span above it.
func finishReview(t *testing.T, lv *View) {
	t.Helper()
	ms := time.Millisecond
	for _, e := range []eval.Event{
		spanEndEv("9", "a0t", "tool", "search", eval.StatusOK, 9400*ms),
		spanEndEv("a0t", "a0s", "agent", "agent.turn", eval.StatusOK, 9500*ms),
		spanEndEv("a0s", "a0", "agent", "agent.session", eval.StatusOK, 9500*ms),
		spanEndEv("a0", "6", "agent", "Agent", eval.StatusOK, 9500*ms),
		spanEndEv("a2", "6", "agent", "Agent", eval.StatusError, 9500*ms),
		spanEndEv("a3", "6", "agent", "Agent", eval.StatusError, 9500*ms),
		spanEndEv("6", "5", "component", "Parallel", eval.StatusError, 9600*ms),
		spanEndEv("5", "4", "sandbox", "Sandbox", eval.StatusError, 9700*ms),
		spanEndEv("4", "2", "workspace", "Workspace", eval.StatusError, 9800*ms),
		spanEndEv("11", "2", "system", "System", eval.StatusOK, 9800*ms),
		spanEndEv("2", "1", "component", "Review", eval.StatusError, 9900*ms),
	} {
		if err := lv.HandleTrace(e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLiveTree draws the tree of nested components, a workspace, a
// sandbox, a parallel fan-out, agents, a tool and a script with their
// statuses; sessions, turns, System and the run span fold away.
func TestLiveTree(t *testing.T) {
	lv, buf, clk := newTestView(100, 24)
	lv.Start()
	defer lv.Stop()
	reviewRun(t, lv)
	clk.Set(9300 * time.Millisecond)
	draw(lv)
	wantLines(t, screenOf(t, buf.String()), []string{
		"aml run 9.3s · 2 running · 2 queued · 3 done · 1 failed",
		"⠸ Review                                          review.star:3:1   9.3s",
		"├─ ✓ planner  anthropic  claude-sonnet            review.star:5:10  3.1s",
		"└─ ⠸ workspace  local  ws-1                       review.star:6:5   6.2s",
		"   └─ ⠸ sandbox  docker  read-write               review.star:7:9   6.1s",
		"      ├─ ⠸ parallel                               review.star:8:13  6.0s",
		"      │  ├─ ⠸ security  anthropic  claude-sonnet  review.star:14:9  6.0s",
		"      │  │  └─ ⠸ tool search                      tools.star:30:1   0.4s",
		"      │  ├─ ✗ style     openai     gpt-5          review.star:14:9  1.2s",
		"      │  ├─ · tests     anthropic  claude-sonnet  review.star:14:9  6.0s",
		"      │  ├─ · docs      openai     gpt-5          review.star:14:9  6.0s",
		"      │  └─ ✓ lint      anthropic  claude-sonnet  review.star:14:9  2.5s",
		"      └─ ✓ script  sandbox                        review.star:9:9   0.5s",
	})

	// On 60x8 the running path comes first, and the fan-out's other
	// children are summed up; done siblings higher up give way.
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 8), []string{
		"aml run 9.3s · 2 running · 2 queued · 3 done · 1 failed",
		"⠸ Review                                 …ew.star:3:1  9.3s",
		"└─ ⠸ workspace  local  ws-1              …ew.star:6:5  6.2s",
		"   └─ ⠸ sandbox  docker  read-write      …ew.star:7:9  6.1s",
		"      └─ ⠸ parallel                      …w.star:8:13  6.0s",
		"         ├─ ⠸ security  anthropic  cla…  …w.star:14:9  6.0s",
		"         └─ … 4 more: 2 queued, 1 failed, 1 done",
	})
	// One more row: the running tool; two more: the failed agent, before
	// the queued ones.
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 9)[5:], []string{
		"         ├─ ⠸ security  anthropic  cla…  …w.star:14:9  6.0s",
		"         │  └─ ⠸ tool search             …s.star:30:1  0.4s",
		"         └─ … 4 more: 2 queued, 1 failed, 1 done",
	})
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 10)[5:], []string{
		"         ├─ ⠸ security  anthropic  cla…  …w.star:14:9  6.0s",
		"         │  └─ ⠸ tool search             …s.star:30:1  0.4s",
		"         ├─ ✗ style     openai     gpt…  …w.star:14:9  1.2s",
		"         └─ … 3 more: 2 queued, 1 done",
	})
	wantLines(t, frameOf(t, lv, clk.Now(), 40, 6), []string{
		"aml run 9.3s  ⠸ 2  · 2  ✓ 3  ✗ 1",
		"⠸ Review             …ew.star:3:1  9.3s",
		"└─ ⠸ workspace  lo…  …ew.star:6:5  6.2s",
		"   └─ ⠸ sandbox  d…  …ew.star:7:9  6.1s",
		"      └─ ⠸ parallel  …w.star:8:13  6.0s",
	})

	// Once the run failed, the failed path stays, done subtrees collapse
	// and their nodes are counted.
	finishReview(t, lv)
	clk.Set(10 * time.Second)
	draw(lv)
	wantLines(t, screenOf(t, buf.String()), []string{
		"aml run 10.0s · 0 running · 5 done · 3 failed",
		"✗ Review                                       review.star:3:1   9.9s",
		"├─ ✗ workspace  local  ws-1                    review.star:6:5   6.7s",
		"│  └─ ✗ sandbox  docker  read-write            review.star:7:9   6.5s",
		"│     ├─ ✗ parallel                            review.star:8:13  6.3s",
		"│     │  ├─ ✗ style  openai     gpt-5          review.star:14:9  1.2s",
		"│     │  ├─ ✗ tests  anthropic  claude-sonnet  review.star:14:9  6.2s",
		"│     │  ├─ ✗ docs   openai     gpt-5          review.star:14:9  6.2s",
		"│     │  └─ … 2 more: 2 done",
		"│     └─ … 1 more: 1 done",
		"└─ … 1 more: 1 done",
	})
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 8), []string{
		"aml run 10.0s · 0 running · 5 done · 3 failed",
		"✗ Review                             review.star:3:1   9.9s",
		"└─ ✗ workspace  local  ws-1          review.star:6:5   6.7s",
		"   └─ ✗ sandbox  docker  read-write  review.star:7:9   6.5s",
		"      └─ ✗ parallel                  review.star:8:13  6.3s",
		"         ├─ ✗ style  openai  gpt-5   review.star:14:9  1.2s",
		"         └─ … 4 more: 2 failed, 2 done",
	})
	if len(lv.nodes) != 0 || len(lv.folded) != 1 {
		t.Errorf("%d open nodes and %d folded spans after the run, want none and the run span", len(lv.nodes), len(lv.folded))
	}
}

// TestLiveTreeQueued: an agent in a fan-out is queued ("·", elapsed time
// waiting) until its session starts, then running (elapsed time since
// the session started), then done with its final elapsed time.
func TestLiveTreeQueued(t *testing.T) {
	lv, _, clk := newTestView(60, 24)
	s := time.Second
	feed := func(evs ...eval.Event) {
		for _, e := range evs {
			if err := lv.HandleTrace(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(spanStartEv("2", "1", "component", "Parallel", 0, "aml.source", "wf.star:2:5"),
		spanStartEv("3", "2", "agent", "Agent", 0, "agent.name", "a", "provider", "p"),
		spanStartEv("4", "2", "agent", "Agent", 0, "agent.name", "b", "provider", "p"),
		spanStartEv("3s", "3", "agent", "agent.session", 0))
	clk.Set(3 * s)
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 24), []string{
		"aml run 3.0s · 1 running · 1 queued · 0 done · 0 failed",
		"⠋ parallel  wf.star:2:5  3.0s",
		"├─ ⠋ a  p                3.0s",
		"└─ · b  p                3.0s",
	})
	feed(spanEndEv("3s", "3", "agent", "agent.session", eval.StatusOK, 4*s),
		spanEndEv("3", "2", "agent", "Agent", eval.StatusOK, 4*s),
		spanStartEv("4s", "4", "agent", "agent.session", 4*s))
	clk.Set(5 * s)
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 24), []string{
		"aml run 5.0s · 1 running · 1 done · 0 failed",
		"⠋ parallel  wf.star:2:5  5.0s",
		"├─ ✓ a  p                4.0s",
		"└─ ⠋ b  p                1.0s",
	})
}

// TestLiveTreeFanOut10k: a fan-out of 10,000 agents stays within a 40x8
// terminal, its summary counts what is left out, failed agents come
// before queued and done ones, and the view keeps a bounded number of
// done nodes.
func TestLiveTreeFanOut10k(t *testing.T) {
	lv, _, clk := newTestView(40, 8)
	fanOut(t, lv, 10000, 0, 4)
	clk.Set(100 * time.Second)
	wantLines(t, frameOf(t, lv, clk.Now(), 40, 8), []string{
		"aml run 1m40s  ⠋ 4  · 9,996  ✓ 0  ✗ 0",
		"⠋ parallel  fan.star:4:12  1m40s",
		"├─ ⠋ w0  p  fan.star:7:9   1m30s",
		"├─ ⠋ w1  p  fan.star:7:9   1m29s",
		"├─ ⠋ w2  p  fan.star:7:9   1m29s",
		"├─ ⠋ w3  p  fan.star:7:9   1m29s",
		"└─ … 9,996 more: 9,996 queued",
	})

	lv, _, clk = newTestView(40, 8)
	fanOut(t, lv, 10000, 9992, 4, 17, 4242)
	clk.Set(100 * time.Second)
	wantLines(t, frameOf(t, lv, clk.Now(), 40, 8), []string{
		"aml run 1m40s  ⠋ 4  · 4  ✓ 9,990  ✗ 2",
		"⠋ parallel     fan.star:4:12  1m40s",
		"├─ ⠋ w9992  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9993  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9994  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9995  p  fan.star:7:9   1m20s",
		"└─ … 9,996 more: · 4  ✗ 2  ✓ 9,990",
	})
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 12), []string{
		"aml run 1m40s  ⠋ 4  · 4  ✓ 9,990  ✗ 2",
		"⠋ parallel     fan.star:4:12  1m40s",
		"├─ ✗ w17    p  fan.star:7:9   10.0s",
		"├─ ✗ w4242  p  fan.star:7:9   10.0s",
		"├─ ⠋ w9992  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9993  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9994  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9995  p  fan.star:7:9   1m20s",
		"├─ · w9996  p  fan.star:7:9   1m30s",
		"├─ · w9997  p  fan.star:7:9   1m30s",
		"└─ … 9,992 more: 2 queued, 9,990 done",
	})
	// With rows to spare the latest done agents fill them, beside the
	// count of the others.
	wantLines(t, frameOf(t, lv, clk.Now(), 60, 16), []string{
		"aml run 1m40s  ⠋ 4  · 4  ✓ 9,990  ✗ 2",
		"⠋ parallel     fan.star:4:12  1m40s",
		"├─ ✗ w17    p  fan.star:7:9   10.0s",
		"├─ ✗ w4242  p  fan.star:7:9   10.0s",
		"├─ ✓ w9990  p  fan.star:7:9   10.0s",
		"├─ ✓ w9991  p  fan.star:7:9   10.0s",
		"├─ ⠋ w9992  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9993  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9994  p  fan.star:7:9   1m20s",
		"├─ ⠋ w9995  p  fan.star:7:9   1m20s",
		"├─ · w9996  p  fan.star:7:9   1m30s",
		"├─ · w9997  p  fan.star:7:9   1m30s",
		"├─ · w9998  p  fan.star:7:9   1m30s",
		"├─ · w9999  p  fan.star:7:9   1m30s",
		"└─ … 9,988 more: 9,988 done",
	})

	par := lv.root.children[0]
	if n := len(par.children); n > 2*liveKeepDone+8 {
		t.Errorf("the fan-out keeps %d children, want at most %d", n, 2*liveKeepDone+8)
	}
	if par.total() != 10000 || par.counts[liveDone] != 9990 || par.counts[liveFailed] != 2 {
		t.Errorf("counts %v, total %d", par.counts, par.total())
	}
}

// TestLiveTreeBounds sweeps terminal sizes over a nested run, a fan-out
// and a deep chain: frameOf fails any frame with too many lines or a line
// too wide.
func TestLiveTreeBounds(t *testing.T) {
	review, _, _ := newTestView(80, 24)
	reviewRun(t, review)
	fan, _, _ := newTestView(80, 24)
	fanOut(t, fan, 10000, 5000, 16, 3, 333, 4999)
	deep, _, _ := newTestView(80, 24)
	parent := "1"
	for i := 0; i < 40; i++ {
		id := "c" + strconv.Itoa(i)
		if err := deep.HandleTrace(spanStartEv(id, parent, "component", "Component評価"+strconv.Itoa(i), 0, "aml.source", "deep/評価者/long/パス/wf.star:1:1")); err != nil {
			t.Fatal(err)
		}
		parent = id
	}
	now := liveT0.Add(61 * time.Minute)
	sweep := func() {
		for _, lv := range []*View{review, fan, deep} {
			for cols := 1; cols <= 130; cols += 3 {
				for _, rows := range []int{1, 2, 3, 4, 5, 8, 13, 24, 50} {
					got := frameOf(t, lv, now, cols, rows)
					if lv == fan && len(got) != rows-1 && rows >= 3 {
						t.Errorf("%dx%d: %d lines, want the %d rows filled", cols, rows, len(got), rows-1)
					}
				}
			}
		}
	}
	sweep()
	// Where East Asian ambiguous runes (the marks, the guides, "…") are
	// two columns wide.
	defer func(ea bool) { runewidth.DefaultCondition.EastAsianWidth = ea }(runewidth.DefaultCondition.EastAsianWidth)
	runewidth.DefaultCondition.EastAsianWidth = true
	if runewidth.StringWidth("├─ ✓") != 6 {
		t.Fatalf("ambiguous runes are not wide: %d", runewidth.StringWidth("├─ ✓"))
	}
	sweep()
}

// TestLiveTreeCollapse: a finished component is one line and keeps no
// children; a fan-out keeps at most 2*liveKeepDone done children.
func TestLiveTreeCollapse(t *testing.T) {
	lv, _, clk := newTestView(60, 24)
	handle := func(e eval.Event) {
		if err := lv.HandleTrace(e); err != nil {
			t.Fatal(err)
		}
	}
	handle(spanStartEv("2", "1", "component", "Plan", 0, "aml.source", "wf.star:1:1"))
	for i := 0; i < 3; i++ {
		id := "a" + strconv.Itoa(i)
		handle(spanStartEv(id, "2", "agent", "Agent", 0, "provider", "p"))
		handle(spanStartEv(id+"s", id, "agent", "agent.session", 0))
		handle(spanStartEv(id+"t", id+"s", "tool", "read", 0))
		handle(spanEndEv(id+"t", id+"s", "tool", "read", eval.StatusOK, time.Second))
		handle(spanEndEv(id+"s", id, "agent", "agent.session", eval.StatusOK, time.Second))
		handle(spanEndEv(id, "2", "agent", "Agent", eval.StatusOK, time.Second))
	}
	handle(spanEndEv("2", "1", "component", "Plan", eval.StatusOK, 2*time.Second))
	handle(spanStartEv("3", "1", "component", "Parallel", 2*time.Second))
	for i := 0; i < 5*liveKeepDone+3; i++ {
		id := "b" + strconv.Itoa(i)
		handle(spanStartEv(id, "3", "agent", "Agent", 2*time.Second, "provider", "p"))
		handle(spanEndEv(id, "3", "agent", "Agent", eval.StatusOK, 2*time.Second))
	}
	clk.Set(3 * time.Second)
	got := frameOf(t, lv, clk.Now(), 60, 6)
	wantLines(t, got, []string{
		"aml run 3.0s · 0 running · 1,289 done · 0 failed",
		"✓ Plan         wf.star:1:1  2.0s",
		"⠋ parallel                  1.0s",
		"├─ ✓ agent  p               0.0s",
		"└─ … 1,282 more: 1,282 done",
	})
	plan, par := lv.root.children[0], lv.root.children[1]
	if len(plan.children) != 0 || plan.counts[liveDone] != 3 {
		t.Errorf("finished component keeps %d children, counts %v", len(plan.children), plan.counts)
	}
	if n := len(par.children); n < liveKeepDone || n >= 2*liveKeepDone {
		t.Errorf("fan-out keeps %d done children, want %d to %d", n, liveKeepDone, 2*liveKeepDone-1)
	}
	if len(lv.folded) != 0 {
		t.Errorf("%d folded spans left", len(lv.folded))
	}
}

// TestLiveColor: with colours, status marks are coloured and finished
// lines dimmed; with NO_COLOR set (or a terminal without colours) the
// output has no SGR sequence at all, only the redraw's cursor movement.
func TestLiveColor(t *testing.T) {
	run := func(getenv func(string) string) string {
		lv, buf, clk := newTestViewEnv(100, 24, getenv)
		lv.Start()
		reviewRun(t, lv)
		clk.Set(9300 * time.Millisecond)
		draw(lv)
		lv.Suspend(func() { buf.WriteString("log\n") })
		finishReview(t, lv)
		clk.Set(10 * time.Second)
		draw(lv)
		lv.Stop()
		return buf.String()
	}
	out := run(testEnv("xterm-256color", ""))
	for _, want := range []string{
		sgrCyan + "⠸" + sgrReset,                 // running
		sgrDim + "·" + sgrReset,                  // queued
		sgrGreen + "✓" + sgrReset + sgrDim + " ", // done, and its line dimmed
		sgrRed + "✗" + sgrReset,                  // failed
		sgrDim + "├─ " + sgrReset,                // guides
		sgrDim + "… 2 more: 2 done" + sgrReset,   // summaries
	} {
		if !strings.Contains(out, want) {
			t.Errorf("coloured output lacks %q:\n%q", want, out)
		}
	}
	for _, env := range []func(string) string{
		testEnv("xterm-256color", "1"),
		testEnv("xterm-256color", "false"), // any non-empty value
		testEnv("vt100", ""),
		testEnv("xterm-mono", ""),
		testEnv("", ""),
	} {
		out := run(env)
		if sgrRE.MatchString(out) {
			t.Errorf("TERM=%q NO_COLOR=%q: SGR sequences in %q", env("TERM"), env("NO_COLOR"), out)
		}
		if !strings.Contains(out, "\x1b[2K") || !strings.Contains(out, "\x1b[1A") {
			t.Errorf("TERM=%q NO_COLOR=%q: no redraw in %q", env("TERM"), env("NO_COLOR"), out)
		}
		var s vscreen
		if err := s.feed(out); err != nil || s.sgr != 0 {
			t.Errorf("replay: %v, %d SGR sequences", err, s.sgr)
		}
	}

	// Without Getenv the view reads the process environment.
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("NO_COLOR", "1")
	if New(io.Discard, Options{}).color {
		t.Error("colours with NO_COLOR=1 in the environment")
	}
	t.Setenv("NO_COLOR", "")
	if !New(io.Discard, Options{}).color {
		t.Error("no colours with NO_COLOR empty on an xterm")
	}
}

func TestLiveColorEnv(t *testing.T) {
	for _, tc := range []struct {
		term, noColor string
		want          bool
	}{
		{"xterm-256color", "", true},
		{"xterm", "", true},
		{"screen", "", true},
		{"tmux-256color", "", true},
		{"linux", "", true},
		{"xterm-256color", "1", false},
		{"xterm", "0", false},
		{"dumb", "", false},
		{"", "", false},
		{"vt100", "", false},
		{"vt220", "", false},
		{"xterm-mono", "", false},
		{"vt100-m", "", false},
	} {
		if got := liveColor(testEnv(tc.term, tc.noColor)); got != tc.want {
			t.Errorf("liveColor(TERM=%q NO_COLOR=%q) = %v, want %v", tc.term, tc.noColor, got, tc.want)
		}
	}
}

func TestLiveFormatCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 9996: "9,996", 123456: "123,456", 1234567: "1,234,567"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// BenchmarkLiveRedraw10k measures one redraw (laying out the frame and
// writing it) of a 10,000-agent fan-out: at the start of the fan-out,
// when every agent is still kept, and late, when most are done.
func BenchmarkLiveRedraw10k(b *testing.B) {
	for _, bc := range []struct {
		name             string
		finished, failed int
	}{
		{"queued", 0, 0},
		{"late", 9992, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			clk := &fakeClock{t: liveT0}
			lv := New(io.Discard, Options{Now: clk.Now, Size: func() (int, int) { return 120, 50 }, Interval: time.Hour,
				Getenv: testEnv("xterm-256color", "")})
			var failed []int
			for i := 0; i < bc.failed; i++ {
				failed = append(failed, 100+i*1000)
			}
			fanOut(b, lv, 10000, bc.finished, 16, failed...)
			lv.Start()
			defer lv.Stop()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				clk.Set(time.Duration(i) * liveInterval) // a new frame every time
				draw(lv)
			}
		})
	}
}

// fanOut feeds a parallel fan-out of n agents at the top of a run: the
// first finished of them have ended, those at the indices in failed with
// an error and the others ok, the next running ones hold a session and
// the rest are queued. Agent i starts at i ms, its session at 10 s + i ms
// and ends at 20 s + i ms.
func fanOut(t testing.TB, lv *View, n, finished, running int, failed ...int) {
	t.Helper()
	ms := time.Millisecond
	bad := map[int]bool{}
	for _, i := range failed {
		bad[i] = true
	}
	handle := func(e eval.Event) {
		if err := lv.HandleTrace(e); err != nil {
			t.Fatal(err)
		}
	}
	handle(spanStartEv("1", "", "evaluation", "run", 0))
	handle(spanStartEv("2", "1", "component", "Parallel", 0, "aml.source", "fan.star:4:12"))
	for i := 0; i < n; i++ {
		handle(spanStartEv("a"+strconv.Itoa(i), "2", "agent", "Agent", time.Duration(i)*ms,
			"aml.source", "fan.star:7:9", "agent.name", "w"+strconv.Itoa(i), "provider", "p"))
	}
	for i := 0; i < finished+running && i < n; i++ {
		id := "a" + strconv.Itoa(i)
		handle(spanStartEv(id+"s", id, "agent", "agent.session", 10*time.Second+time.Duration(i)*ms))
		if i >= finished {
			continue
		}
		status := eval.StatusOK
		if bad[i] {
			status = eval.StatusError
		}
		handle(spanEndEv(id+"s", id, "agent", "agent.session", status, 20*time.Second+time.Duration(i)*ms))
		handle(spanEndEv(id, "2", "agent", "Agent", status, 20*time.Second+time.Duration(i)*ms))
	}
}
