package eval

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"github.com/aml-go/aml/internal/jsonstr"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// VoidKind is the Kind of a record that withdraws the record appended
// before it under the same identity: a resume that accepted a change
// (RerunChanged) withdraws the records the changed program will not
// serve again, so that a later resume does not serve them either. A
// journal keeps it like any record; the evaluator treats an identity
// whose last record is void as having none.
const VoidKind = "void"

// Effect is one recorded effect of a journaled run.
type Effect struct {
	// ID is the effect's stable identity (see Journal).
	ID string
	// Kind is agent, script, tool, ask, workspace, sandbox, include,
	// read, RetryKind, or VoidKind.
	Kind string
	// Pos is the authored position of the node when it was recorded,
	// its file relative to the workflow's directory
	// (EvaluateOptions.SourceRoot). It names the node; it is not part of
	// the identity.
	Pos Position
	// Order holds the ordinal in its context of each segment of ID,
	// dotted ("3.0.1"; a branch's ordinal is its index), so that a
	// resume knows what the recorded run did after what. Checks
	// (include, read) have none.
	Order string
	// Label names the node in messages, for example agent(name="review").
	Label string
	// Request is the fingerprint of the request: "field=digest" pairs of
	// the fields that determine the result, sorted by field and joined
	// by ";", each digest short (see Fingerprint). Values are never
	// stored. RequestFields splits it.
	Request string
	// Result is the kind's result as JSON (nil for include and read).
	Result json.RawMessage
	// Checkpoint names the copy of the workspace's files the journal took
	// right after the effect (see Checkpointer), or "".
	Checkpoint string
}

type effectJSON struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind,omitempty"`
	File    string          `json:"file,omitempty"`
	Line    int32           `json:"line,omitempty"`
	Col     int32           `json:"col,omitempty"`
	Label   string          `json:"label,omitempty"`
	Request string          `json:"req,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	CP      string          `json:"cp,omitempty"`
	Order   string          `json:"o,omitempty"`
}

// MarshalJSON encodes the effect with its position as file, line and col
// (see AppendJSON).
func (e *Effect) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil), nil
}

// AppendJSON appends the effect's compact JSON object to dst: id, kind,
// file, line, col, o (the order), label, req, result and cp, the empty
// ones left out. Result must be valid compact JSON, as the evaluator
// records it. Journals encode an effect per record, so it is written by
// hand rather than through reflection.
func (e *Effect) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = jsonstr.Append(dst, e.ID)
	if e.Kind != "" {
		dst = append(dst, `,"kind":`...)
		dst = jsonstr.Append(dst, e.Kind)
	}
	if e.Pos.File != "" {
		dst = append(dst, `,"file":`...)
		dst = jsonstr.Append(dst, e.Pos.File)
	}
	if e.Pos.Line != 0 {
		dst = append(dst, `,"line":`...)
		dst = strconv.AppendInt(dst, int64(e.Pos.Line), 10)
	}
	if e.Pos.Col != 0 {
		dst = append(dst, `,"col":`...)
		dst = strconv.AppendInt(dst, int64(e.Pos.Col), 10)
	}
	if e.Order != "" {
		dst = append(dst, `,"o":`...)
		dst = jsonstr.Append(dst, e.Order)
	}
	if e.Label != "" {
		dst = append(dst, `,"label":`...)
		dst = jsonstr.Append(dst, e.Label)
	}
	if e.Request != "" {
		dst = append(dst, `,"req":`...)
		dst = jsonstr.Append(dst, e.Request)
	}
	if len(e.Result) > 0 {
		dst = append(dst, `,"result":`...)
		dst = append(dst, e.Result...)
	}
	if e.Checkpoint != "" {
		dst = append(dst, `,"cp":`...)
		dst = jsonstr.Append(dst, e.Checkpoint)
	}
	return append(dst, '}')
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (e *Effect) UnmarshalJSON(b []byte) error {
	var j effectJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Effect{ID: j.ID, Kind: j.Kind, Pos: Position{File: j.File, Line: j.Line, Col: j.Col}, Label: j.Label, Request: j.Request, Result: j.Result, Checkpoint: j.CP, Order: j.Order}
	return nil
}

// Fingerprint returns the short digest the evaluator records for a
// request field's value: 12 characters of base64url SHA-256 (72 bits),
// enough to notice a change, not to recover the value.
func Fingerprint(value string) string {
	sum := sha256.Sum256([]byte(value))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// digest is the short digest of a request field: 11 characters of
// base64url xxHash-64. It notices changes; it is not meant to resist an
// adversary (Fingerprint, SHA-256, digests application reads).
func digest(value string) string {
	var out [11]byte
	return string(appendDigest(out[:0], value))
}

// appendDigest appends the digest of value to dst: the 64 bits of
// xxHash-64, big-endian, in unpadded base64url (as
// base64.RawURLEncoding encodes the 8 bytes), written out by hand
// because a journaled run digests every field of every effect.
func appendDigest(dst []byte, value string) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	v := xxhash.Sum64String(value)
	for shift := 58; shift >= 4; shift -= 6 {
		dst = append(dst, alphabet[v>>uint(shift)&63])
	}
	return append(dst, alphabet[v&15<<2])
}

// RecordedRead is an application-owned value the program read before or outside
// the tree, such as an env() value: its digest is recorded, never the
// value, and a changed value is a divergence on resume.
type RecordedRead struct {
	// Kind names the source, for example "env".
	Kind string
	// Name names the value, for example the variable's name.
	Name string
	// Pos is where it was read.
	Pos Position
	// Digest identifies the value (Fingerprint of it, or of a marker for
	// "not set").
	Digest string
}

// RequestFields splits a fingerprint (Effect.Request) into field names
// and digests.
func RequestFields(fp string) map[string]string {
	out := map[string]string{}
	for fp != "" {
		var pair string
		pair, fp, _ = strings.Cut(fp, ";")
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = v
		}
	}
	return out
}

// fingerprint builds an Effect.Request, appended to b from start: add
// fields in sorted order.
type fingerprint struct {
	b     []byte
	start int
}

// add appends field name with the digest of value.
func (f *fingerprint) add(name, value string) {
	f.b = appendField(f.b, f.start, name, value)
}

// addDigest appends field name with a digest computed elsewhere.
func (f *fingerprint) addDigest(name, sum string) {
	f.b = append(startField(f.b, f.start, name), sum...)
}

// appendField appends to fingerprint b (started at b[start]) field name
// with the digest of value.
func appendField(b []byte, start int, name, value string) []byte {
	return appendDigest(startField(b, start, name), value)
}

// startField appends to fingerprint b (started at b[start]) the name of
// a field.
func startField(b []byte, start int, name string) []byte {
	if len(b) > start {
		b = append(b, ';')
	}
	b = append(b, name...)
	return append(b, '=')
}

func (f *fingerprint) String() string { return string(f.b[f.start:]) }

// fp is the fingerprint of name, value pairs given in sorted order.
func fp(pairs ...string) string {
	var buf [128]byte
	f := fingerprint{b: buf[:0]}
	for i := 0; i+1 < len(pairs); i += 2 {
		f.add(pairs[i], pairs[i+1])
	}
	return f.String()
}

// decodeJSON decodes a recorded result, numbers as int64 or float64 as
// the evaluator's JSON-like values have them.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	switch r := v.(type) {
	case *agentResult:
		r.Structured = normalizeNumbers(r.Structured)
	case *toolResult:
		r.Output = normalizeNumbers(r.Output)
	case *askResult:
		r.Answer = normalizeNumbers(r.Answer)
	}
	return nil
}
