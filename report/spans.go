package report

import (
	"maps"
	"slices"
	"strings"

	"github.com/aml-go/aml/eval"
)

// spanSet folds trace events into spans, keyed by run and span id, in
// whatever order the events arrive. It is not safe for concurrent use.
type spanSet struct {
	runs   []string
	runIdx map[string]int32
	spans  []span
	index  map[spanKey]int32
	points []point
	// strs interns the short strings that repeat across spans (kinds,
	// names, attribute keys, providers, positions).
	strs map[string]string
}

type spanKey struct {
	run int32
	id  string
}

// attr is one attribute; a span's attributes are sorted by key.
type attr struct {
	key string
	val any
}

// span is what the events of one span said about it.
type span struct {
	run                    int32
	id, parent, kind, name string
	started, ended         bool
	startTS, endTS         int64
	startSeq, endSeq       uint64
	status                 string
	durationMS             float64
	attrs                  []attr
}

// point is a point event.
type point struct {
	span  int32 // index into spanSet.spans, or -1 for an event outside spans
	run   int32
	ts    int64
	seq   uint64
	name  string
	attrs []attr
}

// internMax is the longest string value that is interned; longer ones are
// content and rarely repeat.
const internMax = 200

func newSpanSet() *spanSet {
	return &spanSet{runIdx: map[string]int32{}, index: map[spanKey]int32{}, strs: map[string]string{}}
}

func (s *spanSet) intern(v string) string {
	if len(v) > internMax {
		return v
	}
	if w, ok := s.strs[v]; ok {
		return w
	}
	v = strings.Clone(v)
	s.strs[v] = v
	return v
}

func (s *spanSet) run(id string) int32 {
	if i, ok := s.runIdx[id]; ok {
		return i
	}
	i := int32(len(s.runs))
	s.runs = append(s.runs, id)
	s.runIdx[id] = i
	return i
}

// lookup returns the index of the span, creating it when it is new.
func (s *spanSet) lookup(run int32, id string) int32 {
	k := spanKey{run, id}
	if i, ok := s.index[k]; ok {
		return i
	}
	k.id = s.intern(id)
	i := int32(len(s.spans))
	s.spans = append(s.spans, span{run: run, id: k.id})
	s.index[k] = i
	return i
}

// add folds one event in.
func (s *spanSet) add(e eval.Event) {
	run := s.run(e.RunID)
	switch e.Type {
	case eval.SpanStart:
		sp := &s.spans[s.lookup(run, e.SpanID)]
		sp.started, sp.startTS, sp.startSeq = true, e.Timestamp, e.Sequence
		sp.parent, sp.kind, sp.name = s.intern(e.ParentSpanID), s.intern(e.Kind), s.intern(e.Name)
		sp.attrs = s.merge(sp.attrs, e.Attributes)
	case eval.SpanEnd:
		sp := &s.spans[s.lookup(run, e.SpanID)]
		sp.ended, sp.endTS, sp.endSeq = true, e.Timestamp, e.Sequence
		sp.status, sp.durationMS = s.intern(e.Status), e.DurationMS
		if !sp.started {
			sp.parent, sp.kind, sp.name = s.intern(e.ParentSpanID), s.intern(e.Kind), s.intern(e.Name)
		}
		sp.attrs = s.merge(sp.attrs, e.Attributes)
	default:
		p := point{span: -1, run: run, ts: e.Timestamp, seq: e.Sequence, name: s.intern(e.Name), attrs: s.merge(nil, e.Attributes)}
		if e.SpanID != "" {
			p.span = s.lookup(run, e.SpanID)
		}
		s.points = append(s.points, p)
	}
}

// merge adds m to the sorted attributes have; a key already there takes
// the new value.
func (s *spanSet) merge(have []attr, m map[string]any) []attr {
	if len(m) == 0 {
		return have
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if str, ok := v.(string); ok {
			v = s.intern(str)
		}
		i, found := slices.BinarySearchFunc(have, k, func(a attr, k string) int { return strings.Compare(a.key, k) })
		if found {
			have[i].val = v
			continue
		}
		have = slices.Insert(have, i, attr{key: s.intern(k), val: v})
	}
	return have
}

// get returns the value of the attribute key.
func get(as []attr, key string) (any, bool) {
	i, found := slices.BinarySearchFunc(as, key, func(a attr, k string) int { return strings.Compare(a.key, k) })
	if !found {
		return nil, false
	}
	return as[i].val, true
}

// getString returns the attribute key when it is a string.
func getString(as []attr, key string) string {
	v, _ := get(as, key)
	s, _ := v.(string)
	return s
}
