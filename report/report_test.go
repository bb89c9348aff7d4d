package report

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
)

// external matches anything in a page that could load a resource.
var external = regexp.MustCompile(`(?i)https?://|\b(src|href|action|srcset|poster|data)\s*=|url\s*\(|@import|<link|<iframe|<img|<object|<embed|fetch\(|XMLHttpRequest|WebSocket|EventSource|\bimport\s*\(`)

func checkSelfContained(t *testing.T, page []byte) {
	t.Helper()
	s := string(page)
	for _, w := range []string{"http://", "https://"} {
		if strings.Contains(s, w) {
			t.Errorf("the report contains %q", w)
		}
	}
	if m := external.FindAllString(s, 5); m != nil {
		t.Errorf("the report references something outside itself: %q", m)
	}
	if n := strings.Count(s, "<script"); n != 2 {
		t.Errorf("%d script elements, want the data and the code", n)
	}
	if n := strings.Count(s, "</script"); n != 2 {
		t.Errorf("%d </script sequences, want the two closing tags", n)
	}
	if n := strings.Count(s, "<style"); n != 1 {
		t.Errorf("%d style elements, want one", n)
	}
	if strings.Contains(s, "<!--") {
		t.Error("the report contains <!--")
	}
	if !strings.Contains(s, "Content-Security-Policy") || !strings.Contains(s, "default-src 'none'") {
		t.Error("the report has no Content-Security-Policy that forbids fetches")
	}
}

func TestReportIsSelfContained(t *testing.T) {
	for _, capture := range []bool{false, true} {
		page := render(t, smallRun(t, capture), Options{Title: "flow.star"})
		checkSelfContained(t, page)
		d := decodeData(t, page)
		if d.Title != "flow.star" || len(d.R) != smallSpans || d.Content != capture || len(d.F) != 1 {
			t.Fatalf("data: title %q, %d rows, content %v, %d failures", d.Title, len(d.R), d.Content, len(d.F))
		}
		if !bytes.Contains(page, []byte("<title>flow.star – AML report</title>")) {
			t.Error("the page title is not the report title")
		}
	}
}

func TestReportAssetsAreInlineSafe(t *testing.T) {
	for name, asset := range map[string]string{"page.js": pageJS, "page.css": pageCSS} {
		for _, bad := range []string{"</script", "</style", "<!--", "<script", "http:", "https:", "url("} {
			if strings.Contains(strings.ToLower(asset), bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
}

func TestReportEscapesHostileText(t *testing.T) {
	hostile := `</script><!-- <script>alert(1)</script> https://example.com/x?a=1&b=2 ` + "\u2028\xff"
	events := []eval.Event{
		{Type: eval.SpanStart, RunID: "r", SpanID: "1", Sequence: 1, Timestamp: 10, Kind: "evaluation", Name: "run", Attributes: map[string]any{}},
		{Type: eval.SpanStart, RunID: "r", SpanID: "</script>", ParentSpanID: "1", Sequence: 2, Timestamp: 10, Kind: "component", Name: hostile,
			Attributes: map[string]any{"aml.source": hostile, "prompt": hostile, hostile: int64(1)}},
		{Type: eval.PointEvent, RunID: "r", SpanID: "</script>", Sequence: 3, Timestamp: 11, Name: hostile, Attributes: map[string]any{"update": hostile}},
		{Type: eval.SpanEnd, RunID: "r", SpanID: "</script>", ParentSpanID: "1", Sequence: 4, Timestamp: 12, Kind: "component", Name: hostile,
			Status: eval.StatusError, DurationMS: 2, Attributes: map[string]any{"error.type": hostile, "error.message": hostile}},
		{Type: eval.SpanEnd, RunID: "r", SpanID: "1", Sequence: 5, Timestamp: 12, Kind: "evaluation", Name: "run", Status: eval.StatusError, DurationMS: 2, Attributes: map[string]any{}},
	}
	page := render(t, events, Options{Title: hostile})
	checkSelfContained(t, page)
	d := decodeData(t, page)
	found := false
	for _, s := range d.S {
		if strings.HasPrefix(s, "</script><!-- <script>alert(1)</script> https://example.com/x?a=1&b=2 \u2028") {
			found = true
		}
	}
	if !found || d.Title == "" || len(d.R) != 2 || d.R[1][0] != "</script>" {
		t.Fatalf("the hostile text did not survive the round trip: title %q, rows %v", d.Title, d.R)
	}
}

func TestCollectorMatchesWrite(t *testing.T) {
	c := NewCollector(Options{Title: "flow.star"})
	events, err := evaluate(t, smallTree(), false, c)
	if err == nil {
		t.Fatal("the small run succeeded")
	}
	var live bytes.Buffer
	if err := c.WriteHTML(&live); err != nil {
		t.Fatal(err)
	}
	if want := render(t, events, Options{Title: "flow.star"}); !bytes.Equal(live.Bytes(), want) {
		t.Fatal("the collector's report differs from Write's report of the same events")
	}
	if d := decodeData(t, live.Bytes()); len(d.R) != smallSpans || d.Content {
		t.Fatalf("%d rows, content %v", len(d.R), d.Content)
	}
}

// TestCollectorCapturesContent checks Options.CaptureContent: the
// evaluator sends content to a collector that asks for it, and only then.
func TestCollectorCapturesContent(t *testing.T) {
	for _, capture := range []bool{false, true} {
		c := NewCollector(Options{Title: "flow.star", CaptureContent: capture})
		if c.CaptureContent() != capture {
			t.Fatalf("CaptureContent() = %v, want %v", c.CaptureContent(), capture)
		}
		if _, err := evaluate(t, smallTree(), false, c); err == nil {
			t.Fatal("the small run succeeded")
		}
		var page bytes.Buffer
		if err := c.WriteHTML(&page); err != nil {
			t.Fatal(err)
		}
		d := decodeData(t, page.Bytes())
		if d.Content != capture || bytes.Contains(page.Bytes(), []byte("PROMPT-SECRET-42")) != capture {
			t.Errorf("collector with CaptureContent %v: content flag %v, prompt shown %v", capture, d.Content, bytes.Contains(page.Bytes(), []byte("PROMPT-SECRET-42")))
		}
	}
}

func TestCollectorConcurrentUse(t *testing.T) {
	events := smallRun(t, false)
	c := NewCollector(Options{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for _, e := range events {
				e.RunID = fmt.Sprintf("run-%d", g)
				if err := c.HandleTrace(e); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			if err := c.WriteHTML(&bytes.Buffer{}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	var buf bytes.Buffer
	if err := c.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	d := decodeData(t, buf.Bytes())
	if len(d.Runs) != 4 || len(d.R) != 4*smallSpans {
		t.Fatalf("%d runs, %d rows", len(d.Runs), len(d.R))
	}
	if title := d.Title; title != "AML run" {
		t.Fatalf("default title %q", title)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriteWrapsTheWriterError(t *testing.T) {
	err := Write(failingWriter{}, smallRun(t, false), Options{})
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "writing the report") {
		t.Fatalf("error %v", err)
	}
	if err := NewCollector(Options{}).WriteHTML(failingWriter{}); !errors.Is(err, errDiskFull) {
		t.Fatalf("collector error %v", err)
	}
}

func TestReportOfNoEvents(t *testing.T) {
	page := render(t, nil, Options{})
	checkSelfContained(t, page)
	if d := decodeData(t, page); len(d.R) != 0 || len(d.Runs) != 0 {
		t.Fatalf("data %+v", d)
	}
}

func TestReport10kAgentsIsSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10,000-agent run")
	}
	events := wideRun(t, 10_000)
	page := render(t, events, Options{Title: "wide.star"})
	const limit = 5 << 20
	t.Logf("10,000 agents: %d events, report %d bytes (%.2f MB)", len(events), len(page), float64(len(page))/(1<<20))
	if len(page) >= limit {
		t.Fatalf("the report is %d bytes, over %d", len(page), limit)
	}
	d := decodeData(t, page)
	if got := d.Tot["agents"]; got != float64(10_000) {
		t.Fatalf("%v agents in the totals", got)
	}
	checkSelfContained(t, page)
}
