package report

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/browsertest"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/deterministic"
)

// The browser tests drive Debian's headless Chromium (see
// internal/browsertest): AML_CHROMIUM names another binary,
// AML_TEST_ARTIFACTS a directory that keeps the screenshots.

// writeReport writes the report of events to a file in a fresh directory.
func writeReport(t testing.TB, events []eval.Event, title string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(file, render(t, events, Options{Title: title}), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestBrowserSmallRun(t *testing.T) {
	p := browsertest.New(t)
	file := writeReport(t, smallRun(t, true), "flow.star")
	took := p.Open(t, file)
	t.Logf("rendered in %v", took)

	if n := browsertest.Eval[int](t, p, `document.querySelectorAll("[data-span]").length`); n != smallSpans {
		t.Fatalf("%d span bars, want %d", n, smallSpans)
	}
	if n := browsertest.Eval[int](t, p, `document.querySelectorAll('.bar[data-status="error"]').length`); n != 5 {
		t.Errorf("%d failed bars, want 5 (agent bad, its session, parallel, main, run)", n)
	}
	if n := browsertest.Eval[int](t, p, `document.querySelectorAll('.bar[data-status="open"]').length`); n != 0 {
		t.Errorf("%d unfinished bars in a finished run", n)
	}
	if n := browsertest.Eval[int](t, p, `document.querySelectorAll(".bar .q, .bar .tn, .bar .cl").length`); n < 4 {
		t.Errorf("%d turn and cleanup segments, want the planner's turns and cleanup in its agent and session bars", n)
	}
	// The failed agent's bar is red, and its row says so.
	failed := browsertest.Eval[string](t, p, `(function () {
		var rows = document.querySelectorAll(".row");
		for (var i = 0; i < rows.length; i++) {
			var lb = rows[i].querySelector(".lb");
			if (lb && lb.textContent === 'agent "bad"') return rows[i].querySelector(".bar").getAttribute("data-status") + " " + getComputedStyle(rows[i].querySelector(".bar")).backgroundColor;
		}
		return "missing";
	})()`)
	if !strings.HasPrefix(failed, "error rgb(") {
		t.Errorf("the bar of agent bad is %q", failed)
	}
	// The Errors section shows the message and the position.
	if err := chromedp.Do(p.Ctx, chromedp.WaitVisible(chromedp.CSS("#errors .err-item"))); err != nil {
		t.Fatal(err)
	}
	errText := browsertest.Eval[string](t, p, `document.querySelector("#errors").innerText`)
	for _, want := range []string{failMessage, "flow.star:5:3", `agent "bad"`, "EvaluationError"} {
		if !strings.Contains(errText, want) {
			t.Errorf("the Errors section does not show %q:\n%s", want, errText)
		}
	}
	// Clicking the error selects the row and shows its details.
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.CSS("#errors .err-item")), chromedp.WaitVisible(chromedp.CSS("#details .err-box"))); err != nil {
		t.Fatal(err)
	}
	details := browsertest.Eval[string](t, p, `document.querySelector("#details").innerText`)
	if !strings.Contains(details, failMessage) || !strings.Contains(details, "flow.star:5:3") {
		t.Errorf("the details do not show the error:\n%s", details)
	}
	if sel := browsertest.Eval[string](t, p, `document.querySelector(".row.sel .lb").textContent`); sel != `agent "bad"` {
		t.Errorf("the selected row is %q", sel)
	}
	// The arrow keys move the selection to the next visible row.
	if err := chromedp.Do(p.Ctx, chromedp.SendKeys(chromedp.ID("vp"), kb.ArrowDown)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](`document.querySelector(".row.sel .lb").textContent === "session" && document.querySelector("#details h3").textContent.indexOf("session") === 0`)); err != nil {
		t.Errorf("ArrowDown did not select the session of agent bad: %v", err)
	}
	// The filter keeps the matching rows and their ancestors: the two
	// turns, the session, the planner, main and the run.
	bars := func(n int) string { return fmt.Sprintf(`document.querySelectorAll("[data-span]").length === %d`, n) }
	if err := chromedp.Do(p.Ctx, chromedp.SendKeys(chromedp.ID("q"), "turn")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](bars(6))); err != nil {
		t.Errorf("filtering for turns: %v", err)
	}
	if err := chromedp.Do(p.Ctx, chromedp.Evaluate[chromedp.Void](`(function () { var q = document.getElementById("q"); q.value = ""; q.dispatchEvent(new Event("input")); })()`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](bars(smallSpans))); err != nil {
		t.Errorf("clearing the filter: %v", err)
	}
	// Errors only: the failed spans, which are each other's ancestors.
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.ID("eonly"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](bars(5)+` && document.querySelectorAll('[data-status="ok"]').length === 0`)); err != nil {
		t.Errorf("errors only: %v", err)
	}
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.ID("eonly"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](bars(smallSpans))); err != nil {
		t.Errorf("leaving errors only: %v", err)
	}
	// Zooming in narrows the window; "Whole run" restores it.
	rootWidth := `parseFloat(document.querySelector(".row .bar").style.width)`
	if w := browsertest.Eval[float64](t, p, rootWidth); w != 100 {
		t.Errorf("the run's bar is %v%% wide, want the whole axis", w)
	}
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.ID("zin"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](`document.getElementById("zlabel").textContent.indexOf("showing") === 0`)); err != nil {
		t.Errorf("zooming in: %v", err)
	}
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.ID("zreset"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](`document.getElementById("zlabel").textContent === "" && `+rootWidth+` === 100`)); err != nil {
		t.Errorf("zooming back out: %v", err)
	}
	// The header totals.
	head := browsertest.Eval[string](t, p, `document.querySelector("header").innerText`)
	for _, want := range []string{"failed", "AGENTS\n3", "input 20", "output 10", "TOKENS\n30", "content captured"} {
		if !strings.Contains(head, want) {
			t.Errorf("the header does not show %q:\n%s", want, head)
		}
	}
	// Collapsing the parallel row hides its four spans.
	parallel := browsertest.Eval[int](t, p, `(function () {
		var rows = document.querySelectorAll(".row");
		for (var i = 0; i < rows.length; i++) if (rows[i].querySelector(".lb").textContent === "parallel") return +rows[i].getAttribute("data-row");
		return -1;
	})()`)
	if err := chromedp.Do(p.Ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.row[data-row="%d"] .tw`, parallel)))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll("[data-span]").length === %d`, smallSpans-4))); err != nil {
		t.Errorf("collapsing the parallel row: %v", err)
	}
	p.Screenshot(t, "report-small.png")
	p.Check(t, "file://"+file)
}

func TestBrowserMetadataOnly(t *testing.T) {
	p := browsertest.New(t)
	p.Open(t, writeReport(t, smallRun(t, false), "flow.star"))
	errText := browsertest.Eval[string](t, p, `document.querySelector("#errors").innerText`)
	if !strings.Contains(errText, "flow.star:5:3") || !strings.Contains(errText, "message not captured") || strings.Contains(errText, failMessage) {
		t.Errorf("the Errors section of a metadata-only trace:\n%s", errText)
	}
	if strings.Contains(browsertest.Eval[string](t, p, `document.body.innerText`), "PROMPT-SECRET-42") {
		t.Error("the page shows content that was not captured")
	}
}

func TestBrowser10kAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10,000-agent run")
	}
	p := browsertest.New(t)
	events := wideRun(t, 10_000)
	file := writeReport(t, events, "wide.star")
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	took := p.Open(t, file)
	t.Logf("10,000 agents: report %d bytes (%.2f MB), rendered in chromium in %v", st.Size(), float64(st.Size())/(1<<20), took)
	rows := browsertest.Eval[int](t, p, `+document.body.getAttribute("data-rows")`)
	bars := browsertest.Eval[int](t, p, `document.querySelectorAll("[data-span]").length`)
	if rows < 20_000 || bars == 0 || bars > 200 {
		t.Fatalf("%d rows, %d bars in the DOM: the rows must be virtualized", rows, bars)
	}
	// Scrolling to the end renders the last rows.
	if err := chromedp.Do(p.Ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("vp").scrollTop = 1e9`)); err != nil {
		t.Fatal(err)
	}
	// The last row is the session of the last agent, collapsed in it; the
	// last row drawn must be that agent.
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](`(function () {
		var rows = document.querySelectorAll(".row");
		return rows.length > 0 && +rows[rows.length - 1].getAttribute("data-row") === +document.body.getAttribute("data-rows") - 2;
	})()`, chromedp.WithPollingTimeout(browsertest.Timeout))); err != nil {
		t.Fatalf("the last rows did not render after scrolling: %v", err)
	}
	p.Screenshot(t, "report-10k.png")
	p.Check(t, (&url.URL{Scheme: "file", Path: file}).String())
}

// BenchmarkBrowserOpen10k measures the time from navigation to the
// rendered report of a 10,000-agent run in headless Chromium.
func BenchmarkBrowserOpen10k(b *testing.B) {
	p := browsertest.New(b)
	file := writeReport(b, wideRun(b, 10_000), "wide.star")
	b.ResetTimer()
	var total time.Duration
	for b.Loop() {
		total += p.Open(b, file)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/open")
}

// TestFirefoxSmallRun opens the small run's report in headless Firefox,
// offline: it renders without an error or a request, with every span bar,
// the failed ones shown failed, and the Errors section.
func TestFirefoxSmallRun(t *testing.T) {
	f := browsertest.NewFirefox(t)
	file := writeReport(t, smallRun(t, true), "flow.star")
	took := f.Open(t, file)
	t.Logf("rendered in Firefox in %v", took)
	if n := browsertest.FirefoxEval[int](t, f, `document.querySelectorAll("[data-span]").length`); n != smallSpans {
		t.Errorf("%d span bars, want %d", n, smallSpans)
	}
	if n := browsertest.FirefoxEval[int](t, f, `document.querySelectorAll('.bar[data-status="error"]').length`); n != 5 {
		t.Errorf("%d failed bars, want 5", n)
	}
	errText := browsertest.FirefoxEval[string](t, f, `document.querySelector("#errors").innerText`)
	for _, want := range []string{failMessage, "flow.star:5:3", `agent "bad"`} {
		if !strings.Contains(errText, want) {
			t.Errorf("the Errors section does not show %q:\n%s", want, errText)
		}
	}
	f.Screenshot(t, "report-small-firefox.png")
	f.Check(t, (&url.URL{Scheme: "file", Path: file}).String())
}

// TestBrowserSpendTable: the Spend by node table lists each agent that
// spent and the components around them, sorted by cost; a column header
// sorts by that column (again: the other way), and a node selects its
// row in the tree.
func TestBrowserSpendTable(t *testing.T) {
	usage := map[string]eval.Usage{
		"small": {InputTokens: 10, OutputTokens: 5, CostUSD: 0.01, CostReported: true},
		"big":   {InputTokens: 1000, OutputTokens: 10, CostUSD: 0.02, CostReported: true},
		"dear":  {InputTokens: 100, OutputTokens: 100, CostUSD: 0.5, CostReported: true},
	}
	p, err := deterministic.New(deterministic.Options{ReportsCost: true, Usage: func(_ context.Context, req *eval.AgentRequest, _ int) (eval.Usage, error) {
		return usage[req.Prompt], nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	tree := &eval.Component{Name: "main", Entry: true, Position: pos(1), Fn: func(*eval.ComponentContext) (any, error) {
		return &eval.Parallel{Position: pos(2), Branches: []any{
			&eval.Agent{Name: "small", Position: pos(3), Children: []any{"small"}},
			&eval.Agent{Name: "big", Position: pos(4), Children: []any{"big"}},
			&eval.Agent{Name: "dear", Position: pos(5), Children: []any{"dear"}},
		}}, nil
	}}
	rec := &tracetest.Recorder{}
	rt, err := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{rec}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Evaluate(context.Background(), tree); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t)
	b.Open(t, writeReport(t, rec.Events(), "spend.star"))
	names := func() string {
		return browsertest.Eval[string](t, b, `Array.from(document.querySelectorAll("#spend tbody tr .lk")).map(function (e) { return e.textContent; }).join(",")`)
	}
	// By cost, the most first: main and parallel carry the sums.
	if got := names(); got != `main,parallel,agent "dear",agent "big",agent "small"` {
		t.Errorf("by cost: %s", got)
	}
	// By tokens: the most first, then the fewest first.
	tokens := chromedp.CSS(`#spend th[data-col="3"] button`)
	if err := chromedp.Do(b.Ctx, chromedp.Click(tokens)); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != `main,parallel,agent "big",agent "dear",agent "small"` {
		t.Errorf("by tokens: %s (%q)", got, b.Errors())
	}
	if err := chromedp.Do(b.Ctx, chromedp.Click(tokens)); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != `agent "small",agent "dear",agent "big",main,parallel` {
		t.Errorf("by tokens, fewest first: %s", got)
	}
	totals := browsertest.Eval[string](t, b, `document.querySelector("#spend tbody tr:last-child").innerText`)
	if !strings.Contains(totals, "1,225") || !strings.Contains(totals, "0.5300") {
		t.Errorf("the parallel's row: %q, want 1,225 tokens and $0.5300", totals)
	}
	// A node selects its row.
	if err := chromedp.Do(b.Ctx, chromedp.Click(chromedp.CSS(`#spend tbody tr:first-child .lk`))); err != nil {
		t.Fatal(err)
	}
	if d := browsertest.Eval[string](t, b, `document.querySelector("#details h3").innerText`); !strings.Contains(d, `agent "small"`) {
		t.Errorf("the details show %q", d)
	}
}
