package report

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/aml-go/aml/eval"
)

// status is a row's outcome.
type status uint8

const (
	statusOK status = iota
	statusError
	statusOpen
)

func (s status) String() string {
	switch s {
	case statusError:
		return "error"
	case statusOpen:
		return "open"
	}
	return "ok"
}

// model is everything the page shows, derived from a spanSet.
type model struct {
	title string
	// t0 is the Unix millisecond that time 0 of the rows stands for; lo
	// and hi bound every row in milliseconds after t0.
	t0     int64
	lo, hi float64
	runs   []runInfo
	// rows are the spans in tree pre-order: a row's subtree follows it.
	rows   []row
	points []rowPoint
	totals totals
	kinds  []kindStat
	// failures are the failed nodes where a failure started.
	failures []failure
	// content reports whether the trace carried content attributes.
	content bool
}

// runInfo describes one run of the trace.
type runInfo struct {
	id         string
	status     status
	durationMS float64
	root       int // row of the root span, or -1
}

type row struct {
	span       *span
	parent     int // row index, or -1
	depth      int
	start, end float64
	status     status
	label, sub string
	// session is the row of an Agent's agent.session, or -1.
	session int
}

// rowPoint is a point event placed on the time axis.
type rowPoint struct {
	row int // -1 when it belongs to no span
	t   float64
	p   *point
}

// totals are the header figures.
type totals struct {
	spans, failed, open     int
	agents, agentsFailed    int
	agentsOpen, replayed    int
	sessions, turns         int
	usageTurns              int
	cleanups, cleanupFailed int
	tools, toolsFailed      int
	events                  int
	tokens                  []sum
	cost                    []sum
	providers, models       []count
	queueTotalMS            float64
	queueMaxMS              float64
	queued                  int
	sessionTotalMS          float64
	slowestAgentMS          float64
	slowestAgent            int // row, or -1
}

type sum struct {
	key string
	n   float64
}

type count struct {
	key string
	n   int
}

// kindStat aggregates the rows of one kind.
type kindStat struct {
	kind               string
	count, failed      int
	open               int
	totalMS, longestMS float64
}

// failure is a failed node where a failure started: no span below it
// failed.
type failure struct {
	row     int
	label   string
	source  string
	errType string
	// message is the error message when the trace captured content.
	message string
	// propagated counts the enclosing spans that failed with it.
	propagated int
}

// contentKeys are the attributes that hold content: eval and the ACP
// engine send them to capturing sinks only.
var contentKeys = map[string]bool{
	"prompt": true, "system": true, "followUps": true, "result": true, "error.message": true,
	"command": true, "input": true, "output": true, "content": true, "update": true, "payload": true,
}

func buildModel(s *spanSet, title string) *model {
	m := &model{title: title}
	n := len(s.spans)
	starts, ends, pts := m.place(s)

	// Parents, then children in start order.
	parent := make([]int, n)
	for i := range s.spans {
		sp := &s.spans[i]
		parent[i] = -1
		if sp.parent == "" {
			continue
		}
		if p, ok := s.index[spanKey{sp.run, sp.parent}]; ok && int(p) != i {
			parent[i] = int(p)
		}
	}
	// Children keep the order of their events (one run, one sequence);
	// roots, which may come from several runs, are ordered by time.
	seq := func(i int32) uint64 {
		if sp := &s.spans[i]; sp.started {
			return sp.startSeq
		}
		return s.spans[i].endSeq
	}
	children := make([][]int32, n)
	var roots []int32
	for i := range n {
		if p := parent[i]; p >= 0 {
			children[p] = append(children[p], int32(i))
		} else {
			roots = append(roots, int32(i))
		}
	}
	slices.SortFunc(roots, func(a, b int32) int {
		if c := cmp.Compare(starts[a], starts[b]); c != 0 {
			return c
		}
		if c := cmp.Compare(s.spans[a].run, s.spans[b].run); c != 0 {
			return c
		}
		return cmp.Compare(seq(a), seq(b))
	})
	for _, c := range children {
		slices.SortFunc(c, func(a, b int32) int { return cmp.Compare(seq(a), seq(b)) })
	}

	// Pre-order rows. Spans that only a cycle of parents reaches become
	// roots of their own.
	rowOf := make([]int, n)
	for i := range rowOf {
		rowOf[i] = -1
	}
	m.rows = make([]row, 0, n)
	var stack []int32
	visit := func(root int32) {
		stack = append(stack[:0], root)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if rowOf[i] >= 0 {
				continue
			}
			r := row{span: &s.spans[i], parent: -1, start: starts[i], end: ends[i], session: -1}
			if p := parent[i]; p >= 0 && rowOf[p] >= 0 {
				r.parent = rowOf[p]
				r.depth = m.rows[r.parent].depth + 1
			}
			rowOf[i] = len(m.rows)
			m.rows = append(m.rows, r)
			c := children[i]
			for j := len(c) - 1; j >= 0; j-- {
				if rowOf[c[j]] < 0 {
					stack = append(stack, c[j])
				}
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	for i := range n {
		if rowOf[i] < 0 {
			visit(int32(i))
		}
	}

	for i := range m.rows {
		r := &m.rows[i]
		sp := r.span
		switch {
		case !sp.ended:
			r.status = statusOpen
			r.end = m.hi
		case sp.status == eval.StatusError:
			r.status = statusError
		}
		if r.parent >= 0 && sp.kind == "agent" && sp.name == "agent.session" {
			if p := &m.rows[r.parent]; p.span.kind == "agent" && p.span.name == "Agent" && p.session < 0 {
				p.session = i
			}
		}
	}
	for i := range m.rows {
		m.rows[i].label, m.rows[i].sub = labels(m.rows[i].span)
	}

	m.points = make([]rowPoint, len(s.points))
	for j := range s.points {
		p := &s.points[j]
		rp := rowPoint{row: -1, t: pts[j], p: p}
		if p.span >= 0 {
			rp.row = rowOf[p.span]
		}
		m.points[j] = rp
	}
	slices.SortStableFunc(m.points, func(a, b rowPoint) int {
		if c := cmp.Compare(a.row, b.row); c != 0 {
			return c
		}
		return cmp.Compare(a.t, b.t)
	})

	m.summarize(s)
	return m
}

// place puts every event on the time axis (milliseconds after m.t0) and
// sets m.t0, m.lo and m.hi. Within a run, events are taken in sequence
// order with a clock that never goes back, so an event's time is at least
// its timestamp and the time of the event before it; an end is also at
// least its start plus the reported duration. No time goes past the
// millisecond of its timestamp, which bounds the drift.
func (m *model) place(s *spanSet) (starts, ends, pts []float64) {
	n := len(s.spans)
	starts, ends, pts = make([]float64, n), make([]float64, n), make([]float64, len(s.points))
	type stamp struct {
		run  int32
		seq  uint64
		ts   int64
		what uint8 // 0 start, 1 point, 2 end
		idx  int32
	}
	stamps := make([]stamp, 0, 2*n+len(s.points))
	t0 := int64(math.MaxInt64)
	for i := range s.spans {
		sp := &s.spans[i]
		if sp.started {
			stamps = append(stamps, stamp{sp.run, sp.startSeq, sp.startTS, 0, int32(i)})
			t0 = min(t0, sp.startTS)
		}
		if sp.ended {
			stamps = append(stamps, stamp{sp.run, sp.endSeq, sp.endTS, 2, int32(i)})
			t0 = min(t0, sp.endTS)
		}
	}
	for j := range s.points {
		p := &s.points[j]
		stamps = append(stamps, stamp{p.run, p.seq, p.ts, 1, int32(j)})
		t0 = min(t0, p.ts)
	}
	if len(stamps) == 0 {
		t0 = 0
	}
	m.t0 = t0
	slices.SortStableFunc(stamps, func(a, b stamp) int {
		if c := cmp.Compare(a.run, b.run); c != 0 {
			return c
		}
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return cmp.Compare(a.what, b.what)
	})
	clock, run := math.Inf(-1), int32(-1)
	hi := 0.0
	for _, st := range stamps {
		if st.run != run {
			clock, run = math.Inf(-1), st.run
		}
		ts := float64(st.ts - t0)
		t := max(ts, clock)
		switch st.what {
		case 0:
			t = min(t, ts+1)
			starts[st.idx] = t
		case 1:
			t = min(t, ts+1)
			pts[st.idx] = t
		case 2:
			sp := &s.spans[st.idx]
			if sp.started {
				t = max(t, starts[st.idx]+sp.durationMS)
			}
			t = min(t, ts+1)
			if sp.started {
				t = max(t, starts[st.idx])
			}
			ends[st.idx] = t
		}
		clock = t
		hi = max(hi, t)
	}
	lo := 0.0
	for i := range s.spans {
		sp := &s.spans[i]
		if !sp.started {
			starts[i] = ends[i] - sp.durationMS
			lo = min(lo, starts[i])
		}
	}
	m.lo, m.hi = lo, hi
	return starts, ends, pts
}

// labels returns a row's display name and the muted text beside it.
func labels(sp *span) (label, sub string) {
	join := func(parts ...string) string {
		out := ""
		for _, p := range parts {
			if p == "" {
				continue
			}
			if out != "" {
				out += " · "
			}
			out += p
		}
		return out
	}
	provider := getString(sp.attrs, "provider")
	switch sp.kind {
	case "evaluation":
		return "run", ""
	case "component":
		if sp.name == "Parallel" {
			return "parallel", ""
		}
		return sp.name, "component"
	case "system":
		return "system", ""
	case "application":
		return sp.name, "trace span"
	case "agent":
		switch sp.name {
		case "Agent":
			label = "agent"
			if name := getString(sp.attrs, "agent.name"); name != "" {
				label += " " + strconv.Quote(name)
			}
			replayed := ""
			if v, _ := get(sp.attrs, "replayed"); v == true {
				replayed = "replayed"
			}
			return label, join(provider, getString(sp.attrs, "model"), replayed)
		case "agent.session":
			return "session", join(provider, getString(sp.attrs, "model"))
		case "agent.turn":
			label = "turn"
			if v, ok := get(sp.attrs, "index"); ok {
				label += " " + scalarText(v)
			}
			return label, join(getString(sp.attrs, "kind"), getString(sp.attrs, "stopReason"))
		case "agent.cleanup":
			return "cleanup", ""
		}
	case "tool":
		return "tool " + sp.name, getString(sp.attrs, "tool.caller")
	case "file":
		sub := ""
		if v, ok := get(sp.attrs, "bytes"); ok {
			sub = scalarText(v) + " bytes"
		}
		return "file " + sp.name, sub
	case "script":
		replayed := ""
		if v, _ := get(sp.attrs, "replayed"); v == true {
			replayed = "replayed"
		}
		return "script", join(getString(sp.attrs, "environment"), replayed)
	case "model":
		status := ""
		if v, ok := get(sp.attrs, "http.response.status_code"); ok {
			status = "HTTP " + scalarText(v)
		}
		return "model call", join(getString(sp.attrs, "gen_ai.request.model"), status)
	case "sandbox":
		return "sandbox", join(provider, getString(sp.attrs, "access"))
	case "workspace":
		return "workspace", join(provider, getString(sp.attrs, "workspace.id"))
	}
	if sp.name == "" {
		return sp.kind, ""
	}
	return sp.name, sp.kind
}

// scalarText formats an attribute value for a label.
func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// kindOf is the group of a row in the table of kinds.
func kindOf(sp *span) string {
	switch {
	case sp.kind == "agent" && sp.name == "Agent":
		return "agent"
	case sp.kind == "agent" && sp.name != "":
		return sp.name
	case sp.kind == "component" && sp.name == "Parallel":
		return "parallel"
	case sp.kind == "":
		return "(unknown)"
	}
	return sp.kind
}

// summarize computes the runs, totals, kinds and failures.
func (m *model) summarize(s *spanSet) {
	t := &m.totals
	t.slowestAgent = -1
	t.spans = len(m.rows)
	t.events = len(m.points)
	tokens := map[string]float64{}
	// spend sums the agent spans' GenAI usage attributes; when any has
	// them, they are the totals instead of the turns' own reports.
	spend := map[string]float64{}
	spent := false
	costUSD := 0.0
	providers, models := map[string]int{}, map[string]int{}
	kinds := map[string]*kindStat{}
	failedChild := make([]bool, len(m.rows))
	for i := range m.rows {
		if r := &m.rows[i]; r.status == statusError && r.parent >= 0 {
			failedChild[r.parent] = true
		}
	}
	m.runs = make([]runInfo, len(s.runs))
	for i, id := range s.runs {
		m.runs[i] = runInfo{id: id, status: statusOpen, root: -1}
	}
	for i := range m.rows {
		r := &m.rows[i]
		sp := r.span
		if r.parent < 0 && sp.kind == "evaluation" && m.runs[sp.run].root < 0 {
			ri := &m.runs[sp.run]
			ri.root, ri.status, ri.durationMS = i, r.status, sp.durationMS
		}
		for _, a := range sp.attrs {
			if contentKeys[a.key] {
				m.content = true
			}
		}
		switch r.status {
		case statusError:
			t.failed++
		case statusOpen:
			t.open++
		}
		k := kindOf(sp)
		ks := kinds[k]
		if ks == nil {
			ks = &kindStat{kind: k}
			kinds[k] = ks
		}
		ks.count++
		switch r.status {
		case statusError:
			ks.failed++
		case statusOpen:
			ks.open++
		}
		if sp.ended {
			ks.totalMS += sp.durationMS
			ks.longestMS = max(ks.longestMS, sp.durationMS)
		}
		switch k {
		case "agent":
			t.agents++
			switch r.status {
			case statusError:
				t.agentsFailed++
			case statusOpen:
				t.agentsOpen++
			}
			if v, _ := get(sp.attrs, "replayed"); v == true {
				t.replayed++
			}
			if p := getString(sp.attrs, "provider"); p != "" {
				providers[p]++
			}
			// What the session spent, as the evaluator counted it (the
			// model gateway's figures for a metered session).
			for _, f := range spendFields {
				if v, ok := number(sp.attrs, f.attr); ok {
					spend[f.key] += v
					spent = true
				}
			}
			if v, ok := number(sp.attrs, "aml.cost_usd"); ok {
				costUSD += v
			}
			if mo := getString(sp.attrs, "model"); mo != "" {
				models[mo]++
			}
			if r.session >= 0 {
				q := max(0, m.rows[r.session].start-r.start)
				t.queueTotalMS += q
				t.queueMaxMS = max(t.queueMaxMS, q)
				if q > 0 {
					t.queued++
				}
			}
			if sp.ended && (t.slowestAgent < 0 || sp.durationMS > t.slowestAgentMS) {
				t.slowestAgent, t.slowestAgentMS = i, sp.durationMS
			}
		case "agent.session":
			t.sessions++
			if sp.ended {
				t.sessionTotalMS += sp.durationMS
			}
		case "agent.turn":
			t.turns++
			if u := getString(sp.attrs, "usage"); u != "" && addUsage(tokens, u) {
				t.usageTurns++
			}
		case "agent.cleanup":
			t.cleanups++
			if r.status == statusError {
				t.cleanupFailed++
			}
		case "tool":
			t.tools++
			if r.status == statusError {
				t.toolsFailed++
			}
		}
		if r.status == statusError && !failedChild[i] {
			m.failures = append(m.failures, m.failureAt(i))
		}
	}
	for i := range m.runs {
		if m.runs[i].root < 0 {
			// A run whose root span is missing: its status is the worst of
			// its rows.
			st := statusOK
			for j := range m.rows {
				if r := &m.rows[j]; int(r.span.run) == i && r.status > st {
					st = r.status
				}
			}
			m.runs[i].status = st
		}
	}
	for _, p := range m.points {
		for _, a := range p.p.attrs {
			if contentKeys[a.key] {
				m.content = true
			}
		}
	}
	t.tokens = sortedSums(tokens, tokenOrder)
	t.cost = sessionCost(m.points)
	if spent {
		t.tokens = sortedSums(spend, spendOrder)
		if costUSD > 0 {
			t.cost = []sum{{"USD", costUSD}}
		}
	}
	t.providers, t.models = sortedCounts(providers), sortedCounts(models)
	for _, ks := range kinds {
		m.kinds = append(m.kinds, *ks)
	}
	slices.SortFunc(m.kinds, func(a, b kindStat) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.kind, b.kind)
	})
}

// failureAt describes the failed row i. A failure that started in an
// agent's session belongs to the agent: that is the authored node.
func (m *model) failureAt(i int) failure {
	r := &m.rows[i]
	if r.span.name == "agent.session" && r.parent >= 0 && m.rows[r.parent].session == i && m.rows[r.parent].status == statusError {
		i = r.parent
		r = &m.rows[i]
	}
	f := failure{row: i, label: r.label, source: getString(r.span.attrs, "aml.source"),
		errType: getString(r.span.attrs, "error.type"), message: getString(r.span.attrs, "error.message")}
	if n := r.span.name; n == "agent.turn" || n == "agent.cleanup" {
		// Name the agent too: "agent "x" › turn 2".
		for a := r.parent; a >= 0; a = m.rows[a].parent {
			if m.rows[a].span.kind == "agent" && m.rows[a].span.name == "Agent" {
				f.label = m.rows[a].label + " › " + r.label
				break
			}
		}
	}
	for a := r.parent; a >= 0; a = m.rows[a].parent {
		if m.rows[a].status == statusError {
			f.propagated++
		}
	}
	return f
}

// spendFields are the agent span attributes of what a session spent, and
// the names the totals give them.
var spendFields = []struct{ attr, key string }{
	{"gen_ai.usage.input_tokens", "input_tokens"},
	{"gen_ai.usage.output_tokens", "output_tokens"},
	{"gen_ai.usage.cache_read.input_tokens", "cached_input_tokens"},
	{"gen_ai.usage.reasoning.output_tokens", "reasoning_tokens"},
	{"aml.model_calls", "model_calls"},
}

// spendOrder is the order of those totals.
var spendOrder = []string{"input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens", "model_calls"}

// number returns the attribute key when it is a number.
func number(as []attr, key string) (float64, bool) {
	switch v, _ := get(as, key); v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	}
	return 0, false
}

// tokenOrder lists the usage fields of ACP (and most providers) first.
var tokenOrder = []string{"inputTokens", "outputTokens", "totalTokens", "cachedReadTokens", "cachedWriteTokens", "thoughtTokens"}

// addUsage adds the numeric fields of a serialized usage object to sums
// and reports whether it was one.
func addUsage(sums map[string]float64, usage string) bool {
	var u map[string]any
	if err := json.Unmarshal([]byte(usage), &u); err != nil {
		return false
	}
	for k, v := range u {
		if f, ok := v.(float64); ok {
			sums[k] += f
		}
	}
	return true
}

// sessionCost sums the last cost that each session reported in an ACP
// usage_update (the cost is cumulative per session), by currency. The
// update itself is content, so the cost is known only when the trace
// captured it.
func sessionCost(points []rowPoint) []sum {
	type key struct {
		run     int32
		session string
	}
	type cost struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	}
	last := map[key]cost{}
	var keys []key
	for _, rp := range points {
		p := rp.p
		if p.name != "acp.session.update" || getString(p.attrs, "sessionUpdate") != "usage_update" {
			continue
		}
		raw := getString(p.attrs, "update")
		if raw == "" {
			continue
		}
		var u struct {
			Cost *cost `json:"cost"`
		}
		if json.Unmarshal([]byte(raw), &u) != nil || u.Cost == nil {
			continue
		}
		k := key{p.run, getString(p.attrs, "sessionId")}
		if _, ok := last[k]; !ok {
			keys = append(keys, k)
		}
		last[k] = *u.Cost
	}
	byCurrency := map[string]float64{}
	for _, k := range keys {
		c := last[k]
		byCurrency[c.Currency] += c.Amount
	}
	return sortedSums(byCurrency, nil)
}

// sortedSums orders sums: the keys of first in that order, then the rest
// by name.
func sortedSums(m map[string]float64, first []string) []sum {
	out := make([]sum, 0, len(m))
	for _, k := range first {
		if v, ok := m[k]; ok {
			out = append(out, sum{k, v})
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(first, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		out = append(out, sum{k, m[k]})
	}
	return out
}

// sortedCounts orders counts by frequency, then name.
func sortedCounts(m map[string]int) []count {
	out := make([]count, 0, len(m))
	for k, n := range m {
		out = append(out, count{k, n})
	}
	slices.SortFunc(out, func(a, b count) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	return out
}
