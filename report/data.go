package report

import (
	"github.com/aml-go/aml/internal/jsonstr"
	"math"
	"strconv"
)

// The page data is one JSON object, written by hand for size and speed:
//
//	v        format version (1)
//	title    the report title
//	t0       the Unix millisecond of time 0; lo and hi bound the rows (ms)
//	content  whether the trace carried content attributes
//	s        the string table; other fields name strings by index, 0 is ""
//	runs     [id, status, durationMs, root row]
//	tot      the totals (an object; see appendTotals)
//	kinds    [kind, count, failed, open, totalMs, longestMs]
//	r        rows in tree pre-order: [id, parent row, kind, name, label,
//	         sub, start, end, durationMs, status, session row, attrs];
//	         trailing session (-1) and attrs ([]) are left out
//	e        point events [row, time, name, attrs], by row and time
//	f        failures [row, label, source, error type, message, propagated]
//
// Status is 0 (ok), 1 (error) or 2 (open); an open row has durationMs -1.
// Attributes are a flat list of pairs: a key k >= 0 names a key whose value
// is string k of the table; a key k < 0 names key -k-1, and the value is a
// JSON literal (number, boolean or list).
//
// Strings are escaped so that the JSON can sit in an HTML script element:
// '<', '>' and '&' become \u003c, \u003e and \u0026 (so no "</script" or
// "<!--" can appear), and '/' becomes "\/" (so no URL appears literally):
// see jsonstr.AppendScript.

// dataEncoder appends the page data and collects the string table.
type dataEncoder struct {
	b     []byte
	index map[string]int
	table []string
}

func (e *dataEncoder) str(s string) int {
	if i, ok := e.index[s]; ok {
		return i
	}
	i := len(e.table)
	e.table = append(e.table, s)
	e.index[s] = i
	return i
}

func (e *dataEncoder) ref(s string) { e.int(e.str(s)) }

func (e *dataEncoder) int(i int) { e.b = strconv.AppendInt(e.b, int64(i), 10) }

func (e *dataEncoder) byte(c byte) { e.b = append(e.b, c) }

func (e *dataEncoder) raw(s string) { e.b = append(e.b, s...) }

// ms appends a time in milliseconds, rounded to the microsecond.
func (e *dataEncoder) ms(x float64) {
	x = math.Round(x*1000) / 1000
	if x == 0 {
		x = 0 // no "-0"
	}
	e.b = strconv.AppendFloat(e.b, x, 'f', -1, 64)
}

// num appends a float attribute; JSON has no NaN or infinity, so those
// are written as strings.
func (e *dataEncoder) num(x float64) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		e.b = jsonstr.AppendScript(e.b, strconv.FormatFloat(x, 'g', -1, 64))
		return
	}
	e.b = strconv.AppendFloat(e.b, x, 'g', -1, 64)
}

// maxSafeInt is the largest integer JavaScript numbers hold exactly.
const maxSafeInt = 1<<53 - 1

// id appends a span id: a number when it is a canonical decimal a
// JavaScript number holds exactly, else a string.
func (e *dataEncoder) id(id string) {
	if n, err := strconv.ParseInt(id, 10, 64); err == nil && n >= 0 && n <= maxSafeInt && strconv.FormatInt(n, 10) == id {
		e.b = append(e.b, id...)
		return
	}
	e.b = jsonstr.AppendScript(e.b, id)
}

// attrs appends a flat attribute list.
func (e *dataEncoder) attrs(as []attr) {
	e.byte('[')
	for i, a := range as {
		if i > 0 {
			e.byte(',')
		}
		if s, ok := a.val.(string); ok {
			e.ref(a.key)
			e.byte(',')
			e.ref(s)
			continue
		}
		e.int(-e.str(a.key) - 1)
		e.byte(',')
		e.literal(a.val)
	}
	e.byte(']')
}

// literal appends a non-string attribute value.
func (e *dataEncoder) literal(v any) {
	switch v := v.(type) {
	case nil:
		e.raw("null")
	case bool:
		e.b = strconv.AppendBool(e.b, v)
	case int64:
		e.intValue(v)
	case int:
		e.intValue(int64(v))
	case int32:
		e.intValue(int64(v))
	case uint64:
		if v > maxSafeInt {
			e.b = jsonstr.AppendScript(e.b, strconv.FormatUint(v, 10))
			return
		}
		e.b = strconv.AppendUint(e.b, v, 10)
	case float64:
		e.num(v)
	case float32:
		e.num(float64(v))
	case string:
		e.b = jsonstr.AppendScript(e.b, v)
	case []string:
		e.byte('[')
		for i, s := range v {
			if i > 0 {
				e.byte(',')
			}
			e.b = jsonstr.AppendScript(e.b, s)
		}
		e.byte(']')
	case []any:
		e.byte('[')
		for i, x := range v {
			if i > 0 {
				e.byte(',')
			}
			e.literal(x)
		}
		e.byte(']')
	default:
		// Attribute values are scalars; anything else is shown as text.
		e.b = jsonstr.AppendScript(e.b, scalarText(v))
	}
}

func (e *dataEncoder) intValue(v int64) {
	if v > maxSafeInt || v < -maxSafeInt {
		e.b = jsonstr.AppendScript(e.b, strconv.FormatInt(v, 10))
		return
	}
	e.b = strconv.AppendInt(e.b, v, 10)
}

// encodeData returns the page data of m.
func encodeData(m *model) []byte {
	e := &dataEncoder{b: make([]byte, 0, 64*len(m.rows)+4096), index: map[string]int{}}
	e.str("")
	e.raw(`{"v":1,"title":`)
	e.b = jsonstr.AppendScript(e.b, m.title)
	e.raw(`,"t0":`)
	e.b = strconv.AppendInt(e.b, m.t0, 10)
	e.raw(`,"lo":`)
	e.ms(m.lo)
	e.raw(`,"hi":`)
	e.ms(m.hi)
	e.raw(`,"content":`)
	e.b = strconv.AppendBool(e.b, m.content)

	e.raw(`,"runs":[`)
	for i, r := range m.runs {
		if i > 0 {
			e.byte(',')
		}
		e.byte('[')
		e.b = jsonstr.AppendScript(e.b, r.id)
		e.byte(',')
		e.int(int(r.status))
		e.byte(',')
		e.ms(r.durationMS)
		e.byte(',')
		e.int(r.root)
		e.byte(']')
	}
	e.byte(']')

	e.raw(`,"tot":`)
	e.totals(&m.totals)

	e.raw(`,"kinds":[`)
	for i, k := range m.kinds {
		if i > 0 {
			e.byte(',')
		}
		e.byte('[')
		e.b = jsonstr.AppendScript(e.b, k.kind)
		e.byte(',')
		e.int(k.count)
		e.byte(',')
		e.int(k.failed)
		e.byte(',')
		e.int(k.open)
		e.byte(',')
		e.ms(k.totalMS)
		e.byte(',')
		e.ms(k.longestMS)
		e.byte(']')
	}
	e.byte(']')

	e.raw(`,"r":[`)
	for i := range m.rows {
		r := &m.rows[i]
		sp := r.span
		if i > 0 {
			e.byte(',')
		}
		e.byte('[')
		e.id(sp.id)
		e.byte(',')
		e.int(r.parent)
		e.byte(',')
		e.ref(sp.kind)
		e.byte(',')
		e.ref(sp.name)
		e.byte(',')
		e.ref(r.label)
		e.byte(',')
		e.ref(r.sub)
		e.byte(',')
		e.ms(r.start)
		e.byte(',')
		e.ms(r.end)
		e.byte(',')
		if sp.ended {
			e.ms(sp.durationMS)
		} else {
			e.raw("-1")
		}
		e.byte(',')
		e.int(int(r.status))
		if r.session >= 0 || len(sp.attrs) > 0 {
			e.byte(',')
			e.int(r.session)
		}
		if len(sp.attrs) > 0 {
			e.byte(',')
			e.attrs(sp.attrs)
		}
		e.byte(']')
	}
	e.byte(']')

	e.raw(`,"e":[`)
	for i, p := range m.points {
		if i > 0 {
			e.byte(',')
		}
		e.byte('[')
		e.int(p.row)
		e.byte(',')
		e.ms(p.t)
		e.byte(',')
		e.ref(p.p.name)
		if len(p.p.attrs) > 0 {
			e.byte(',')
			e.attrs(p.p.attrs)
		}
		e.byte(']')
	}
	e.byte(']')

	e.raw(`,"f":[`)
	for i, f := range m.failures {
		if i > 0 {
			e.byte(',')
		}
		e.byte('[')
		e.int(f.row)
		e.byte(',')
		e.ref(f.label)
		e.byte(',')
		e.ref(f.source)
		e.byte(',')
		e.ref(f.errType)
		e.byte(',')
		e.ref(f.message)
		e.byte(',')
		e.int(f.propagated)
		e.byte(']')
	}
	e.byte(']')

	e.raw(`,"s":[`)
	for i, s := range e.table {
		if i > 0 {
			e.byte(',')
		}
		e.b = jsonstr.AppendScript(e.b, s)
	}
	e.raw("]}")
	return e.b
}

// totals appends the header figures as an object.
func (e *dataEncoder) totals(t *totals) {
	ints := []struct {
		k string
		v int
	}{
		{"spans", t.spans}, {"failed", t.failed}, {"open", t.open},
		{"agents", t.agents}, {"agentsFailed", t.agentsFailed}, {"agentsOpen", t.agentsOpen}, {"replayed", t.replayed},
		{"sessions", t.sessions}, {"turns", t.turns}, {"usageTurns", t.usageTurns},
		{"cleanups", t.cleanups}, {"cleanupFailed", t.cleanupFailed},
		{"tools", t.tools}, {"toolsFailed", t.toolsFailed}, {"events", t.events},
		{"queued", t.queued}, {"slowestRow", t.slowestAgent},
	}
	e.byte('{')
	for _, kv := range ints {
		e.b = jsonstr.AppendScript(e.b, kv.k)
		e.byte(':')
		e.int(kv.v)
		e.byte(',')
	}
	for _, kv := range []struct {
		k string
		v float64
	}{{"queueTotal", t.queueTotalMS}, {"queueMax", t.queueMaxMS}, {"sessionTotal", t.sessionTotalMS}, {"slowest", t.slowestAgentMS}} {
		e.b = jsonstr.AppendScript(e.b, kv.k)
		e.byte(':')
		e.ms(kv.v)
		e.byte(',')
	}
	sums := func(name string, ss []sum) {
		e.b = jsonstr.AppendScript(e.b, name)
		e.raw(":[")
		for i, s := range ss {
			if i > 0 {
				e.byte(',')
			}
			e.byte('[')
			e.b = jsonstr.AppendScript(e.b, s.key)
			e.byte(',')
			e.num(s.n)
			e.byte(']')
		}
		e.byte(']')
	}
	counts := func(name string, cs []count) {
		e.b = jsonstr.AppendScript(e.b, name)
		e.raw(":[")
		for i, c := range cs {
			if i > 0 {
				e.byte(',')
			}
			e.byte('[')
			e.b = jsonstr.AppendScript(e.b, c.key)
			e.byte(',')
			e.int(c.n)
			e.byte(']')
		}
		e.byte(']')
	}
	sums("tokens", t.tokens)
	e.byte(',')
	sums("cost", t.cost)
	e.byte(',')
	counts("providers", t.providers)
	e.byte(',')
	counts("models", t.models)
	e.byte('}')
}
