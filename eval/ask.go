package eval

import (
	"context"
	"fmt"
	"strconv"
)

// askResult is the recorded answer of an ask().
type askResult struct {
	Answer any `json:"answer"`
}

// Ask asks a person question and returns the answer: a string when
// schema is nil, else a JSON-like value valid for schema. id names the
// question across replays ("" uses its effect identity: the path of
// enclosing components and branches, pos and an occurrence counter).
//
// In a journaled evaluation a recorded answer is returned at once; an
// answer given for the question (ResumeOptions.Answers) is validated,
// recorded and returned; otherwise the question becomes pending and Ask
// fails, so the evaluation ends with a *SuspendedError once the work that
// does not wait for an answer is done. Without a journal Ask calls
// Options.Ask, and fails when the runtime has none.
func (cc *ComponentContext) Ask(question, id string, schema *Schema, pos Position) (any, error) {
	if !cc.active.Load() {
		return nil, &EvaluationError{Msg: "ask() is only available while an AML component is active", Pos: pos}
	}
	if question == "" {
		return nil, newError(pos, "ask() needs a non-empty question")
	}
	if cc.static {
		return nil, cc.staticErr("ask()", pos)
	}
	cc.wg.Add(1)
	defer cc.wg.Done()
	d := cc.d
	if id != "" {
		if err := d.claimQuestion(id, pos); err != nil {
			return nil, err
		}
	}
	q := Question{ID: id, Text: question, Pos: pos, Source: pos.String()}
	if schema != nil {
		q.Schema = schema.Document()
	}
	if d.journal == nil {
		return d.askLive(cc.ctx, q, schema)
	}
	sc := cc.scope()
	at := sc.path.next("ask")
	e := &Effect{ID: at.id, Order: at.order, Kind: "ask", Pos: d.journal.relPos(pos), Request: fp("question", question)}
	if q.ID == "" {
		q.ID = e.ID
	}
	e.Label = "ask(" + strconv.Quote(q.ID) + ")"
	if schema != nil {
		e.Request = fp("question", question, "schema", schema.JSON())
	}
	rec, err := d.replay(at, e.Kind, pos, e.Label, e.Request)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		var r askResult
		if err := decodeJSON(rec.Result, &r); err != nil {
			return nil, &EvaluationError{Msg: "the journal's record of " + e.Label + " cannot be read", Pos: pos, Err: err}
		}
		return r.Answer, nil
	}
	jr := d.journal
	answer, ok := jr.answers[q.ID]
	if !ok && jr.cassette {
		return nil, newError(pos, e.Label+" has no recorded answer in the cassette; record the cassette again with aml run --journal and answer the question")
	}
	if !ok && jr.asksLive && !jr.verify && d.rt.opts.Ask != nil {
		// The run waits for the answer where it is, and records it.
		if answer, err = d.askLive(cc.ctx, q, schema); err != nil {
			return nil, err
		}
		ok = true
	}
	if !ok {
		jr.mu.Lock()
		if jr.asked == nil {
			jr.asked = map[string]bool{}
		}
		if !jr.asked[q.ID] {
			jr.asked[q.ID] = true
			jr.pending = append(jr.pending, q)
		}
		jr.mu.Unlock()
		return nil, &EvaluationError{Msg: fmt.Sprintf("%s is waiting for an answer", e.Label), Pos: pos, Err: errSuspend}
	}
	answer = normalizeNumbers(copyJSON(answer))
	if err := checkAnswer(q, schema, answer); err != nil {
		return nil, err
	}
	b, err := marshalAnswer(answer)
	if err != nil {
		return nil, &EvaluationError{Msg: "cannot record " + e.Label + " in the journal", Pos: pos, Err: err}
	}
	e.Result = b
	if err := d.record(e, true); err != nil {
		return nil, err
	}
	return answer, nil
}

// claimQuestion takes question id for the ask() at pos: an answer
// answers exactly one question, so a second ask() with an id already
// asked in this evaluation is an error naming both.
func (d *domain) claimQuestion(id string, pos Position) error {
	d.qMu.Lock()
	defer d.qMu.Unlock()
	if first, ok := d.questions[id]; ok {
		where := "at " + first.String()
		if first == pos {
			where = "at the same place (a loop, or a component called again)"
		}
		return newError(pos, fmt.Sprintf("ask(id=%q): the question id %q was already asked %s in this run; an answer answers exactly one question, so give each ask() its own id, for example id = %q + str(i) in a loop", id, id, where, id+"-"))
	}
	if d.questions == nil {
		d.questions = map[string]Position{}
	}
	d.questions[id] = pos
	return nil
}

// askLive asks through Options.Ask.
func (d *domain) askLive(ctx context.Context, q Question, schema *Schema) (any, error) {
	ask := d.rt.opts.Ask
	if ask == nil {
		return nil, newError(q.Pos, "ask() has no way to reach a person: evaluate with a Journal (the run then suspends until the question is answered), or give the runtime an Options.Ask")
	}
	unblock := d.workers.block()
	answer, err := ask(ctx, q)
	unblock()
	if err != nil {
		return nil, &EvaluationError{Msg: fmt.Sprintf("ask(%q) got no answer", q.Text), Pos: q.Pos, Err: err}
	}
	answer = normalizeNumbers(copyJSON(answer))
	if err := checkAnswer(q, schema, answer); err != nil {
		return nil, err
	}
	return answer, nil
}

// CheckAnswer reports whether answer is valid for a question with the
// given schema document (nil: free text). The message names the question
// and its schema.
func CheckAnswer(q Question, answer any) error {
	var schema *Schema
	if q.Schema != nil {
		s, err := NewSchema(q.Schema)
		if err != nil {
			return fmt.Errorf("question %q has an invalid schema: %w", q.ID, err)
		}
		schema = s
	}
	return checkAnswer(q, schema, normalizeNumbers(copyJSON(answer)))
}

func checkAnswer(q Question, schema *Schema, answer any) error {
	where := ""
	if q.Pos.IsValid() {
		where = " (asked at " + q.Pos.String() + ")"
	} else if q.Source != "" {
		where = " (asked at " + q.Source + ")"
	}
	if schema == nil {
		if _, ok := answer.(string); !ok {
			return newError(q.Pos, fmt.Sprintf("the answer to question %q%s must be text, got %s", q.ID, where, jsonTypeName(answer)))
		}
		return nil
	}
	if err := schema.Validate(answer); err != nil {
		return &EvaluationError{Msg: fmt.Sprintf("the answer to question %q%s does not match its schema %s", q.ID, where, schema.JSON()), Pos: q.Pos, Err: err}
	}
	return nil
}

func marshalAnswer(v any) ([]byte, error) {
	s, err := CanonicalJSON(v)
	if err != nil {
		return nil, err
	}
	return []byte(`{"answer":` + s + `}`), nil
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case string:
		return "text"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Read records an application read made by component code (an env()
// value) in a journaled evaluation, or checks it against the recorded
// digest on resume: a changed value is a *DivergenceError. Without a
// journal it does nothing.
func (cc *ComponentContext) Read(r RecordedRead) error {
	if cc.d == nil || cc.d.journal == nil {
		return nil
	}
	return cc.d.read(cc.scope().path, r)
}
