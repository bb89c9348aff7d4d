// Package liveview draws the live view, a status block that "aml run"
// keeps at the bottom of an interactive stderr while a workflow runs: a
// header with the run's elapsed time and the counts of its agent
// sessions, scripts and tool calls by state, then the run's span tree,
// one line per node, each with its status mark, label, source position
// and elapsed time (live while it runs, final once it ended):
//
//	aml run 9.3s · 2 running · 2 queued · 3 done · 1 failed
//	⠸ Review                                          review.star:3:1   9.3s
//	├─ ✓ planner  anthropic  claude-sonnet            review.star:5:10  3.1s
//	└─ ⠸ workspace  local  ws-1                       review.star:6:5   6.2s
//	   └─ ⠸ sandbox  docker  read-write               review.star:7:9   6.1s
//	      ├─ ⠸ parallel                               review.star:8:13  6.0s
//	      │  ├─ ⠸ security  anthropic  claude-sonnet  review.star:14:9  6.0s
//	      │  │  └─ ⠸ tool search                      tools.star:30:1   0.4s
//	      │  ├─ ✗ style     openai     gpt-5          review.star:14:9  1.2s
//	      │  ├─ · tests     anthropic  claude-sonnet  review.star:14:9  6.0s
//	      │  ├─ · docs      openai     gpt-5          review.star:14:9  6.0s
//	      │  └─ ✓ lint      anthropic  claude-sonnet  review.star:14:9  2.5s
//	      └─ ✓ script  sandbox                        review.star:9:9   0.5s
//
// The marks are a spinner for running nodes, "·" for queued ones (agents
// waiting for a scheduler slot, max_concurrent_agents), "✓" for done and
// "✗" for failed ones. Nodes are components, parallel fan-outs (their
// children are the branches), with_trace_span spans, sandboxes,
// workspaces, agents (name, provider, model), scripts and tools; an
// agent's sessions and turns, System and file spans fold into the node
// above them.
//
// The block never has more lines than the terminal has rows (minus the
// line the cursor rests on) nor lines wider than the terminal (counting
// wide runes as two columns). When the tree does not fit, lines go first
// to running nodes (whose ancestors are running too), then failed ones,
// then queued ones, then done ones (the latest first), the shallower
// before the deeper; the siblings left out are counted on a summary line
// ("… 9,996 more: 4 queued, 2 failed, 9,990 done"), which for done ones
// alone is drawn only when a line is left for it. A finished node is one
// line: its subtree is collapsed, except that a failed node keeps its
// failed children, so that the cause stays in view. On a narrow terminal
// the label gives way first, then the source (cut from the left, keeping
// line and column); the header and summaries fall back to marks
// ("aml run 1m40s  ⠋ 4  · 4  ✓ 9,990  ✗ 2").
//
// Status marks are coloured, guides, summaries and done lines dimmed,
// unless NO_COLOR is set to a non-empty value or TERM names a terminal
// without colours (see liveColor); without colours the view writes no
// SGR sequence at all, only the cursor movement of the redraw.
//
// It is a trace sink: HandleTrace only updates its state, and a ticker
// goroutine redraws the block in place at most every liveInterval.
//
// Anything else written to the same terminal while the block is shown
// (log lines, print()) must go through Suspend, Pause/Resume or the writer
// returned by Writer, so that the block is erased first and redrawn below
// the new output. Stop erases the block for good; call it before printing
// the run's result.
//
// Wiring in aml run, only when Want(stderr) and none of --trace,
// --capture-content, --quiet and --json is given; logger (and any logger
// derived from it) must write through lv.Writer so log lines do not
// interleave with the block. A nil *View is valid and inert, so the
// disabled case needs no checks:
//
//	var lv *liveview.View
//	if fd, ok := stderr.(*os.File); ok && liveview.Want(fd, os.Getenv) && !f.trace && !f.quiet && !f.json {
//		lv = liveview.New(stderr, liveview.Options{})
//		logger.SetOutput(lv.Writer(stderr)) // before logger.WithPrefix
//		opts.Trace = append(opts.Trace, lv)
//	}
//	lv.Start() // just before rt.Evaluate
//	defer lv.Stop()
//
// and lv.Stop() again (it is idempotent) once the run's outcome is known,
// before the result or the error is printed. On a terminal with
// TERM=dumb, or when stderr is not a terminal, there is no view: only
// the plain log lines are written.
//
// Wrapping the logger's writer hides the terminal from its color
// detection; keep colors with
// logger.SetColorProfile(lipgloss.NewRenderer(os.Stderr).ColorProfile()).
package liveview

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"

	"github.com/aml-go/aml/eval"
)

// liveInterval is the redraw period, and the shortest one allowed.
const liveInterval = 100 * time.Millisecond

// liveDefaultCols and liveDefaultRows are the terminal size assumed when
// it cannot be queried.
const (
	liveDefaultCols = 80
	liveDefaultRows = 24
)

// liveKeepDone is how many done children of one node the view keeps to
// draw (the most recent); older ones are only counted. It bounds the
// memory of long runs: a node keeps its open and failed children, up to
// twice liveKeepDone done ones, and a done node keeps none.
const liveKeepDone = 256

// liveMinSource and liveMinLabel bound how far the source and label
// columns shrink on a narrow terminal before the source column is
// dropped.
const (
	liveMinSource = 12
	liveMinLabel  = 16
)

// ANSI control sequences used to redraw in place.
const (
	ansiClearLine = "\x1b[2K" // erase the whole current line
	ansiUp1       = "\x1b[1A" // cursor up one line
	ansiClearDown = "\x1b[J"  // erase from the cursor to the end of the screen
)

// SGR sequences used when colours are on.
const (
	sgrReset = "\x1b[0m"
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
	sgrGreen = "\x1b[32m"
	sgrCyan  = "\x1b[36m"
)

// liveSpinner holds the spinner frames; the frame advances every
// liveInterval of run time.
var liveSpinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Options configures a View. The zero value is the production
// setup.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Size returns the terminal's columns and rows. Nil means querying
	// the writer's file descriptor with term.GetSize when the writer has
	// one, falling back to 80x24.
	Size func() (cols, rows int)
	// Interval is the redraw period; zero or anything below liveInterval
	// means liveInterval.
	Interval time.Duration
	// Getenv reads NO_COLOR and TERM to decide on colours (liveColor);
	// nil means os.Getenv.
	Getenv func(string) string
}

// liveState is a node's status; the values index per-status counts.
type liveState uint8

const (
	liveRunning liveState = iota
	liveQueued
	liveDone
	liveFailed
	liveStates
)

var liveStateNames = [liveStates]string{"running", "queued", "done", "failed"}

func (s liveState) open() bool { return s == liveRunning || s == liveQueued }

// liveKey identifies a span across runs.
type liveKey struct{ run, span string }

// liveNode is one node of the tree.
type liveNode struct {
	parent   *liveNode
	children []*liveNode // in start order, less the done ones dropped
	label    string      // name and details, sanitized (not for agents)
	// fields are an agent's name, provider and model, sanitized; they
	// are aligned with those of its siblings when drawn.
	fields   [3]string
	source   string
	started  time.Time // for an agent, when its session started
	ended    time.Time
	depth    int // 0 for the top-level nodes, -1 for the root
	state    liveState
	agent    bool
	work     bool            // an agent session, a script or a tool call: the header counts it
	counts   [liveStates]int // children by state, dropped ones included
	keptDone int             // done children still in children

	// Scratch of the frame being laid out.
	sel   bool
	extra bool              // draws its optional summary
	shown [liveStates]int32 // selected children by state
}

func (n *liveNode) total() int {
	return n.counts[liveRunning] + n.counts[liveQueued] + n.counts[liveDone] + n.counts[liveFailed]
}

func (n *liveNode) shownTotal() int {
	return sumShown(n.shown)
}

func sumShown(s [liveStates]int32) int {
	return int(s[liveRunning] + s[liveQueued] + s[liveDone] + s[liveFailed])
}

// liveRow is one line of the tree below the header: a node, or (node
// nil) the summary of the children of parent left out.
type liveRow struct {
	depth  int
	node   *liveNode
	parent *liveNode
	guides string
}

// View is the live status block. It implements eval.TraceSink and is
// safe for concurrent use. All methods accept a nil receiver, which does
// nothing (Suspend still runs f; Writer returns w itself).
type View struct {
	w        io.Writer
	now      func() time.Time
	size     func() (int, int)
	interval time.Duration
	color    bool

	mu      sync.Mutex
	started time.Time
	root    *liveNode
	nodes   map[liveKey]*liveNode // open nodes
	folded  map[liveKey]*liveNode // open spans drawn as the node above them
	agents  [liveStates]int       // agent sessions, scripts and tool calls by state
	spent   eval.Usage            // what the finished sessions spent
	drawn   int                   // lines of the block currently on the terminal
	last    string
	paused  int
	running bool // the ticker goroutine was started
	stopped bool
	broken  bool // a write failed: draw nothing more

	// Scratch of frameLocked, kept between frames.
	selected []*liveNode
	cands    [liveStates][]*liveNode
	sorted   []*liveNode
	byDepth  []int
	chain    []*liveNode
	rows     []liveRow
	more     []bool

	stop chan struct{}
	done chan struct{}
}

var _ eval.TraceSink = (*View)(nil)

// New returns a live view drawing on w. It draws nothing until
// Start.
func New(w io.Writer, opts Options) *View {
	lv := &View{
		w:        w,
		now:      opts.Now,
		size:     opts.Size,
		interval: opts.Interval,
		root:     &liveNode{depth: -1},
		nodes:    map[liveKey]*liveNode{},
		folded:   map[liveKey]*liveNode{},
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if lv.now == nil {
		lv.now = time.Now
	}
	if lv.interval < liveInterval {
		lv.interval = liveInterval
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	lv.color = liveColor(getenv)
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

// Want reports whether the live view may draw on f: f must be a
// terminal that understands cursor movement, so not one whose TERM is
// "dumb" (Emacs shells, some CI consoles), where the escape sequences
// would show as garbage.
func Want(f *os.File, getenv func(string) string) bool {
	return isTerminal(f) && getenv("TERM") != "dumb"
}

// liveColor reports whether the view may colour what it draws: NO_COLOR
// (https://no-color.org) is unset or empty, and TERM names a terminal
// with colours, that is it is set and is neither "dumb" nor a VT-family
// ("vt100", "vt220", ...) nor a monochrome ("*-m", "*-mono") entry.
func liveColor(getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	t := getenv("TERM")
	switch {
	case t == "", t == "dumb", strings.HasPrefix(t, "vt"), strings.HasSuffix(t, "-m"), strings.HasSuffix(t, "-mono"):
		return false
	}
	return true
}

// HandleTrace implements eval.TraceSink. It records span starts and ends
// in the tree; it never writes to the terminal.
func (lv *View) HandleTrace(e eval.Event) error {
	if lv == nil || e.Type != eval.SpanStart && e.Type != eval.SpanEnd {
		return nil
	}
	key := liveKey{e.RunID, e.SpanID}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if e.Type == eval.SpanStart {
		lv.startLocked(key, e)
	} else {
		lv.endLocked(key, e)
	}
	return nil
}

// stamp is the event's time, or now for an event without one.
func (lv *View) stamp(e eval.Event) time.Time {
	if e.Timestamp > 0 {
		return time.UnixMilli(e.Timestamp)
	}
	return lv.now()
}

func (lv *View) startLocked(key liveKey, e eval.Event) {
	if lv.nodes[key] != nil || lv.folded[key] != nil {
		return
	}
	pkey := liveKey{e.RunID, e.ParentSpanID}
	parent := lv.nodes[pkey]
	if parent == nil {
		parent = lv.folded[pkey]
	}
	if parent == nil {
		parent = lv.root
	}
	at := lv.stamp(e)
	switch {
	case e.Kind == "evaluation":
		lv.folded[key] = lv.root
		return
	case e.Kind == "system", e.Kind == "file":
		lv.folded[key] = parent
		return
	case e.Kind == "agent" && e.Name != "Agent":
		// agent.session, agent.turn, agent.cleanup. The session starts
		// once the agent holds a scheduler slot.
		if e.Name == "agent.session" && parent.agent && parent.state == liveQueued {
			parent.started = at
			lv.setState(parent, liveRunning)
		}
		lv.folded[key] = parent
		return
	}
	n := &liveNode{parent: parent, started: at, depth: parent.depth + 1, state: liveRunning, source: attrString(e.Attributes, "aml.source")}
	a := e.Attributes
	switch e.Kind {
	case "agent":
		n.agent = true
		n.state = liveQueued
		name := attrString(a, "agent.name")
		if name == "" {
			name = "agent"
		}
		n.fields = [3]string{name, attrString(a, "provider"), attrString(a, "model")}
	case "component":
		n.label = sanitize(e.Name)
		if e.Name == "Parallel" {
			n.label = "parallel"
		}
	case "sandbox":
		n.label = joinLabel("sandbox", attrString(a, "provider"), attrString(a, "access"))
	case "workspace":
		n.label = joinLabel("workspace", attrString(a, "provider"), attrString(a, "workspace.id"))
	case "script":
		n.label = joinLabel("script", attrString(a, "environment"))
	case "tool":
		n.label = "tool " + sanitize(e.Name)
	default:
		// with_trace_span names (kind "application") and kinds this view
		// does not know.
		n.label = sanitize(e.Name)
		if n.label == "" {
			n.label = sanitize(e.Kind)
		}
	}
	n.work = n.agent || e.Kind == "script" || e.Kind == "tool"
	parent.children = append(parent.children, n)
	parent.counts[n.state]++
	if n.work {
		lv.agents[n.state]++
	}
	lv.nodes[key] = n
}

func (lv *View) endLocked(key liveKey, e eval.Event) {
	n := lv.nodes[key]
	if n == nil {
		delete(lv.folded, key)
		return
	}
	delete(lv.nodes, key)
	n.ended = lv.stamp(e)
	if n.agent {
		// What the session spent (its span's GenAI attributes).
		lv.spent = lv.spent.Add(eval.Usage{InputTokens: attrInt(e.Attributes, "gen_ai.usage.input_tokens"),
			OutputTokens: attrInt(e.Attributes, "gen_ai.usage.output_tokens"), CostUSD: attrFloat(e.Attributes, "aml.cost_usd")})
	}
	s := liveDone
	if e.Status == eval.StatusError {
		s = liveFailed
	}
	lv.setState(n, s)
	// Collapse: a done node keeps no children, a failed one its failed
	// ones; open children (a parent that ended first) stay.
	kept := n.children[:0]
	for _, c := range n.children {
		if c.state.open() || s == liveFailed && c.state == liveFailed {
			kept = append(kept, c)
		}
	}
	clear(n.children[len(kept):])
	n.children = kept
	n.keptDone = 0
	if p := n.parent; s == liveDone {
		p.keptDone++
		if p.keptDone >= 2*liveKeepDone {
			dropDone(p)
		}
	}
}

// dropDone removes all but the liveKeepDone most recent done children of
// p; they stay counted.
func dropDone(p *liveNode) {
	skip := p.keptDone - liveKeepDone
	kept := p.children[:0]
	for _, c := range p.children {
		if c.state == liveDone && skip > 0 {
			skip--
			continue
		}
		kept = append(kept, c)
	}
	clear(p.children[len(kept):])
	p.children = kept
	p.keptDone = liveKeepDone
}

// setState moves n to state s, keeping the counts right.
func (lv *View) setState(n *liveNode, s liveState) {
	n.parent.counts[n.state]--
	n.parent.counts[s]++
	if n.work {
		lv.agents[n.state]--
		lv.agents[s]++
	}
	n.state = s
}

// attrString returns attribute k when it is a string, sanitized.
// attrInt and attrFloat read a numeric attribute, or 0.
func attrInt(m map[string]any, k string) int64 {
	switch v := m[k].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	return 0
}

func attrFloat(m map[string]any, k string) float64 {
	switch v := m[k].(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	}
	return 0
}

func attrString(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return sanitize(s)
}

// sanitize replaces control characters so that s cannot move the cursor.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// joinLabel joins the non-empty parts with two spaces.
func joinLabel(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("  ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// Start resets the run clock and starts the ticker that redraws the
// block. It is a no-op after the first call or after Stop.
func (lv *View) Start() {
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

func (lv *View) loop() {
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
func (lv *View) Stop() {
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
func (lv *View) Pause() {
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
func (lv *View) Resume() {
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
func (lv *View) Suspend(f func()) {
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
func (lv *View) Writer(w io.Writer) io.Writer {
	if lv == nil {
		return w
	}
	return &liveWriter{lv: lv, w: w}
}

type liveWriter struct {
	lv *View
	w  io.Writer
}

func (lw *liveWriter) Write(p []byte) (n int, err error) {
	lw.lv.Suspend(func() { n, err = lw.w.Write(p) })
	return n, err
}

// eraseLocked removes the block from the terminal: for each drawn line,
// cursor up and clear the line.
func (lv *View) eraseLocked() {
	if lv.drawn == 0 {
		return
	}
	lv.write("\r" + strings.Repeat(ansiUp1+ansiClearLine, lv.drawn))
	lv.drawn = 0
	lv.last = ""
}

// redrawLocked draws the current frame over the previous one, unless the
// view is not started, paused, stopped or broken.
func (lv *View) redrawLocked() {
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
	b.Grow(len(frame) + len(lines)*8 + 16)
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
func (lv *View) write(s string) {
	if lv.broken {
		return
	}
	if _, err := io.WriteString(lv.w, s); err != nil {
		lv.broken = true
		lv.drawn = 0
	}
}

// frameLocked returns the block's lines for a terminal of cols x rows at
// time now: the header, then the tree as selectLocked chose it. The
// block has at most rows-1 lines (the cursor rests on the line below it)
// and every line is narrower than cols, so that it never wraps.
func (lv *View) frameLocked(now time.Time, cols, rows int) []string {
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
	width := max(cols-1, 1)
	run := now.Sub(lv.started)
	spinner := liveSpinner[int(run/liveInterval)%len(liveSpinner)]
	lines := make([]string, 1, maxLines)
	lines[0] = lv.header(run, spinner, width)

	rowsOut := lv.selectLocked(maxLines - 1)
	if len(rowsOut) == 0 {
		return lines
	}

	// Columns: guides, mark and label; source; elapsed, right-aligned.
	// They shrink, the source first, to fit width. The marks take one
	// column, or two where East Asian ambiguous runes are wide.
	const gap = 2
	markW := max(textWidth(spinner), textWidth("·"), textWidth("✓"), textWidth("✗"))
	var labelW, srcW, elapsedW int
	elapsed := make([]string, len(rowsOut))
	labels := lv.labels(rowsOut)
	for i, r := range rowsOut {
		if r.node == nil {
			continue
		}
		elapsed[i] = formatElapsed(r.node.elapsed(now))
		labelW = max(labelW, textWidth(r.guides)+markW+1+textWidth(labels[i]))
		srcW = max(srcW, textWidth(r.node.source))
		elapsedW = max(elapsedW, len(elapsed[i]))
	}
	avail := width - gap - elapsedW
	srcCol := srcW
	if srcCol > 0 {
		if labelW+gap+srcCol > avail {
			srcCol = max(avail-gap-labelW, min(srcW, liveMinSource))
		}
		if avail-gap-srcCol < min(labelW, liveMinLabel) {
			srcCol = 0
		}
	}
	labelCol := avail
	if srcCol > 0 {
		labelCol -= gap + srcCol
	}
	labelCol = min(labelCol, labelW)

	var b strings.Builder
	for i, r := range rowsOut {
		b.Reset()
		gw := textWidth(r.guides)
		if r.node == nil {
			if width-gw < 2 {
				lines = append(lines, fitWidth(r.guides+lv.summary(r.parent, spinner, width), width))
				continue
			}
			lv.paint(&b, sgrDim, r.guides)
			lv.paint(&b, sgrDim, lv.summary(r.parent, spinner, width-gw))
			lines = append(lines, b.String())
			continue
		}
		n := r.node
		m := mark(n.state, spinner)
		room := labelCol - gw - markW - 1
		if room < 1 {
			// Too narrow for the columns: one truncated plain line.
			lines = append(lines, fitWidth(r.guides+m+" "+labels[i]+"  "+elapsed[i], width))
			continue
		}
		rest := strings.Repeat(" ", markW-textWidth(m)+1) + padRight(fitWidth(labels[i], room), room)
		if srcCol > 0 {
			rest += "  " + padRight(fitLeft(n.source, srcCol), srcCol)
		}
		rest += "  " + strings.Repeat(" ", elapsedW-len(elapsed[i])) + elapsed[i]
		lv.paint(&b, sgrDim, r.guides)
		switch n.state {
		case liveRunning:
			lv.paint(&b, sgrCyan, m)
			b.WriteString(rest)
		case liveQueued:
			lv.paint(&b, sgrDim, m)
			b.WriteString(rest)
		case liveDone:
			lv.paint(&b, sgrGreen, m)
			lv.paint(&b, sgrDim, rest)
		case liveFailed:
			lv.paint(&b, sgrRed, m)
			b.WriteString(rest)
		}
		lines = append(lines, b.String())
	}
	return lines
}

// header is the first line: the run's elapsed time and the steps that
// do its work (agent sessions, scripts, tool calls) by state, "aml run 12.4s · 2 running · 1 queued · 3 done · 0 failed",
// with what the finished sessions spent when that fits ("· 12,345
// tokens, $0.42"), or
// when that does not fit width, "aml run 12.4s  ⠹ 2  · 1  ✓ 3  ✗ 0".
func (lv *View) header(run time.Duration, spinner string, width int) string {
	a := lv.agents
	h := "aml run " + formatElapsed(run) + " · " + formatCount(a[liveRunning]) + " running"
	if a[liveQueued] > 0 {
		h += " · " + formatCount(a[liveQueued]) + " queued"
	}
	h += " · " + formatCount(a[liveDone]) + " done · " + formatCount(a[liveFailed]) + " failed"
	spend := ""
	if lv.spent.Tokens() > 0 || lv.spent.CostUSD > 0 {
		spend = " · " + lv.spent.String()
	}
	if textWidth(h+spend) <= width {
		return h + spend
	}
	if textWidth(h) <= width {
		return h
	}
	h = "aml run " + formatElapsed(run) + "  " + spinner + " " + formatCount(a[liveRunning])
	if a[liveQueued] > 0 {
		h += "  · " + formatCount(a[liveQueued])
	}
	h += "  ✓ " + formatCount(a[liveDone]) + "  ✗ " + formatCount(a[liveFailed])
	return fitWidth(h, width)
}

// labels returns the label of each node row: an agent's fields are
// aligned with those of the agents drawn beside it (the same parent).
func (lv *View) labels(rows []liveRow) []string {
	type group struct {
		parent *liveNode
		w      [3]int
	}
	var groups []group
	find := func(p *liveNode) *group {
		for i := range groups {
			if groups[i].parent == p {
				return &groups[i]
			}
		}
		groups = append(groups, group{parent: p})
		return &groups[len(groups)-1]
	}
	for _, r := range rows {
		if r.node == nil || !r.node.agent {
			continue
		}
		g := find(r.node.parent)
		for k, f := range r.node.fields {
			g.w[k] = max(g.w[k], textWidth(f))
		}
	}
	out := make([]string, len(rows))
	var b strings.Builder
	for i, r := range rows {
		switch {
		case r.node == nil:
		case !r.node.agent:
			out[i] = r.node.label
		default:
			g := find(r.node.parent)
			b.Reset()
			for k, f := range r.node.fields {
				if g.w[k] == 0 {
					continue
				}
				if k > 0 {
					b.WriteString("  ")
				}
				b.WriteString(padRight(f, g.w[k]))
			}
			out[i] = strings.TrimRight(b.String(), " ")
		}
	}
	return out
}

// mark is the status mark of a node in state s.
func mark(s liveState, spinner string) string {
	switch s {
	case liveRunning:
		return spinner
	case liveQueued:
		return "·"
	case liveDone:
		return "✓"
	}
	return "✗"
}

// paint writes s to b, wrapped in the SGR sequence sgr when colours are
// on.
func (lv *View) paint(b *strings.Builder, sgr, s string) {
	if s == "" {
		return
	}
	if !lv.color {
		b.WriteString(s)
		return
	}
	b.WriteString(sgr)
	b.WriteString(s)
	b.WriteString(sgrReset)
}

// elapsed is how long n has run: until now while it is open, until it
// ended otherwise.
func (n *liveNode) elapsed(now time.Time) time.Duration {
	if n.state.open() {
		return now.Sub(n.started)
	}
	return n.ended.Sub(n.started)
}

// liveSummaryOrder is the order of the counts on a summary line: done
// ones last, as they are usually the most numerous and the least telling.
var liveSummaryOrder = [liveStates]liveState{liveRunning, liveQueued, liveFailed, liveDone}

// summary is the text of the line that stands for the children of p left
// out, "… 9,996 more: 4 queued, 2 failed, 9,990 done", or when that is
// wider than width, "… 9,996 more: · 4  ✗ 2  ✓ 9,990".
func (lv *View) summary(p *liveNode, spinner string, width int) string {
	head := "… " + formatCount(p.total()-p.shownTotal()) + " more:"
	var long, short strings.Builder
	long.WriteString(head)
	short.WriteString(head)
	first := true
	for _, s := range liveSummaryOrder {
		k := p.counts[s] - int(p.shown[s])
		if k <= 0 {
			continue
		}
		if !first {
			long.WriteString(",")
			short.WriteString(" ")
		}
		first = false
		long.WriteString(" " + formatCount(k) + " " + liveStateNames[s])
		short.WriteString(" " + mark(s, spinner) + " " + formatCount(k))
	}
	if textWidth(long.String()) <= width {
		return long.String()
	}
	return fitWidth(short.String(), width)
}

// selectLocked chooses the tree's rows for a budget of lines and returns
// them in drawing order with their guides. Candidates are the top-level
// nodes, the children of open nodes and the failed children of failed
// nodes; they are taken running first, then failed, queued and done,
// each class by depth and, within a depth, in tree order (done ones
// latest first). A candidate comes with its ancestors not taken yet; it
// is skipped when the lines it costs do not fit. A node that shows some
// of its children and leaves out an open or failed one costs a summary
// line for those left out; other summaries (see summaryKind) are
// optional: drawn, while lines remain, before the done candidates are
// placed and again after.
func (lv *View) selectLocked(budget int) []liveRow {
	root := lv.root
	for _, n := range lv.selected {
		n.sel, n.extra = false, false
		n.shown = [liveStates]int32{}
	}
	lv.selected = lv.selected[:0]
	root.extra = false
	root.shown = [liveStates]int32{}
	used := 0
	if lv.summaryKind(root, root.shown) == summaryNeeded {
		used = 1
	}
	if used > budget || root.total() == 0 {
		return nil
	}
	for s := range lv.cands {
		clear(lv.cands[s]) // hold no node past its frame
		lv.cands[s] = lv.cands[s][:0]
	}
	clear(lv.sorted)
	lv.collect(root)
	place := func(s liveState) {
		for _, n := range lv.byDepthOrder(lv.cands[s], s == liveDone) {
			if d, ok := lv.cost(n); ok && used+d <= budget {
				lv.take(n)
				used += d
			}
		}
	}
	extras := func() {
		for _, n := range append(lv.selected, root) {
			if used >= budget {
				break
			}
			if !n.extra && lv.summaryKind(n, n.shown) == summaryOptional {
				n.extra = true
				used++
			}
		}
	}
	place(liveRunning)
	place(liveFailed)
	place(liveQueued)
	extras()
	place(liveDone)
	extras()
	lv.rows = lv.appendRows(lv.rows[:0], root)
	lv.setGuides(lv.rows)
	return lv.rows
}

// collect appends the candidates below p to lv.cands, in tree order.
func (lv *View) collect(p *liveNode) {
	for _, c := range p.children {
		if p != lv.root && p.state == liveFailed && c.state != liveFailed {
			continue
		}
		lv.cands[c.state] = append(lv.cands[c.state], c)
		if c.state.open() || c.state == liveFailed {
			lv.collect(c)
		}
	}
}

// byDepthOrder returns list stably sorted by depth (a counting sort),
// reversed within a depth when latestFirst.
func (lv *View) byDepthOrder(list []*liveNode, latestFirst bool) []*liveNode {
	if len(list) == 0 {
		return nil
	}
	maxDepth := 0
	for _, n := range list {
		maxDepth = max(maxDepth, n.depth)
	}
	if cap(lv.byDepth) < maxDepth+2 {
		lv.byDepth = make([]int, maxDepth+2)
	}
	start := lv.byDepth[:maxDepth+2]
	clear(start)
	for _, n := range list {
		start[n.depth+1]++
	}
	for d := 1; d < len(start); d++ {
		start[d] += start[d-1]
	}
	if cap(lv.sorted) < len(list) {
		lv.sorted = make([]*liveNode, len(list))
	}
	out := lv.sorted[:len(list)]
	if latestFirst {
		// Fill each depth from its end, walking the list forwards.
		for _, n := range list {
			start[n.depth+1]--
			out[start[n.depth+1]] = n
		}
	} else {
		for _, n := range list {
			out[start[n.depth]] = n
			start[n.depth]++
		}
	}
	return out
}

// Kinds of summary line a node needs.
const (
	summaryNone     = iota
	summaryOptional // drawn only when a line is left for it
	summaryNeeded
)

// summaryKind tells the summary line c needs when shown of its children
// (by state) are drawn: none when it leaves none out; needed when it
// shows some and leaves out an open or failed one, optional when it
// leaves out only done ones. A node showing none of its children stands
// for its subtree: it needs no summary, though an open one leaving out
// open or failed children may have one. The root, showing none, needs
// one for any child left out.
func (lv *View) summaryKind(c *liveNode, shown [liveStates]int32) int {
	drawn := sumShown(shown)
	if c.total()-drawn <= 0 {
		return summaryNone
	}
	left := c.counts[liveRunning] + c.counts[liveQueued] + c.counts[liveFailed] -
		int(shown[liveRunning]+shown[liveQueued]+shown[liveFailed])
	switch {
	case c == lv.root && drawn == 0:
		return summaryNeeded
	case drawn == 0 && c.state.open() && left > 0:
		return summaryOptional
	case drawn == 0:
		return summaryNone
	case left > 0:
		return summaryNeeded
	}
	return summaryOptional
}

// cost returns how many lines taking n adds: n and its ancestors not
// taken yet, and the needed summary lines that appear or disappear. It
// reports false when n is taken already.
func (lv *View) cost(n *liveNode) (int, bool) {
	if n.sel {
		return 0, false
	}
	chain := lv.chain[:0]
	top := n
	for top != lv.root && !top.sel {
		chain = append(chain, top)
		top = top.parent
	}
	lv.chain = chain
	d := len(chain)
	for i, c := range chain {
		var shown [liveStates]int32
		if i > 0 {
			shown[chain[i-1].state] = 1
		}
		if lv.summaryKind(c, shown) == summaryNeeded {
			d++
		}
	}
	after := top.shown
	after[chain[len(chain)-1].state]++
	if lv.hasSummary(top, top.shown) {
		d--
	}
	if lv.hasSummary(top, after) || lv.grants(n, top, after) {
		d++
	}
	return d, true
}

// grants reports whether taking the done node n gives top, the taken
// node or the root it hangs from, its optional summary: done nodes are
// drawn only beside the count of their siblings left out.
func (lv *View) grants(n, top *liveNode, after [liveStates]int32) bool {
	return n.state == liveDone && !top.extra && lv.summaryKind(top, after) == summaryOptional
}

// hasSummary reports whether c, with shown of its children drawn, draws
// a summary line: a needed one, or an optional one it was given.
func (lv *View) hasSummary(c *liveNode, shown [liveStates]int32) bool {
	k := lv.summaryKind(c, shown)
	return k == summaryNeeded || k == summaryOptional && c.extra
}

// take selects n and the ancestors cost found not taken yet, and gives
// the node they hang from its optional summary when cost counted it.
func (lv *View) take(n *liveNode) {
	c := n
	for ; c != lv.root && !c.sel; c = c.parent {
		c.sel = true
		c.parent.shown[c.state]++
		lv.selected = append(lv.selected, c)
	}
	if lv.grants(n, c, c.shown) {
		c.extra = true
	}
}

// appendRows appends the rows of the taken children of p, depth first,
// and the summary of the others.
func (lv *View) appendRows(rows []liveRow, p *liveNode) []liveRow {
	left := p.shownTotal()
	for _, c := range p.children {
		if left == 0 {
			break
		}
		if !c.sel {
			continue
		}
		left--
		rows = append(rows, liveRow{depth: c.depth, node: c})
		rows = lv.appendRows(rows, c)
	}
	if lv.hasSummary(p, p.shown) {
		rows = append(rows, liveRow{depth: p.depth + 1, parent: p})
	}
	return rows
}

// setGuides sets the tree guides of rows ("├─ ", "│  ", "└─ "), walking
// them backwards: a row is the last of its siblings when no later row of
// its depth comes before one shallower.
func (lv *View) setGuides(rows []liveRow) {
	more := lv.more[:0]
	var b strings.Builder
	for i := len(rows) - 1; i >= 0; i-- {
		d := rows[i].depth
		for len(more) <= d {
			more = append(more, false)
		}
		if d > 0 {
			b.Reset()
			for k := 1; k < d; k++ {
				if more[k] {
					b.WriteString("│  ")
				} else {
					b.WriteString("   ")
				}
			}
			if more[d] {
				b.WriteString("├─ ")
			} else {
				b.WriteString("└─ ")
			}
			rows[i].guides = b.String()
		}
		more[d] = true
		clear(more[d+1:])
	}
	lv.more = more
}

// textWidth is the number of columns s takes, runewidth.StringWidth
// with a fast path for ASCII (s holds no control characters).
func textWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return runewidth.StringWidth(s)
		}
	}
	return len(s)
}

// padRight pads s with spaces to w columns.
func padRight(s string, w int) string {
	if n := textWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// fitWidth truncates s to at most width columns, ending it with "…".
func fitWidth(s string, width int) string {
	if textWidth(s) <= width {
		return s
	}
	tail := "…"
	if textWidth(tail) > width {
		tail = ""
	}
	return runewidth.Truncate(s, width, tail)
}

// fitLeft truncates s to at most width columns from the left, starting
// it with "…", so that the end of a source position (line and column)
// stays.
func fitLeft(s string, width int) string {
	w := textWidth(s)
	if w <= width {
		return s
	}
	head := "…"
	if textWidth(head) > width {
		head = ""
	}
	return runewidth.TruncateLeft(s, w-width+textWidth(head), head)
}

// formatCount renders n with thousands separators: "9,996".
func formatCount(n int) string {
	s := strconv.Itoa(n)
	if n < 1000 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
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
