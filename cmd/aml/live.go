package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"

	"github.com/aml-go/aml/eval"
)

// The live view is a status block that "aml run" keeps at the bottom of an
// interactive stderr while a workflow runs: a header with the run's
// elapsed time and agent counts, then one line per running agent.
//
//	aml run 12.4s · 2 running · 3 finished · 0 failed
//	⠹ reviewer  anthropic  claude-sonnet  review.star:14:9  8.1s
//	⠹ agent     openai                    review.star:22:5  0.6s
//
// It is a trace sink: HandleTrace only updates its state, and a ticker
// goroutine redraws the block in place at most every liveInterval. The
// block never has more lines than the terminal has rows (minus the line
// the cursor rests on) nor lines wider than the terminal.
//
// Anything else written to the same terminal while the block is shown
// (log lines, print()) must go through Suspend, Pause/Resume or the writer
// returned by Writer, so that the block is erased first and redrawn below
// the new output. Stop erases the block for good; call it before printing
// the run's result.
//
// Wiring in cmdRun, only when stderr is a terminal and none of --trace,
// --quiet and --json is given; logger (and any logger derived from it)
// must write through lv.Writer so log lines do not interleave with the
// block. A nil *liveView is valid and inert, so the disabled case needs
// no checks:
//
//	var lv *liveView
//	if isTerminal(os.Stderr) && !f.trace && !f.quiet && !f.json {
//		lv = newLiveView(stderr, liveOptions{})
//		logger.SetOutput(lv.Writer(stderr)) // before logger.WithPrefix
//		opts.Trace = append(opts.Trace, lv)
//	}
//	lv.Start() // just before rt.Evaluate
//	defer lv.Stop()
//
// and lv.Stop() again (it is idempotent) once the run's outcome is known,
// before the result or the error is printed.
//
// Wrapping the logger's writer hides the terminal from its color
// detection; keep colors with
// logger.SetColorProfile(lipgloss.NewRenderer(os.Stderr).ColorProfile()).

// liveInterval is the redraw period, and the shortest one allowed.
const liveInterval = 100 * time.Millisecond

// liveDefaultCols and liveDefaultRows are the terminal size assumed when
// it cannot be queried.
const (
	liveDefaultCols = 80
	liveDefaultRows = 24
)

// ANSI control sequences used to redraw in place.
const (
	ansiClearLine = "\x1b[2K" // erase the whole current line
	ansiUp1       = "\x1b[1A" // cursor up one line
	ansiClearDown = "\x1b[J"  // erase from the cursor to the end of the screen
)

// liveSpinner holds the spinner frames; the frame advances every
// liveInterval of run time.
var liveSpinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// liveOptions configures a liveView. The zero value is the production
// setup.
type liveOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Size returns the terminal's columns and rows. Nil means querying
	// the writer's file descriptor with term.GetSize when the writer has
	// one, falling back to 80x24.
	Size func() (cols, rows int)
	// Interval is the redraw period; zero or anything below liveInterval
	// means liveInterval.
	Interval time.Duration
}

// liveKey identifies an agent span across runs.
type liveKey struct{ run, span string }

// liveAgent is one running agent.
type liveAgent struct {
	key      liveKey
	name     string
	provider string
	model    string
	source   string
	started  time.Time
	// waiting is set until the agent's session starts, that is while it
	// waits for a scheduler slot (max_concurrent_agents).
	waiting bool
}

// liveView is the live status block. It implements eval.TraceSink and is
// safe for concurrent use. All methods accept a nil receiver, which does
// nothing (Suspend still runs f; Writer returns w itself).
type liveView struct {
	w        io.Writer
	now      func() time.Time
	size     func() (int, int)
	interval time.Duration

	mu       sync.Mutex
	started  time.Time
	agents   []*liveAgent // running agents in start order
	finished int
	failed   int
	drawn    int // lines of the block currently on the terminal
	last     string
	paused   int
	running  bool // the ticker goroutine was started
	stopped  bool
	broken   bool // a write failed: draw nothing more

	stop chan struct{}
	done chan struct{}
}

var _ eval.TraceSink = (*liveView)(nil)

// newLiveView returns a live view drawing on w. It draws nothing until
// Start.
func newLiveView(w io.Writer, opts liveOptions) *liveView {
	lv := &liveView{
		w:        w,
		now:      opts.Now,
		size:     opts.Size,
		interval: opts.Interval,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if lv.now == nil {
		lv.now = time.Now
	}
	if lv.interval < liveInterval {
		lv.interval = liveInterval
	}
	if lv.size == nil {
		lv.size = func() (int, int) { return liveDefaultCols, liveDefaultRows }
		if f, ok := w.(interface{ Fd() uintptr }); ok {
			fd := int(f.Fd())
			lv.size = func() (int, int) {
				cols, rows, err := term.GetSize(fd)
				if err != nil || cols <= 0 || rows <= 0 {
					return liveDefaultCols, liveDefaultRows
				}
				return cols, rows
			}
		}
	}
	lv.started = lv.now()
	return lv
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	return f != nil && term.IsTerminal(int(f.Fd()))
}

// wantLiveView reports whether the live view may draw on f: f must be a
// terminal that understands cursor movement, so not one whose TERM is
// "dumb" (Emacs shells, some CI consoles), where the escape sequences
// would show as garbage.
func wantLiveView(f *os.File, getenv func(string) string) bool {
	return isTerminal(f) && getenv("TERM") != "dumb"
}

// HandleTrace implements eval.TraceSink. It records agent span starts and
// ends; it never writes to the terminal.
func (lv *liveView) HandleTrace(e eval.Event) error {
	if lv == nil || e.Kind != "agent" {
		return nil
	}
	if e.Name == "agent.session" && e.Type == eval.SpanStart {
		// The session starts once the agent holds a scheduler slot.
		parent := liveKey{e.RunID, e.ParentSpanID}
		lv.mu.Lock()
		defer lv.mu.Unlock()
		for _, a := range lv.agents {
			if a.key == parent {
				a.waiting = false
				a.started = lv.now()
				if e.Timestamp > 0 {
					a.started = time.UnixMilli(e.Timestamp)
				}
			}
		}
		return nil
	}
	if e.Name != "Agent" {
		return nil
	}
	key := liveKey{e.RunID, e.SpanID}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	switch e.Type {
	case eval.SpanStart:
		a := &liveAgent{
			key:      key,
			name:     attrString(e.Attributes, "agent.name"),
			provider: attrString(e.Attributes, "provider"),
			model:    attrString(e.Attributes, "model"),
			source:   attrString(e.Attributes, "aml.source"),
			started:  lv.now(),
			waiting:  true,
		}
		if e.Timestamp > 0 {
			a.started = time.UnixMilli(e.Timestamp)
		}
		if a.name == "" {
			a.name = "agent"
		}
		lv.agents = append(lv.agents, a)
	case eval.SpanEnd:
		for i, a := range lv.agents {
			if a.key == key {
				lv.agents = append(lv.agents[:i], lv.agents[i+1:]...)
				break
			}
		}
		if e.Status == eval.StatusError {
			lv.failed++
		} else {
			lv.finished++
		}
	}
	return nil
}

// attrString returns attribute k when it is a string, with control
// characters replaced so that it cannot move the cursor.
func attrString(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// Start resets the run clock and starts the ticker that redraws the
// block. It is a no-op after the first call or after Stop.
func (lv *liveView) Start() {
	if lv == nil {
		return
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.running || lv.stopped {
		return
	}
	lv.running = true
	lv.started = lv.now()
	go lv.loop()
}

func (lv *liveView) loop() {
	defer close(lv.done)
	t := time.NewTicker(lv.interval)
	defer t.Stop()
	for {
		select {
		case <-lv.stop:
			return
		case <-t.C:
			lv.mu.Lock()
			lv.redrawLocked()
			lv.mu.Unlock()
		}
	}
}

// Stop stops the ticker and erases the block, leaving the cursor where
// the block began. It is idempotent, and safe to call without Start.
func (lv *liveView) Stop() {
	if lv == nil {
		return
	}
	lv.mu.Lock()
	if lv.stopped {
		lv.mu.Unlock()
		return
	}
	lv.stopped = true
	running := lv.running
	close(lv.stop)
	lv.mu.Unlock()
	if running {
		<-lv.done
	}
	lv.mu.Lock()
	lv.eraseLocked()
	lv.mu.Unlock()
}

// Pause erases the block and keeps it hidden until the matching Resume.
// Pauses nest.
func (lv *liveView) Pause() {
	if lv == nil {
		return
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.paused++
	lv.eraseLocked()
}

// Resume ends a Pause and, when no other pause is in effect, redraws the
// block at once.
func (lv *liveView) Resume() {
	if lv == nil {
		return
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.paused > 0 {
		lv.paused--
	}
	lv.redrawLocked()
}

// Suspend erases the block, runs f, and redraws the block below whatever
// f wrote. The view is locked while f runs: f must not call the view's
// methods, though HandleTrace calls from other goroutines merely wait.
func (lv *liveView) Suspend(f func()) {
	if lv == nil {
		f()
		return
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.eraseLocked()
	f()
	lv.redrawLocked()
}

// Writer returns a writer whose every Write to w runs under Suspend, for
// a logger that shares the terminal with the view.
func (lv *liveView) Writer(w io.Writer) io.Writer {
	if lv == nil {
		return w
	}
	return &liveWriter{lv: lv, w: w}
}

type liveWriter struct {
	lv *liveView
	w  io.Writer
}

func (lw *liveWriter) Write(p []byte) (n int, err error) {
	lw.lv.Suspend(func() { n, err = lw.w.Write(p) })
	return n, err
}

// eraseLocked removes the block from the terminal: for each drawn line,
// cursor up and clear the line.
func (lv *liveView) eraseLocked() {
	if lv.drawn == 0 {
		return
	}
	lv.write("\r" + strings.Repeat(ansiUp1+ansiClearLine, lv.drawn))
	lv.drawn = 0
	lv.last = ""
}

// redrawLocked draws the current frame over the previous one, unless the
// view is not started, paused, stopped or broken.
func (lv *liveView) redrawLocked() {
	if !lv.running || lv.paused > 0 || lv.stopped || lv.broken {
		return
	}
	cols, rows := lv.size()
	lines := lv.frameLocked(lv.now(), cols, rows)
	frame := strings.Join(lines, "\n")
	if frame == lv.last && len(lines) == lv.drawn {
		return
	}
	if len(lines) == 0 {
		lv.eraseLocked()
		return
	}
	var b strings.Builder
	if lv.drawn > 0 {
		b.WriteString("\r\x1b[")
		b.WriteString(strconv.Itoa(lv.drawn))
		b.WriteString("A")
	}
	for _, l := range lines {
		// A leading carriage return keeps the block aligned even when
		// the terminal does not translate "\n" to "\r\n".
		b.WriteString("\r")
		b.WriteString(ansiClearLine)
		b.WriteString(l)
		b.WriteString("\n")
	}
	if len(lines) < lv.drawn {
		b.WriteString("\r" + ansiClearDown)
	}
	lv.write(b.String())
	if !lv.broken {
		lv.drawn = len(lines)
		lv.last = frame
	}
}

// write sends s to the terminal in one call; after a failed write the view
// draws nothing more.
func (lv *liveView) write(s string) {
	if lv.broken {
		return
	}
	if _, err := io.WriteString(lv.w, s); err != nil {
		lv.broken = true
		lv.drawn = 0
	}
}

// frameLocked returns the block's lines for a terminal of cols x rows at
// time now: the header, the running agents in start order and, when they
// do not all fit, a "+N more" line. The block has at most rows-1 lines
// (the cursor rests on the line below it) and every line is narrower than
// cols, so that it never wraps.
func (lv *liveView) frameLocked(now time.Time, cols, rows int) []string {
	if cols <= 0 {
		cols = liveDefaultCols
	}
	if rows <= 0 {
		rows = liveDefaultRows
	}
	maxLines := rows - 1
	if maxLines < 1 {
		return nil
	}
	width := cols - 1
	if width < 1 {
		width = 1
	}
	run := now.Sub(lv.started)
	waiting := 0
	for _, a := range lv.agents {
		if a.waiting {
			waiting++
		}
	}
	header := "aml run " + formatElapsed(run) +
		" · " + strconv.Itoa(len(lv.agents)-waiting) + " running" +
		" · " + strconv.Itoa(lv.finished) + " finished" +
		" · " + strconv.Itoa(lv.failed) + " failed"
	if waiting > 0 {
		header += " · " + strconv.Itoa(waiting) + " waiting"
	}
	lines := []string{fitWidth(header, width)}

	shown := lv.agents
	more := 0
	if 1+len(shown) > maxLines {
		n := maxLines - 2 // header and "+N more"
		if n < 0 {
			n = 0
		}
		more = len(shown) - n
		shown = shown[:n]
	}
	frame := liveSpinner[int(run/liveInterval)%len(liveSpinner)]
	var wName, wProv, wModel int
	for _, a := range shown {
		wName = max(wName, runewidth.StringWidth(a.name))
		wProv = max(wProv, runewidth.StringWidth(a.provider))
		wModel = max(wModel, runewidth.StringWidth(a.model))
	}
	for _, a := range shown {
		var b strings.Builder
		if a.waiting {
			b.WriteString("·")
		} else {
			b.WriteString(frame)
		}
		b.WriteString(" ")
		b.WriteString(runewidth.FillRight(a.name, wName))
		if wProv > 0 {
			b.WriteString("  ")
			b.WriteString(runewidth.FillRight(a.provider, wProv))
		}
		if wModel > 0 {
			b.WriteString("  ")
			b.WriteString(runewidth.FillRight(a.model, wModel))
		}
		prefix := b.String()
		suffix := "  " + formatElapsed(now.Sub(a.started))
		src := ""
		if a.source != "" {
			src = "  " + a.source
			// Shorten the source from the left first, so that the
			// elapsed time stays visible.
			room := width - runewidth.StringWidth(prefix) - runewidth.StringWidth(suffix)
			if runewidth.StringWidth(src) > room {
				keep := room - 2 - runewidth.StringWidth("…")
				if keep >= 1 {
					src = "  " + runewidth.TruncateLeft(a.source, runewidth.StringWidth(a.source)-keep, "…")
				} else {
					src = ""
				}
			}
		}
		lines = append(lines, fitWidth(prefix+src+suffix, width))
	}
	if more > 0 && len(lines) < maxLines {
		lines = append(lines, fitWidth("+"+strconv.Itoa(more)+" more", width))
	}
	return lines
}

// fitWidth truncates s to at most width columns.
func fitWidth(s string, width int) string {
	if runewidth.StringWidth(s) <= width {
		return s
	}
	return runewidth.Truncate(s, width, "…")
}

// formatElapsed renders a live duration: "4.2s" below a minute, "3m07s"
// below an hour, "1h05m" above.
func formatElapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return strconv.FormatFloat(float64(d/(100*time.Millisecond))/10, 'f', 1, 64) + "s"
	case d < time.Hour:
		s := int(d / time.Second)
		return strconv.Itoa(s/60) + "m" + pad2(s%60) + "s"
	}
	m := int(d / time.Minute)
	return strconv.Itoa(m/60) + "h" + pad2(m%60) + "m"
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}
