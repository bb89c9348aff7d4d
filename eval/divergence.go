package eval

import (
	"sort"
	"strings"
)

// ChangeKind says how a resumed program differs from its journal at one
// place (see DivergenceError).
type ChangeKind string

// The kinds of change.
const (
	// ChangeRequest: an effect whose place matches a record, but whose
	// request (or kind) changed.
	ChangeRequest ChangeKind = "changed"
	// ChangeInserted: an effect with no record, where the recorded run
	// went on past its place.
	ChangeInserted ChangeKind = "inserted"
	// ChangeRemoved: a recorded effect that the program no longer
	// reaches.
	ChangeRemoved ChangeKind = "removed"
)

// DivergenceError reports a place where the resumed program no longer
// matches its journal: the script, an included file or a read value
// changed since the journal recorded the run (see ChangeKind).
type DivergenceError struct {
	// ID is the identity of the place.
	ID string
	// Kind says what changed; "" reads as ChangeRequest.
	Kind ChangeKind
	// Pos and Label name the node: where the program reaches it now, or,
	// for ChangeRemoved, where it was when it was recorded (Recorded.Pos).
	Pos   Position
	Label string
	// Changed lists the request fields whose digests differ, sorted
	// (ChangeRequest).
	Changed []string
	// Recorded is the record at the place (nil for ChangeInserted).
	Recorded *Effect
	// Now, for ChangeRemoved, is the effect the program reaches in the
	// removed one's place, when there is one; its ID is set when the run
	// recorded it later.
	Now *Effect
	// Cassette is set when the journal is a cassette (see
	// EvaluateOptions.Cassette).
	Cassette bool
}

func (e *DivergenceError) Error() string {
	d := e.Describe()
	if e.Cassette {
		return d + "; restore the workflow (and its inputs) as they were, or record the cassette again with aml run --journal"
	}
	switch e.Kind {
	case ChangeInserted:
		return d + "; restore the workflow (and its inputs) as they were, or resume with --rerun-changed (ResumeOptions.RerunChanged) to run it and everything after it in its sequential context live"
	case ChangeRemoved:
		return d + "; restore the workflow (and its inputs) as they were, or resume with --rerun-changed (ResumeOptions.RerunChanged) to drop its record and run everything after it in its sequential context live"
	}
	return d + "; restore the workflow (and its inputs) as they were, or resume with --rerun-changed (ResumeOptions.RerunChanged) to run this effect and everything after it in its sequential context live"
}

// Describe says what changed, where, without the advice of Error.
func (e *DivergenceError) Describe() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	}
	b.WriteString(e.Label)
	switch e.Kind {
	case ChangeInserted:
		b.WriteString(" was inserted since the run was recorded: the journal has no record of it, but records of what the run did after its place")
	case ChangeRemoved:
		b.WriteString(" was removed since the run was recorded: the journal recorded it")
		if e.Pos.IsValid() {
			b.WriteString(" here")
		}
		b.WriteString(", and the program no longer reaches it")
		if n := e.Now; n != nil {
			b.WriteString("; in its place runs ")
			b.WriteString(n.Label)
			if n.Pos.IsValid() {
				b.WriteString(" at ")
				b.WriteString(n.Pos.String())
			}
			if n.ID != "" {
				b.WriteString(", which the run recorded after it")
			}
		}
	default:
		b.WriteString(" no longer matches the journal: ")
		b.WriteString(changedText(e.Changed))
		if e.Cassette {
			b.WriteString(" changed since the cassette was recorded")
		} else {
			b.WriteString(" changed since the run was recorded")
		}
		if r := e.Recorded; r != nil && r.Label != "" && r.Label != e.Label {
			b.WriteString(" (in its place the run recorded ")
			b.WriteString(r.Label)
			if r.Pos.IsValid() {
				b.WriteString(" at ")
				b.WriteString(r.Pos.String())
			}
			b.WriteString(")")
		}
	}
	return b.String()
}

func changedText(fields []string) string {
	switch len(fields) {
	case 0:
		return "its request"
	case 1:
		return "its " + fields[0]
	}
	return "its " + strings.Join(fields[:len(fields)-1], ", ") + " and " + fields[len(fields)-1]
}

// changedFields names the fields whose digests differ between two
// fingerprints (see Effect.Request), sorted.
func changedFields(old, now string) []string {
	if old == now {
		return nil
	}
	o, n := RequestFields(old), RequestFields(now)
	var out []string
	for k, v := range n {
		if o[k] != v {
			out = append(out, k)
		}
	}
	for k := range o {
		if _, ok := n[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
