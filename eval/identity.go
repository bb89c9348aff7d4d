package eval

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Effect identities. An effect is keyed by where it happens in the
// program's structure, never by its source position or by scheduling
// order. The program is a tree of sequential contexts: the root, the
// body of each component call together with the value it returns, and
// each branch of a parallel() or evaluate_all(). Within one context the
// program fixes the order of everything that happens, so an identity is
// the path of enclosing contexts followed by the effect's kind and its
// occurrence among the effects of that kind in its context:
//
//	agent#0                    the first agent() of the root context
//	c#1/script#0               the first script() of the second component call
//	c#0/p#0/2/agent#1          the second agent() of branch 2 of the first fan-out of a component
//
// c#n is the n-th component call of its context, p#n its n-th fan-out
// (parallel() or evaluate_all()), and a number is a fan-out's branch by
// its authored index. Each record also keeps its order (Effect.Order):
// the ordinal, among everything its context did (effects and contexts of
// every kind), of each segment of its identity, so that a resume can
// tell an effect the program inserted between recorded ones from the
// first effect the recorded run never reached. An effect whose request
// differs from the record at its identity may also have been inserted
// before an effect of its kind, which then holds the identity the
// journal recorded it under plus one: Resume's dry replay aligns the
// context's effects with its records by their requests (see
// insertionGuess) and names an insertion as one.
//
// Edits that keep every identity: comments, blank lines and docstrings;
// moving, adding or removing helper functions, load()s and top-level
// code that runs no effect; renaming variables, functions and
// components; anything else that leaves the sequence of effects and
// component calls of every context as it was. Identities do not change
// when the text of a request changes (a prompt, a command): that is a
// divergence of the effect at the same identity.
//
// include() and env() reads are checks, not effects: their identities
// are their kind, what they read (a path or a variable's name) and its
// occurrence in the context, and they take no ordinal. A new one is
// recorded; one the program no longer makes is forgotten; one whose
// digest changed is a divergence.

// slot is the place of one effect or context: its identity, its order
// and its ordinal in its context.
type slot struct {
	id    string
	order string
	seq   int32
	path  *effectPath
}

// effectPath is one sequential context of a journaled evaluation. Its
// elements (effects and child contexts) are numbered in the order the
// context reaches them. It is safe for concurrent use.
type effectPath struct {
	id    string // "" for the root
	order string // the ordinals of id's segments, dotted; "" for the root
	jr    *journaling
	// fanOut is set for a fan-out's context, whose elements are its
	// branches (numbered by index, not by arrival).
	fanOut bool
	// passed is set when the recorded run went past this context in an
	// enclosing one: an effect in it with no record was inserted.
	passed bool

	mu       sync.Mutex
	seq      int32 // the next element's ordinal (fan-outs: branches seen)
	counts   map[string]*occurrences
	lastKind string
	last     *occurrences
	// live is set once the context went live after an accepted change
	// (ResumeOptions.RerunChanged): every later element runs live.
	live bool
	// done is set when the context completed, in a dry replay.
	done bool
	// guess, in a dry replay, is an effect of this context whose request
	// differs from the record at its identity, which may have been
	// inserted before that record: the next effect of its kind decides
	// (see replay).
	guess *insertionGuess
}

// insertionGuess are the effects, in a row, that a dry replay met where
// the journal recorded others of their kind: inserted, if the program's
// next effect of that kind is what the run recorded in the first one's
// place (the records shift by as many), else the first one changed.
type insertionGuess struct {
	kind string
	// inserted are the effects as insertions; changed is the first one
	// as a change.
	inserted []*DivergenceError
	changed  *DivergenceError
	slot     slot
}

// maxGuessed bounds the effects in a row a dry replay takes for
// insertions before it calls the first one changed.
const maxGuessed = 8

// decide resolves g at the effect of kind at identity id with request
// req: the inserted effects, when the records shifted by as many as g
// holds, else the first one changed.
func (d *domain) decide(g *insertionGuess, kind, id, req string) (*Effect, error) {
	jr := d.journal
	if g.kind == kind {
		if prev := jr.lookup(shiftedID(id, -len(g.inserted))); prev != nil && prev.Kind == kind && len(changedFields(prev.Request, req)) == 0 {
			for _, de := range g.inserted[1:] {
				jr.mu.Lock()
				jr.changes = append(jr.changes, de)
				jr.mu.Unlock()
			}
			return d.diverge(g.slot, g.inserted[0])
		}
	}
	return d.diverge(g.slot, g.changed)
}

// occurrences counts the elements of one kind in a context.
type occurrences struct {
	prefix string // the identity up to the counter: path/kind#
	n      int32
}

// checkKind reports whether kind (an effect's, or the kind part of a
// check's identity, "include:WHAT") is a check, not an effect (see
// above).
func checkKind(kind string) bool {
	k, _, _ := strings.Cut(kind, ":")
	return k == "include" || k == "read" || k == RetryKind
}

// next allocates the next element of kind in p: an effect, or a child
// context ("c" for a component call, "p" for a fan-out).
func (p *effectPath) next(kind string) slot {
	if p == nil {
		return slot{}
	}
	var buf [96]byte
	b, idLen, seq := p.appendNext(buf[:0], kind)
	s := string(b)
	return slot{id: s[:idLen], order: s[idLen:], seq: seq, path: p}
}

// appendNext appends the identity of the next element of kind in p to
// dst, then its order, and returns them with the identity's length and
// the element's ordinal (-1 for a check).
func (p *effectPath) appendNext(dst []byte, kind string) ([]byte, int, int32) {
	p.mu.Lock()
	o := p.last
	if o == nil || p.lastKind != kind {
		// A loop reaches one kind again and again: the last kind saves
		// a map lookup.
		if p.counts == nil {
			p.counts = map[string]*occurrences{}
		}
		o = p.counts[kind]
		if o == nil {
			prefix := kind + "#"
			if p.id != "" {
				prefix = p.id + "/" + prefix
			}
			o = &occurrences{prefix: prefix}
			p.counts[kind] = o
		}
		p.last, p.lastKind = o, kind
	}
	n := o.n
	o.n++
	seq := int32(-1)
	if !checkKind(kind) {
		seq = p.seq
		p.seq++
	}
	p.mu.Unlock()
	start := len(dst)
	dst = append(dst, o.prefix...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	idLen := len(dst) - start
	if seq >= 0 {
		if p.order != "" {
			dst = append(dst, p.order...)
			dst = append(dst, '.')
		}
		dst = strconv.AppendInt(dst, int64(seq), 10)
	}
	return dst, idLen, seq
}

// checkSlot is the place of a check (include, read) of what in p: its
// occurrence counts per kind and what, so that an unrelated new check
// does not shift it.
func (p *effectPath) checkSlot(kind, what string) slot {
	if p == nil {
		return slot{}
	}
	return p.next(kind + ":" + url.PathEscape(what))
}

// child returns the context of the next component call ("c") or fan-out
// ("p") in p.
func (p *effectPath) child(kind string) *effectPath {
	if p == nil {
		return nil
	}
	s := p.next(kind)
	c := &effectPath{id: s.id, order: s.order, jr: p.jr, fanOut: kind == "p"}
	p.mu.Lock()
	c.live = p.live
	p.mu.Unlock()
	c.passed = p.passed || p.jr.recordedAfter(p, s.seq)
	p.jr.visit(c)
	return c
}

// branch returns sc for branch i of the fan-out whose context is
// sc.path.
func (sc scope) branch(i int) scope {
	sc.path = sc.path.branch(i)
	return sc
}

// branch returns the context of branch i of the fan-out context p.
func (p *effectPath) branch(i int) *effectPath {
	if p == nil {
		return nil
	}
	is := strconv.Itoa(i)
	p.mu.Lock()
	if int32(i) >= p.seq {
		p.seq = int32(i) + 1
	}
	live := p.live
	p.mu.Unlock()
	c := &effectPath{id: p.id + "/" + is, order: p.order + "." + is, jr: p.jr, live: live, passed: p.passed}
	p.jr.visit(c)
	return c
}

// expect notes that the fan-out context p has n branches.
func (p *effectPath) expect(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if int32(n) > p.seq {
		p.seq = int32(n)
	}
	p.mu.Unlock()
}

// isLive reports whether p runs live from now on.
func (p *effectPath) isLive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// finish marks p completed, for a dry replay's analysis.
func (p *effectPath) finish() {
	if p == nil || !p.jr.verify {
		return
	}
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}

// parseOrder splits an Effect.Order into its ordinals; nil when it is
// not one.
func parseOrder(s string) []int32 {
	if s == "" {
		return nil
	}
	out := make([]int32, 0, strings.Count(s, ".")+1)
	for s != "" {
		var part string
		part, s, _ = strings.Cut(s, ".")
		n, err := strconv.ParseInt(part, 10, 32)
		if err != nil || n < 0 {
			return nil
		}
		out = append(out, int32(n))
	}
	return out
}

// index is what a resumed evaluation knows of its journal's records (see
// ListingJournal): the last record of each identity, and, built the first time
// they are needed (a resume that serves every effect in order never
// needs them), each context's greatest ordinal at its level of a record
// inside it and the effect recorded at each ordinal. It is safe for
// concurrent use once built.
type index struct {
	byID map[string]*Effect

	once sync.Once
	// after maps a context's identity to the greatest ordinal at its
	// level of the records inside it (fan-out contexts are left out:
	// their branches are not ordered).
	after map[string]int32
	// at maps a context and an ordinal to the effect recorded there.
	at map[atKey]*Effect
}

// atKey names an element of a context by its ordinal.
type atKey struct {
	ctx string
	seq int32
}

// buildIndex indexes effects, later records of an identity superseding
// earlier ones, withdrawn ones (VoidKind) left out.
func buildIndex(effects []*Effect) *index {
	ix := &index{byID: make(map[string]*Effect, len(effects))}
	for _, e := range effects {
		if e.Kind == VoidKind {
			delete(ix.byID, e.ID)
			continue
		}
		ix.byID[e.ID] = e
	}
	return ix
}

// orders builds after and at from the records byID held when the index
// was built. The caller holds the journaling's lock.
func (ix *index) orders() {
	ix.once.Do(func() {
		ix.after, ix.at = map[string]int32{}, map[atKey]*Effect{}
		for _, e := range ix.byID {
			ix.note(e)
		}
	})
}

// note adds e's ordinals to after and at. Context identities are
// prefixes of e.ID, so nothing is allocated but map entries.
func (ix *index) note(e *Effect) {
	if checkKind(e.Kind) {
		return
	}
	id, ord := e.ID, e.Order
	if ord == "" || strings.Count(id, "/") != strings.Count(ord, ".") {
		return
	}
	segStart := 0 // where the segment being read starts in id
	for {
		field, rest, more := strings.Cut(ord, ".")
		n, err := strconv.ParseInt(field, 10, 32)
		if err != nil || n < 0 {
			return
		}
		ctx := ""
		if segStart > 0 {
			ctx = id[:segStart-1]
		}
		if !isFanOutSeg(ctx) {
			if m, ok := ix.after[ctx]; !ok || int32(n) > m {
				ix.after[ctx] = int32(n)
			}
		}
		if !more {
			ix.at[atKey{ctx, int32(n)}] = e
			return
		}
		slash := strings.IndexByte(id[segStart:], '/')
		if slash < 0 {
			return
		}
		segStart += slash + 1
		ord = rest
	}
}

// isFanOutSeg reports whether the context id is a fan-out's: its last
// segment is p#n.
func isFanOutSeg(id string) bool {
	last := id[strings.LastIndexByte(id, '/')+1:]
	return strings.HasPrefix(last, "p#")
}

// recordedAfter reports whether the journal holds a record after the
// element at ordinal seq of context p: the recorded run went past it.
func (jr *journaling) recordedAfter(p *effectPath, seq int32) bool {
	if jr == nil || jr.ix == nil || p.fanOut || seq < 0 {
		return false
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	jr.ix.orders()
	m, ok := jr.ix.after[p.id]
	return ok && m > seq
}

// recordedAt returns the record of the effect at ordinal seq of context
// p, or nil.
func (jr *journaling) recordedAt(p *effectPath, seq int32) *Effect {
	if jr.ix == nil || p.fanOut || seq < 0 {
		return nil
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	jr.ix.orders()
	e := jr.ix.at[atKey{p.id, seq}]
	if e == nil || jr.ix.byID[e.ID] != e {
		return nil // withdrawn since
	}
	return e
}

// lookup returns the record of identity id, or nil.
func (jr *journaling) lookup(id string) *Effect {
	if jr.fresh {
		return nil
	}
	if jr.ix != nil {
		jr.mu.Lock()
		defer jr.mu.Unlock()
		return jr.ix.byID[id]
	}
	rec := jr.j.Lookup(id)
	if rec != nil && rec.Kind == VoidKind {
		return nil
	}
	return rec
}

// visit registers a context reached by a dry replay.
func (jr *journaling) visit(p *effectPath) {
	if jr == nil || !jr.verify {
		return
	}
	jr.mu.Lock()
	if jr.visited == nil {
		jr.visited = map[string]*effectPath{}
	}
	jr.visited[p.id] = p
	jr.mu.Unlock()
}

// consume notes, in a dry replay, that the program reached the record
// of id.
func (jr *journaling) consume(id string) {
	if !jr.verify {
		return
	}
	jr.mu.Lock()
	if jr.consumed == nil {
		jr.consumed = map[string]bool{}
	}
	jr.consumed[id] = true
	jr.mu.Unlock()
}

// replay looks up the record of the effect or check of kind at s and
// compares its fingerprint. It returns the record to serve, or nil to
// run the effect live. A record whose request changed, or an effect the
// program inserted between recorded ones, is a *DivergenceError, unless
// changes are accepted (RerunChanged: the context then runs live from
// here) or this is a dry replay (the change is collected and the
// branch stops).
func (d *domain) replay(s slot, kind string, pos Position, label string, req string) (*Effect, error) {
	jr := d.journal
	if jr.cassette {
		if kind != "agent" && kind != "ask" {
			return nil, nil
		}
		rec := jr.lookup(s.id)
		if rec == nil {
			return nil, nil
		}
		if changed := changedFields(rec.Request, req); len(changed) > 0 || rec.Kind != kind {
			if rec.Kind != kind {
				changed = []string{"kind"}
			}
			return nil, &DivergenceError{ID: s.id, Kind: ChangeRequest, Pos: pos, Label: label, Changed: changed, Recorded: rec, Cassette: true}
		}
		return rec, nil
	}
	p := s.path
	if p.isLive() {
		return nil, nil
	}
	rec := jr.lookup(s.id)
	if rec == nil && !checkKind(kind) {
		if g := p.takeGuess(); g != nil {
			// The next effect of the context has no record.
			return d.decide(g, kind, s.id, req)
		}
	}
	if rec == nil {
		if !checkKind(kind) && (p.passed || jr.recordedAfter(p, s.seq)) {
			return d.diverge(s, &DivergenceError{ID: s.id, Kind: ChangeInserted, Pos: pos, Label: label})
		}
		if !checkKind(kind) {
			if other := jr.recordedAt(p, s.seq); other != nil {
				// The run's last record in this context is another
				// effect at this ordinal: the program no longer reaches
				// it here.
				jr.consume(other.ID)
				return d.diverge(s, &DivergenceError{ID: other.ID, Kind: ChangeRemoved, Pos: other.Pos, Label: other.Label, Recorded: other, Now: &Effect{Pos: pos, Label: label}})
			}
		}
		if jr.verify && !checkKind(kind) && kind != "workspace" && kind != "sandbox" {
			return nil, &EvaluationError{Msg: label + " has no record", Pos: pos, Err: errFrontier}
		}
		return nil, nil
	}
	if g := p.takeGuess(); g != nil && !checkKind(kind) {
		// Effects met before this one, in this context, differed from
		// their records: this one decides whether they were inserted.
		if g.kind == kind {
			if prev := jr.lookup(shiftedID(s.id, -len(g.inserted))); prev != nil && prev.Kind == kind && len(changedFields(prev.Request, req)) == 0 {
				return d.decide(g, kind, s.id, req)
			}
			if len(g.inserted) < maxGuessed && rec.Kind == kind && len(changedFields(rec.Request, req)) > 0 {
				// Another one inserted, perhaps: it is served the
				// record in its place, as the first one was.
				g.inserted = append(g.inserted, &DivergenceError{ID: s.id, Kind: ChangeInserted, Pos: pos, Label: label})
				p.setGuess(g)
				return rec, nil
			}
			return d.diverge(g.slot, g.changed)
		}
		if len(changedFields(rec.Request, req)) > 0 || rec.Kind != kind {
			return d.diverge(g.slot, g.changed)
		}
		p.setGuess(g) // not its kind: the next one decides
	} else if g != nil {
		p.setGuess(g)
	}
	jr.consume(s.id)
	changed := changedFields(rec.Request, req)
	if rec.Kind != kind {
		changed = []string{"kind"}
	}
	if len(changed) == 0 {
		return rec, nil
	}
	de := &DivergenceError{ID: s.id, Kind: ChangeRequest, Pos: pos, Label: label, Changed: changed, Recorded: rec}
	if later := jr.laterSame(p, kind, s.id, req); later != nil && !checkKind(kind) {
		// The program reaches, in this place, what the run recorded
		// later: the records between are no longer reached here.
		de = &DivergenceError{ID: rec.ID, Kind: ChangeRemoved, Pos: rec.Pos, Label: rec.Label, Recorded: rec, Now: &Effect{ID: later.ID, Pos: pos, Label: label}}
	} else if jr.verify && rec.Kind == kind && !checkKind(kind) && !p.fanOut {
		// Inserted before the record, or changed? The dry replay goes on,
		// this effect served by the record in its place, to the next
		// effect of its kind: if that is what the run recorded here, the
		// records shifted by one, and this one was inserted.
		p.setGuess(&insertionGuess{kind: kind, slot: s, changed: de,
			inserted: []*DivergenceError{{ID: s.id, Kind: ChangeInserted, Pos: pos, Label: label}}})
		return rec, nil
	}
	return d.diverge(s, de)
}

// shiftedID is the identity id with its occurrence moved by delta.
func shiftedID(id string, delta int) string {
	i := strings.LastIndexByte(id, '#')
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n+delta < 0 {
		return ""
	}
	return id[:i+1] + strconv.Itoa(n+delta)
}

// setGuess and takeGuess keep the context's pending insertion guess.
func (p *effectPath) setGuess(g *insertionGuess) {
	p.mu.Lock()
	p.guess = g
	p.mu.Unlock()
}

func (p *effectPath) takeGuess() *insertionGuess {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.guess
	p.guess = nil
	return g
}

// laterSame returns the record of a later effect of kind in context p
// (an identity after id's) whose request is req, or nil.
func (jr *journaling) laterSame(p *effectPath, kind, id, req string) *Effect {
	if jr.ix == nil {
		return nil
	}
	n, err := strconv.Atoi(id[strings.LastIndexByte(id, '#')+1:])
	if err != nil {
		return nil
	}
	prefix := kind + "#"
	if p.id != "" {
		prefix = p.id + "/" + prefix
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	for m := n + 1; ; m++ {
		rec, ok := jr.ix.byID[prefix+strconv.Itoa(m)]
		if !ok {
			return nil
		}
		if rec.Kind == kind && rec.Request == req {
			return rec
		}
	}
}

// diverge handles a change found at s: a dry replay collects it and
// stops the branch; with RerunChanged the context goes live from s (and
// the records it will not reach again are withdrawn); otherwise it is
// the evaluation's error.
func (d *domain) diverge(s slot, de *DivergenceError) (*Effect, error) {
	jr := d.journal
	if jr.verify {
		jr.mu.Lock()
		jr.changes = append(jr.changes, de)
		jr.mu.Unlock()
		return nil, &EvaluationError{Msg: de.Error(), Pos: de.Pos, Err: errFrontier}
	}
	if !jr.rerunChanged {
		return nil, de
	}
	jr.noteChange(de)
	from := s.seq
	if from < 0 {
		// A check: everything from the next element on runs live.
		s.path.mu.Lock()
		from = s.path.seq
		s.path.mu.Unlock()
	}
	if err := d.goLive(s.path, from); err != nil {
		return nil, err
	}
	return nil, nil
}

// goLive makes context p run live from its element at ordinal from on,
// and withdraws the records inside p from that element on: they belong
// to the program as it was, and a later resume must not serve them.
func (d *domain) goLive(p *effectPath, from int32) error {
	p.mu.Lock()
	p.live = true
	p.mu.Unlock()
	jr := d.journal
	if jr.ix == nil {
		return nil
	}
	depth := 0
	prefix := ""
	if p.id != "" {
		depth = strings.Count(p.id, "/") + 1
		prefix = p.id + "/"
	}
	jr.mu.Lock()
	var stale []*Effect
	for id, e := range jr.ix.byID {
		if !strings.HasPrefix(id, prefix) || checkKind(e.Kind) {
			continue
		}
		ord := parseOrder(e.Order)
		if depth < len(ord) && ord[depth] >= from {
			stale = append(stale, e)
			delete(jr.ix.byID, id)
		}
	}
	jr.mu.Unlock()
	sort.Slice(stale, func(i, j int) bool { return stale[i].ID < stale[j].ID })
	for _, e := range stale {
		if err := d.withdraw(e, "changed"); err != nil {
			return err
		}
	}
	return nil
}

// withdraw records that e's record no longer holds (why: "changed" or
// "removed").
func (d *domain) withdraw(e *Effect, why string) error {
	v := &Effect{ID: e.ID, Kind: VoidKind, Pos: e.Pos, Label: e.Label, Result: []byte(`{"void":"` + why + `"}`)}
	return d.record(v, false)
}

// noteChange reports a change that the live run accepts
// (ResumeOptions.OnChange), once per identity.
func (jr *journaling) noteChange(de *DivergenceError) {
	jr.mu.Lock()
	if jr.reported == nil {
		jr.reported = map[string]bool{}
	}
	seen := jr.reported[de.ID]
	jr.reported[de.ID] = true
	fn := jr.onChange
	jr.mu.Unlock()
	if !seen && fn != nil {
		fn(de)
	}
}

// removed returns, after a dry replay, the recorded effects that the
// program no longer reaches: records it never looked up in a context it
// went past (completed, or left at a later element).
func (jr *journaling) removed() []*DivergenceError {
	if jr.ix == nil {
		return nil
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	var out []*DivergenceError
	for id, e := range jr.ix.byID {
		if checkKind(e.Kind) || jr.consumed[id] {
			continue
		}
		segs := strings.Split(id, "/")
		ord := parseOrder(e.Order)
		if len(ord) != len(segs) {
			continue
		}
		for k := len(segs) - 1; k >= 0; k-- {
			a := jr.visited[strings.Join(segs[:k], "/")]
			if a == nil {
				continue
			}
			a.mu.Lock()
			passed := a.done || (a.fanOut && ord[k] >= a.seq) || (!a.fanOut && ord[k] < a.seq-1)
			a.mu.Unlock()
			if passed {
				out = append(out, &DivergenceError{ID: id, Kind: ChangeRemoved, Pos: e.Pos, Label: e.Label, Recorded: e})
			}
			break
		}
	}
	return out
}

// sortChanges orders changes by where they are in the source.
func sortChanges(changes []*DivergenceError) {
	sort.SliceStable(changes, func(i, j int) bool {
		return bySource(changes[i].Pos, changes[i].ID, changes[j].Pos, changes[j].ID)
	})
}

// bySource reports whether (a, aID) comes before (b, bID) in source order:
// file, line, column, then id.
func bySource(a Position, aID string, b Position, bID string) bool {
	if a.File != b.File {
		return a.File < b.File
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	if a.Col != b.Col {
		return a.Col < b.Col
	}
	return aID < bID
}

// findings returns a dry replay's changes: those met on the way, by
// position, then the removed ones, by where they were recorded.
func (jr *journaling) findings() []*DivergenceError {
	jr.mu.Lock()
	met := append([]*DivergenceError(nil), jr.changes...)
	visited := make([]*effectPath, 0, len(jr.visited))
	for _, p := range jr.visited {
		visited = append(visited, p)
	}
	jr.mu.Unlock()
	for _, p := range visited {
		// A guess no later effect decided: the effect changed.
		if g := p.takeGuess(); g != nil {
			met = append(met, g.changed)
		}
	}
	sortChanges(met)
	gone := jr.removed()
	sortChanges(gone)
	return append(met, gone...)
}

// withdrawRemoved withdraws the records of removed effects whose removal
// the resume accepted (RerunChanged).
func (d *domain) withdrawRemoved(recs []*Effect) error {
	jr := d.journal
	for _, e := range recs {
		if jr.ix != nil {
			jr.mu.Lock()
			delete(jr.ix.byID, e.ID)
			jr.mu.Unlock()
		}
		if err := d.withdraw(e, "removed"); err != nil {
			return err
		}
	}
	return nil
}
