package liveview

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mattn/go-runewidth"

	"github.com/aml-go/aml/eval"
)

// liveT0 is the fake clock's origin, on a whole millisecond so that event
// timestamps (Unix milliseconds) are exact.
var liveT0 = time.Unix(1_700_000_000, 0)

// fakeClock is a settable clock for deterministic frames.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = liveT0.Add(d)
}

// agentStart is the span.start of an "Agent" span at liveT0+at.
func agentStart(span, name, provider, model, source string, at time.Duration) eval.Event {
	attrs := map[string]any{}
	for k, v := range map[string]string{"agent.name": name, "provider": provider, "model": model, "aml.source": source} {
		if v != "" {
			attrs[k] = v
		}
	}
	return eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: span, ParentSpanID: "1", Kind: "agent", Name: "Agent",
		Timestamp: liveT0.Add(at).UnixMilli(), Attributes: attrs}
}

// agentEnd is the span.end of an "Agent" span at liveT0+at.
func agentEnd(span, status string, at time.Duration) eval.Event {
	return eval.Event{Type: eval.SpanEnd, RunID: "run1", SpanID: span, ParentSpanID: "1", Kind: "agent", Name: "Agent",
		Status: status, Timestamp: liveT0.Add(at).UnixMilli(), Attributes: map[string]any{}}
}

func feed(t *testing.T, lv *View, evs ...eval.Event) {
	t.Helper()
	for _, e := range evs {
		if err := lv.HandleTrace(e); err != nil {
			t.Fatalf("HandleTrace(%v): %v", e, err)
		}
		// Agents in these tests hold a scheduler slot at once: their
		// session starts with them.
		if e.Type == eval.SpanStart && e.Name == "Agent" {
			if err := lv.HandleTrace(sessionStart(e)); err != nil {
				t.Fatalf("HandleTrace(session): %v", err)
			}
		}
	}
}

// sessionStart is the agent.session start of the agent span a.
func sessionStart(a eval.Event) eval.Event {
	return eval.Event{Type: eval.SpanStart, RunID: a.RunID, SpanID: a.SpanID + ".s", ParentSpanID: a.SpanID, Kind: "agent",
		Name: "agent.session", Timestamp: a.Timestamp, Attributes: map[string]any{}}
}

// TestLiveWaitingAgents checks an agent is shown as queued until its
// session starts (it waits for a max_concurrent_agents slot).
func TestLiveWaitingAgents(t *testing.T) {
	lv, _, clock := newTestView(80, 24)
	a := agentStart("2", "queued", "p", "", "wf.star:1:1", 0)
	if err := lv.HandleTrace(a); err != nil {
		t.Fatal(err)
	}
	clock.Set(2 * time.Second)
	wantLines(t, frameOf(t, lv, clock.Now(), 80, 24), []string{
		"aml run 2.0s · 0 running · 1 queued · 0 done · 0 failed",
		"· queued  p  wf.star:1:1  2.0s",
	})
	s := sessionStart(a)
	s.Timestamp = liveT0.Add(2 * time.Second).UnixMilli()
	if err := lv.HandleTrace(s); err != nil {
		t.Fatal(err)
	}
	clock.Set(3 * time.Second)
	// The elapsed time counts from the session start.
	wantLines(t, frameOf(t, lv, clock.Now(), 80, 24), []string{
		"aml run 3.0s · 1 running · 0 done · 0 failed",
		"⠋ queued  p  wf.star:1:1  1.0s",
	})
}

// newTestView returns a view on a buffer with a fake clock at liveT0, a
// fixed terminal size, colours on (TERM=xterm-256color, no NO_COLOR) and
// an interval so long that the ticker never fires: frames are drawn only
// by draw, Suspend and Resume.
func newTestView(cols, rows int) (*View, *bytes.Buffer, *fakeClock) {
	return newTestViewEnv(cols, rows, testEnv("xterm-256color", ""))
}

func newTestViewEnv(cols, rows int, getenv func(string) string) (*View, *bytes.Buffer, *fakeClock) {
	var buf bytes.Buffer
	clk := &fakeClock{t: liveT0}
	lv := New(&buf, Options{Now: clk.Now, Size: func() (int, int) { return cols, rows }, Interval: time.Hour, Getenv: getenv})
	return lv, &buf, clk
}

// testEnv is an environment with only TERM and NO_COLOR.
func testEnv(term, noColor string) func(string) string {
	return func(k string) string {
		switch k {
		case "TERM":
			return term
		case "NO_COLOR":
			return noColor
		}
		return ""
	}
}

// sgrRE matches an SGR (colour) sequence.
var sgrRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// frameOf renders the frame at now on a cols x rows terminal without
// drawing it and returns its lines without SGR sequences. It fails t when
// the frame breaks the bounds: more than rows-1 lines, a line cols
// columns wide or wider, or an escape sequence other than SGR.
func frameOf(t testing.TB, lv *View, now time.Time, cols, rows int) []string {
	t.Helper()
	lv.mu.Lock()
	raw := lv.frameLocked(now, cols, rows)
	lv.mu.Unlock()
	if len(raw) > max(rows-1, 0) {
		t.Fatalf("%dx%d: frame of %d lines:\n%s", cols, rows, len(raw), strings.Join(raw, "\n"))
	}
	out := make([]string, len(raw))
	for i, l := range raw {
		out[i] = sgrRE.ReplaceAllString(l, "")
		if strings.ContainsAny(out[i], "\x1b\r\n") {
			t.Fatalf("%dx%d: line %q holds a control character", cols, rows, l)
		}
		if w := runewidth.StringWidth(out[i]); w > max(cols-1, 1) {
			t.Fatalf("%dx%d: line %q is %d columns wide", cols, rows, out[i], w)
		}
	}
	return out
}

// draw renders one frame as the ticker would.
func draw(lv *View) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.redrawLocked()
}

// vscreen is a minimal terminal emulator for the sequences the view uses:
// printable runes (one cell each), "\r", "\n" (down only, as with output
// post-processing off; "\r\n" from a pty works too), CSI n A (up), CSI 2 K
// (erase line), CSI J (erase below) and SGR (CSI ... m, counted and
// otherwise ignored). Anything else is an error.
type vscreen struct {
	lines    [][]rune
	row, col int
	maxRow   int
	sgr      int
}

func (s *vscreen) feed(out string) error {
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\r':
			s.col = 0
		case r == '\n':
			s.row++
			s.maxRow = max(s.maxRow, s.row)
		case r == 0x1b:
			if i+1 >= len(rs) || rs[i+1] != '[' {
				return fmt.Errorf("bare ESC at %d", i)
			}
			j := i + 2
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == ';' || rs[j] == '?') {
				j++
			}
			if j >= len(rs) {
				return fmt.Errorf("unterminated CSI at %d", i)
			}
			param, final := string(rs[i+2:j]), rs[j]
			i = j
			switch final {
			case 'A':
				n := 1
				if param != "" {
					n, _ = strconv.Atoi(param)
				}
				if n > s.row {
					return fmt.Errorf("cursor up %d from row %d: would leave the screen's start", n, s.row)
				}
				s.row -= n
			case 'K':
				if param != "2" {
					return fmt.Errorf("unexpected CSI %sK", param)
				}
				if s.row < len(s.lines) {
					s.lines[s.row] = nil
				}
			case 'J':
				if param != "" && param != "0" {
					return fmt.Errorf("unexpected CSI %sJ", param)
				}
				if s.row < len(s.lines) {
					if s.col < len(s.lines[s.row]) {
						s.lines[s.row] = s.lines[s.row][:s.col]
					}
					s.lines = s.lines[:s.row+1]
				}
			case 'm':
				s.sgr++
			default:
				return fmt.Errorf("unexpected CSI %s%c", param, final)
			}
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("unexpected control character %q", r)
		default:
			for len(s.lines) <= s.row {
				s.lines = append(s.lines, nil)
			}
			l := s.lines[s.row]
			for len(l) <= s.col {
				l = append(l, ' ')
			}
			l[s.col] = r
			s.lines[s.row] = l
			s.col++
		}
	}
	return nil
}

// screen returns the non-empty-trimmed lines of the screen, dropping
// trailing blank lines.
func (s *vscreen) screen() []string {
	var out []string
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// screenOf replays everything written so far.
func screenOf(t *testing.T, out string) []string {
	t.Helper()
	var s vscreen
	if err := s.feed(out); err != nil {
		t.Fatalf("replaying %q: %v", out, err)
	}
	return s.screen()
}

func wantLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLiveSpend: the header adds what the finished sessions spent, from
// their spans' GenAI attributes, when it fits the width.
func TestLiveSpend(t *testing.T) {
	lv, buf, clk := newTestView(100, 24)
	lv.Start()
	defer lv.Stop()
	spent := func(span string, in, out int64, cost float64) eval.Event {
		e := agentEnd(span, eval.StatusOK, time.Second)
		e.Attributes = map[string]any{"gen_ai.usage.input_tokens": in, "gen_ai.usage.output_tokens": out, "aml.cost_usd": cost}
		return e
	}
	feed(t, lv,
		eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: "1", Kind: "evaluation", Name: "run"},
		agentStart("3", "a", "p", "", "", 0), agentStart("4", "b", "p", "", "", 0),
		spent("3", 10000, 2345, 0.25), spent("4", 0, 0, 0.17),
	)
	clk.Set(2 * time.Second)
	draw(lv)
	if got := screenOf(t, buf.String())[0]; got != "aml run 2.0s · 0 running · 2 done · 0 failed · 12,345 tokens, $0.42" {
		t.Fatalf("header %q", got)
	}
	narrow, nbuf, nclk := newTestView(46, 24)
	narrow.Start()
	defer narrow.Stop()
	feed(t, narrow, eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: "1", Kind: "evaluation", Name: "run"},
		agentStart("3", "a", "p", "", "", 0), spent("3", 10, 5, 0))
	nclk.Set(2 * time.Second)
	draw(narrow)
	if got := screenOf(t, nbuf.String())[0]; got != "aml run 2.0s · 0 running · 1 done · 0 failed" {
		t.Fatalf("a narrow header %q", got)
	}
}

func TestLiveFrameTwoAgents(t *testing.T) {
	lv, buf, clk := newTestView(100, 24)
	lv.Start()
	defer lv.Stop()
	feed(t, lv,
		eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: "1", Kind: "evaluation", Name: "run"},
		agentStart("3", "reviewer", "anthropic", "claude-sonnet", "wf.star:12:5", 0),
		eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: "4", ParentSpanID: "3", Kind: "agent", Name: "agent.session",
			Attributes: map[string]any{"provider": "anthropic"}},
		agentStart("7", "", "openai", "", "wf.star:20:3", 1500*time.Millisecond),
		eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: "8", ParentSpanID: "4", Kind: "tool", Name: "search"},
		eval.Event{Type: eval.SpanStart, RunID: "run1", SpanID: "9", ParentSpanID: "1", Kind: "component", Name: "Review"},
	)
	clk.Set(4250 * time.Millisecond)
	draw(lv)
	// The run span is the root; the session folds into its agent, so the
	// tool called in it is the agent's child. Agents beside each other
	// align their name, provider and model.
	frame1 := []string{
		"aml run 4.2s · 3 running · 0 done · 0 failed", // two agents and a tool call
		"⠹ reviewer  anthropic  claude-sonnet  wf.star:12:5  4.2s",
		"└─ ⠹ tool search                                    4.2s",
		"⠹ agent     openai                    wf.star:20:3  2.7s",
		"⠹ Review                                            4.2s",
	}
	wantLines(t, screenOf(t, buf.String()), frame1)

	// The first agent finishes, a third starts and fails: finished agents
	// stay with their final elapsed time, their subtree collapsed, and the
	// counts follow.
	feed(t, lv,
		agentEnd("3", eval.StatusOK, 5*time.Second),
		agentStart("11", "fixer", "anthropic", "claude-haiku", "wf.star:30:1", 5*time.Second),
		agentEnd("11", eval.StatusError, 6*time.Second),
		eval.Event{Type: eval.SpanEnd, RunID: "run1", SpanID: "4", Kind: "agent", Name: "agent.session", Status: eval.StatusOK},
		eval.Event{Type: eval.SpanEnd, RunID: "run1", SpanID: "8", Kind: "tool", Name: "search", Status: eval.StatusError},
	)
	clk.Set(75 * time.Second)
	draw(lv)
	wantLines(t, screenOf(t, buf.String()), []string{
		"aml run 1m15s · 1 running · 1 done · 2 failed", // the fixer and the search tool call
		"✓ reviewer  anthropic  claude-sonnet  wf.star:12:5   5.0s",
		"⠋ agent     openai                    wf.star:20:3  1m13s",
		"⠋ Review                                            1m15s",
		"✗ fixer     anthropic  claude-haiku   wf.star:30:1   1.0s",
	})

	// Stop erases the block: cursor up and clear, once per line drawn.
	before := buf.Len()
	lv.Stop()
	erase := buf.String()[before:]
	if want := "\r" + strings.Repeat("\x1b[1A\x1b[2K", 5); erase != want {
		t.Fatalf("Stop wrote %q, want %q", erase, want)
	}
	if !strings.HasSuffix(buf.String(), "\x1b[1A\x1b[2K") {
		t.Fatalf("output does not end with the erase sequence: %q", buf.String())
	}
	wantLines(t, screenOf(t, buf.String()), nil)

	// Stop is idempotent, and nothing is drawn after it.
	n := buf.Len()
	lv.Stop()
	draw(lv) // a late tick
	lv.Resume()
	lv.Suspend(func() {})
	feed(t, lv, agentStart("12", "late", "p", "", "", 80*time.Second))
	if buf.Len() != n {
		t.Fatalf("output after Stop: %q", buf.String()[n:])
	}
}

func TestLiveRedrawInPlace(t *testing.T) {
	lv, buf, clk := newTestView(80, 24)
	lv.Start()
	defer lv.Stop()
	buf.WriteString("earlier output\n")
	feed(t, lv, spanStartEv("5", "1", "component", "Pair", 0),
		under(agentStart("2", "a", "p", "", "", 0), "5"), under(agentStart("3", "b", "p", "", "", 0), "5"))
	for i := 1; i <= 5; i++ {
		clk.Set(time.Duration(i) * 100 * time.Millisecond)
		draw(lv)
	}
	got := screenOf(t, buf.String())
	wantLines(t, got, []string{
		"earlier output",
		"aml run 0.5s · 2 running · 0 done · 0 failed",
		"⠴ Pair     0.5s",
		"├─ ⠴ a  p  0.5s",
		"└─ ⠴ b  p  0.5s",
	})
	// A frame equal to the one on screen is not written again.
	n := buf.Len()
	draw(lv)
	if buf.Len() != n {
		t.Fatalf("identical frame redrawn: %q", buf.String()[n:])
	}
	// A shorter frame clears the leftover lines: the finished component
	// collapses to one line.
	feed(t, lv, agentEnd("2", eval.StatusOK, 300*time.Millisecond), agentEnd("3", eval.StatusOK, 400*time.Millisecond),
		spanEndEv("5", "1", "component", "Pair", eval.StatusOK, 400*time.Millisecond))
	draw(lv)
	wantLines(t, screenOf(t, buf.String()), []string{
		"earlier output",
		"aml run 0.5s · 0 running · 2 done · 0 failed",
		"✓ Pair  0.4s",
	})
	lv.Stop()
	wantLines(t, screenOf(t, buf.String()), []string{"earlier output"})
}

func TestLiveStopWithoutStart(t *testing.T) {
	lv, buf, _ := newTestView(80, 24)
	feed(t, lv, agentStart("2", "a", "p", "", "", 0))
	lv.Suspend(func() { buf.WriteString("log\n") })
	lv.Stop()
	lv.Stop()
	lv.Start() // no-op after Stop
	if buf.String() != "log\n" {
		t.Fatalf("output %q, want only the suspended write", buf.String())
	}
}

func TestLiveTruncateHeight(t *testing.T) {
	lv, buf, clk := newTestView(60, 6)
	lv.Start()
	defer lv.Stop()
	for i := 0; i < 10; i++ {
		feed(t, lv, agentStart(strconv.Itoa(i+2), "agent"+strconv.Itoa(i), "p", "", "", 0))
	}
	clk.Set(time.Second)
	draw(lv)
	// Six rows: five lines of block plus the row the cursor rests on.
	wantLines(t, screenOf(t, buf.String()), []string{
		"aml run 1.0s · 10 running · 0 done · 0 failed",
		"⠋ agent0  p  1.0s",
		"⠋ agent1  p  1.0s",
		"⠋ agent2  p  1.0s",
		"… 7 more: 7 running",
	})

	var s vscreen
	if err := s.feed(buf.String()); err != nil {
		t.Fatal(err)
	}
	if s.maxRow > 5 {
		t.Fatalf("cursor reached row %d of a 6-row terminal", s.maxRow)
	}

	for _, tc := range []struct {
		rows int
		want []string
	}{
		{4, []string{"aml run 1.0s · 10 running · 0 done · 0 failed", "⠋ agent0  p  1.0s", "… 9 more: 9 running"}},
		{3, []string{"aml run 1.0s · 10 running · 0 done · 0 failed", "… 10 more: 10 running"}},
		{2, []string{"aml run 1.0s · 10 running · 0 done · 0 failed"}},
		{1, nil},
	} {
		wantLines(t, frameOf(t, lv, clk.Now(), 60, tc.rows), tc.want)
	}
}

func TestLiveTruncateWidth(t *testing.T) {
	// A long label is cut first, keeping the source and the elapsed time.
	lv, _, clk := newTestView(40, 24)
	feed(t, lv,
		agentStart("2", "a-very-long-agent-name-that-does-not-fit-at-all", "anthropic", "claude", "wf.star:1:1", 0),
	)
	clk.Set(2 * time.Second)
	got := frameOf(t, lv, clk.Now(), 40, 24)
	if want := "⠋ a-very-long-agent…  wf.star:1:1  2.0s"; got[1] != want {
		t.Errorf("long line = %q, want %q", got[1], want)
	}

	// A long source is shortened from the left so that its line and
	// column stay visible.
	lv2, _, clk2 := newTestView(50, 24)
	feed(t, lv2, agentStart("2", "writer", "openai", "", "/home/someone/projects/deep/tree/workflow.star:42:7", 0))
	clk2.Set(3 * time.Second)
	got = frameOf(t, lv2, clk2.Now(), 50, 24)
	if want := "⠋ writer  openai  …/tree/workflow.star:42:7  3.0s"; got[1] != want {
		t.Errorf("long source line = %q, want %q", got[1], want)
	}
	// Narrower still, the source keeps liveMinSource columns; narrower
	// than that, the source column goes before the label is cut.
	if got, want := frameOf(t, lv2, clk2.Now(), 37, 24)[1], "⠋ writer  openai  …w.star:42:7  3.0s"; got != want {
		t.Errorf("narrow line = %q, want %q", got, want)
	}
	if got, want := frameOf(t, lv2, clk2.Now(), 36, 24)[1], "⠋ writer  openai  3.0s"; got != want {
		t.Errorf("narrower line = %q, want %q", got, want)
	}
	if got, want := frameOf(t, lv2, clk2.Now(), 14, 24)[1], "⠋ writ…  3.0s"; got != want {
		t.Errorf("narrowest line = %q, want %q", got, want)
	}

	// Wide runes count two columns; control characters are neutralised
	// (frameOf fails on any escape sequence but SGR).
	lv3, _, _ := newTestView(20, 24)
	feed(t, lv3, agentStart("2", "評価者評価者評価者評価者", "p\x1b[2J", "", "wf.star:1:1", 0))
	for _, cols := range []int{20, 21, 40, 80} {
		frameOf(t, lv3, liveT0, cols, 24)
	}
	if got, want := frameOf(t, lv3, liveT0, 80, 24)[1], "⠋ 評価者評価者評価者評価者  p [2J  wf.star:1:1  0.0s"; got != want {
		t.Errorf("wide line = %q, want %q", got, want)
	}
}

func TestLiveDefaultSize(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: liveT0}
	lv := New(&buf, Options{Now: clk.Now, Interval: time.Hour})
	cols, rows := lv.size()
	if cols != 80 || rows != 24 {
		t.Fatalf("default size %dx%d, want 80x24", cols, rows)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cols, rows := New(f, Options{}).size(); cols != 80 || rows != 24 {
		t.Fatalf("size of a regular file %dx%d, want 80x24", cols, rows)
	}
}

func TestLiveSuspendAndWriter(t *testing.T) {
	lv, buf, clk := newTestView(80, 24)
	lv.Start()
	defer lv.Stop()
	feed(t, lv, agentStart("2", "a", "p", "m", "wf.star:1:1", 0))
	clk.Set(time.Second)
	draw(lv)
	block := []string{
		"aml run 1.0s · 1 running · 0 done · 0 failed",
		"⠋ a  p  m  wf.star:1:1  1.0s",
	}
	wantLines(t, screenOf(t, buf.String()), block)

	lv.Suspend(func() { buf.WriteString("INFO first\n") })
	wantLines(t, screenOf(t, buf.String()), append([]string{"INFO first"}, block...))

	w := lv.Writer(buf)
	if n, err := io.WriteString(w, "INFO second\n"); err != nil || n != len("INFO second\n") {
		t.Fatalf("Writer.Write = %d, %v", n, err)
	}
	wantLines(t, screenOf(t, buf.String()), append([]string{"INFO first", "INFO second"}, block...))

	// A failing underlying writer's error comes back to the logger.
	boom := errors.New("boom")
	if _, err := lv.Writer(failWriter{boom}).Write([]byte("x")); !errors.Is(err, boom) {
		t.Fatalf("Writer error = %v, want boom", err)
	}

	// While paused nothing is drawn; Resume redraws at once.
	lv.Pause()
	wantLines(t, screenOf(t, buf.String()), []string{"INFO first", "INFO second"})
	n := buf.Len()
	lv.mu.Lock()
	paused := lv.paused
	lv.mu.Unlock()
	if paused != 1 {
		t.Fatalf("paused = %d", paused)
	}
	lv.Suspend(func() { buf.WriteString("INFO third\n") })
	if got := buf.String()[n:]; got != "INFO third\n" {
		t.Fatalf("Suspend while paused wrote %q", got)
	}
	lv.Resume()
	wantLines(t, screenOf(t, buf.String()), append([]string{"INFO first", "INFO second", "INFO third"}, block...))

	lv.Stop()
	wantLines(t, screenOf(t, buf.String()), []string{"INFO first", "INFO second", "INFO third"})
}

func TestLiveNilView(t *testing.T) {
	var lv *View
	var buf bytes.Buffer
	lv.Start()
	if err := lv.HandleTrace(agentStart("2", "a", "p", "", "", 0)); err != nil {
		t.Fatal(err)
	}
	lv.Pause()
	lv.Resume()
	ran := false
	lv.Suspend(func() { ran = true })
	if w := lv.Writer(&buf); w != io.Writer(&buf) {
		t.Errorf("nil view's Writer = %T, want the writer itself", w)
	}
	lv.Stop()
	if !ran {
		t.Error("nil view's Suspend did not run f")
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestLiveBrokenWriter(t *testing.T) {
	clk := &fakeClock{t: liveT0}
	lv := New(failWriter{errors.New("EIO")}, Options{Now: clk.Now, Size: func() (int, int) { return 80, 24 }, Interval: time.Hour})
	lv.Start()
	draw(lv)
	draw(lv)
	lv.Stop()
	if lv.drawn != 0 || !lv.broken {
		t.Fatalf("drawn=%d broken=%v after a failed write", lv.drawn, lv.broken)
	}
}

func TestLiveFormatElapsed(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0.0s"},
		{0, "0.0s"},
		{99 * time.Millisecond, "0.0s"},
		{1250 * time.Millisecond, "1.2s"},
		{59999 * time.Millisecond, "59.9s"},
		{time.Minute, "1m00s"},
		{3*time.Minute + 7*time.Second, "3m07s"},
		{time.Hour + 5*time.Minute + 30*time.Second, "1h05m"},
		{26 * time.Hour, "26h00m"},
	} {
		if got := formatElapsed(tc.d); got != tc.want {
			t.Errorf("formatElapsed(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLiveConcurrent drives the view from a dispatcher goroutine, a
// logger goroutine and the real ticker at once; run it with -race.
func TestLiveConcurrent(t *testing.T) {
	var out syncBuffer
	lv := New(&out, Options{Size: func() (int, int) { return 80, 12 }})
	lv.Start()
	lv.Start()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			id := strconv.Itoa(i + 2)
			start := eval.Event{Type: eval.SpanStart, RunID: "r", SpanID: id, Kind: "agent", Name: "Agent",
				Timestamp: time.Now().UnixMilli(), Attributes: map[string]any{"provider": "p"}}
			_ = lv.HandleTrace(start)
			_ = lv.HandleTrace(sessionStart(start))
			if i%3 == 0 {
				_ = lv.HandleTrace(eval.Event{Type: eval.SpanEnd, RunID: "r", SpanID: id, Kind: "agent", Name: "Agent", Status: eval.StatusOK})
			}
			time.Sleep(time.Millisecond) // the stimulus: spans arrive spread over the frames
		}
	}()
	go func() {
		defer wg.Done()
		w := lv.Writer(&out)
		for i := 0; i < 50; i++ {
			fmt.Fprintf(w, "log %d\n", i)
			if i%10 == 0 {
				lv.Pause()
				lv.Resume()
			}
			time.Sleep(4 * time.Millisecond) // the stimulus: log lines interleave with the frames
		}
	}()
	wg.Wait()
	waitFor(t, &out, "133 running")
	done := make(chan struct{})
	go func() { lv.Stop(); close(done) }()
	lv.Stop()
	<-done

	var s vscreen
	if err := s.feed(out.String()); err != nil {
		t.Fatal(err)
	}
	got := s.screen()
	if len(got) != 50 {
		t.Fatalf("after Stop the screen has %d lines, want the 50 log lines:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, l := range got {
		if l != "log "+strconv.Itoa(i) {
			t.Fatalf("line %d = %q", i, l)
		}
	}
}

// waitFor waits until out contains s: a frame is drawn within one
// interval, but a loaded machine may delay the ticker, so the bound is
// generous.
func waitFor(t *testing.T, out *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no frame with %q was drawn:\n%q", s, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLivePTY draws on a real pseudo-terminal of 80x10 and reads what the
// terminal received from the master side.
func TestLivePTY(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: cannot open a pseudo-terminal on this machine (%v)", err)
	}
	defer ptmx.Close()
	ttyClosed := false
	defer func() {
		if !ttyClosed {
			tty.Close()
		}
	}()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 10, Cols: 80}); err != nil {
		t.Fatalf("Setsize: %v", err)
	}

	if !isTerminal(tty) {
		t.Errorf("isTerminal(tty) = false, want true")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "regular"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Errorf("isTerminal(regular file) = true")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if isTerminal(pr) || isTerminal(pw) {
		t.Errorf("isTerminal(pipe) = true")
	}
	if isTerminal(nil) {
		t.Errorf("isTerminal(nil) = true")
	}

	// Read the master side concurrently so the terminal never blocks.
	var received syncBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&received, ptmx) // ends with EIO once the tty side is closed
	}()

	// The real ticker draws; the fake clock decides what: a frame at 1 s,
	// then one at 2 s drawn over it (a frame at 0 s may come first).
	clk := &fakeClock{t: liveT0}
	lv := New(tty, Options{Now: clk.Now, Getenv: testEnv("xterm-256color", "")})
	if cols, rows := lv.size(); cols != 80 || rows != 10 {
		t.Errorf("size from the tty = %dx%d, want 80x10", cols, rows)
	}
	feed(t, lv, agentStart("2", "reviewer", "anthropic", "claude-sonnet", "wf.star:12:5", 0))
	for i := 0; i < 12; i++ {
		feed(t, lv, agentStart(strconv.Itoa(i+3), "", "openai", "", "wf.star:20:3", 0))
	}
	lv.Start()
	clk.Set(time.Second)
	waitFor(t, &received, "aml run 1.0s")
	clk.Set(2 * time.Second)
	waitFor(t, &received, "aml run 2.0s")
	lv.Stop()
	lv.Stop()
	tty.Close()
	ttyClosed = true

	select {
	case <-read:
	case <-time.After(time.Minute):
		t.Fatal("timed out reading the pseudo-terminal")
	}
	out := received.String()
	plain := sgrRE.ReplaceAllString(out, "")
	for _, want := range []string{
		"aml run ",
		"aml run 1.0s · 13 running · 0 done · 0 failed",
		"aml run 2.0s · 13 running · 0 done · 0 failed",
		"\r\x1b[9A", // a frame is drawn over the previous one
		"reviewer  anthropic  claude-sonnet  wf.star:12:5",
		"agent     openai",
		"… 6 more: 6 running", // 10 rows: header, 7 agents, the summary, cursor row
		"\x1b[2K",
		"\x1b[1A\x1b[2K",
	} {
		if !strings.Contains(plain, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	if !strings.Contains(out, sgrCyan+"⠋"+sgrReset) {
		t.Errorf("no coloured spinner on the terminal: %q", out)
	}
	if !strings.HasSuffix(out, "\x1b[1A\x1b[2K") {
		t.Errorf("terminal output does not end with the erase sequence: %q", out)
	}
	var s vscreen
	if err := s.feed(out); err != nil {
		t.Fatalf("replaying the terminal output: %v", err)
	}
	if got := s.screen(); len(got) != 0 {
		t.Errorf("screen after Stop is not clean:\n%s", strings.Join(got, "\n"))
	}
	if s.maxRow > 9 {
		t.Errorf("cursor reached row %d of a 10-row terminal", s.maxRow)
	}
}
