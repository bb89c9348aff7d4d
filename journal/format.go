package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/eval"
)

// formatVersion is the "v" of the meta records this package writes.
// Version 1 keyed effects by their source positions; its runs cannot be
// resumed by this version (ErrFormat).
const formatVersion = 2

// Record types (the payloads' "t").
const (
	typeMeta   = "meta"
	typeEffect = "effect"
	typeState  = "state"
)

var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// frameLen is the length of a line's framing: 8 hex digits, a space and
// the closing newline.
const frameLen = 10

// appendFrame appends payload framed as one line to dst.
func appendFrame(dst, payload []byte) []byte {
	const hexDigits = "0123456789abcdef"
	sum := crc32.Checksum(payload, castagnoli())
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[sum>>uint(shift)&0xf])
	}
	dst = append(dst, ' ')
	dst = append(dst, payload...)
	return append(dst, '\n')
}

// unframe checks one line (with its newline) and returns its payload, or
// why the line is bad.
func unframe(line []byte) (payload []byte, bad string) {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return nil, "the line has no newline"
	}
	if len(line) < frameLen || line[8] != ' ' {
		return nil, "the line is not framed as <crc> <payload>"
	}
	var want uint32
	for _, c := range line[:8] {
		switch {
		case '0' <= c && c <= '9':
			want = want<<4 | uint32(c-'0')
		case 'a' <= c && c <= 'f':
			want = want<<4 | uint32(c-'a'+10)
		default:
			return nil, "the line's checksum is not 8 lowercase hex digits"
		}
	}
	payload = line[9 : len(line)-1]
	if crc32.Checksum(payload, castagnoli()) != want {
		return nil, "checksum mismatch"
	}
	return payload, ""
}

// badRecord is what a scan visitor returns for a well-framed line whose
// payload is not a valid record.
type badRecord struct{ why string }

func (b *badRecord) Error() string { return b.why }

func badf(format string, args ...any) error { return &badRecord{fmt.Sprintf(format, args...)} }

// scan reads the records of the journal file at path from r and calls
// visit with each line's number (1-based), offset and payload; the
// payload is only valid during the call. A bad line (framing, checksum,
// or visit returning a *badRecord) that is the last line is returned as
// the torn tail; one that is followed by another line is an ErrCorrupt
// error. Any other error of visit stops the scan and is returned.
func scan(path string, r io.Reader, visit func(line int, off int64, payload []byte) error) (*Torn, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var (
		off     int64
		n       int
		long    []byte // a line longer than the reader's buffer
		pending *Torn  // the last bad line, if it turns out not to be the last
		pline   int
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if len(long) > 0 {
			long = append(long, chunk...)
			line = long
		}
		if len(line) > 0 {
			n++
			if pending != nil {
				return nil, fmt.Errorf("%w: %s line %d: %s", ErrCorrupt, path, pline, pending.Reason)
			}
			payload, bad := unframe(line)
			if bad == "" {
				if verr := visit(n, off, payload); verr != nil {
					var b *badRecord
					if !errors.As(verr, &b) {
						return nil, verr
					}
					bad = b.why
				}
			}
			if bad != "" {
				pending = &Torn{Offset: off, Bytes: len(line), Reason: bad}
				pline = n
			}
			off += int64(len(line))
			long = long[:0]
		}
		if err == io.EOF {
			return pending, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", path, err)
		}
	}
}

// recordJSON is the union of the payloads' fields, for decoding.
type recordJSON struct {
	T string `json:"t"`
	// meta
	V        int             `json:"v,omitempty"`
	Workflow string          `json:"workflow,omitempty"`
	Digest   string          `json:"digest,omitempty"`
	Entry    string          `json:"entry,omitempty"`
	Options  json.RawMessage `json:"options,omitempty"`
	Started  *time.Time      `json:"started,omitempty"`
	// effect and state
	At int64 `json:"at,omitempty"`
	// effect
	E json.RawMessage `json:"e,omitempty"`
	// state
	State     State           `json:"state,omitempty"`
	Error     string          `json:"error,omitempty"`
	Questions []eval.Question `json:"questions,omitempty"`
	Result    *string         `json:"result,omitempty"`
	Owner     string          `json:"owner,omitempty"`
}

// decoded is one decoded record.
type decoded struct {
	t      string
	meta   Meta
	effect *eval.Effect
	at     time.Time
	state  StateRecord
}

// effectPrefix starts every effect payload this package writes with its
// time, and effectPrefixNoTime one appended in the same millisecond as
// the record before it; decode takes a shortcut for them.
const (
	effectPrefix       = `{"t":"effect","at":`
	effectPrefixNoTime = `{"t":"effect","e":`
)

// decodeRecord decodes a payload; errors are *badRecord.
func decodeRecord(payload []byte) (decoded, error) {
	if e, at, ok := fastEffect(payload); ok {
		if ef, err := decodeEffect(e); err == nil {
			return decoded{t: typeEffect, effect: ef, at: unixMilli(at)}, nil
		}
		// Not quite as written here: decode it in full below.
	}
	var j recordJSON
	if err := json.Unmarshal(payload, &j); err != nil {
		return decoded{}, badf("the record is not valid JSON: %v", err)
	}
	switch j.T {
	case typeMeta:
		if j.V < 1 {
			return decoded{}, badf("the metadata record has no format version")
		}
		if j.V > formatVersion {
			return decoded{}, badf("the journal has format version %d; this program reads version %d", j.V, formatVersion)
		}
		if j.V < formatVersion {
			return decoded{}, fmt.Errorf("%w: the run was recorded by an earlier aml (journal format %d, which keyed effects by their source positions); this aml reads format %d: finish the run with the aml that recorded it, or start it again with aml run", ErrFormat, j.V, formatVersion)
		}
		m := Meta{Workflow: j.Workflow, WorkflowDigest: j.Digest, Entry: j.Entry, Options: j.Options}
		if j.Started != nil {
			m.Started = *j.Started
		}
		return decoded{t: typeMeta, meta: m}, nil
	case typeEffect:
		if len(j.E) == 0 {
			return decoded{}, badf("the effect record has no effect")
		}
		ef, err := decodeEffect(j.E)
		if err != nil {
			return decoded{}, err
		}
		return decoded{t: typeEffect, effect: ef, at: unixMilli(j.At)}, nil
	case typeState:
		switch j.State {
		case Running, Suspended, Failed, Succeeded:
		default:
			return decoded{}, badf("the state record has an unknown state %q", j.State)
		}
		st := StateRecord{State: j.State, At: time.UnixMilli(j.At), Error: j.Error, Questions: j.Questions, Owner: j.Owner}
		if j.Result != nil {
			st.Result = *j.Result
		}
		return decoded{t: typeState, state: st}, nil
	}
	return decoded{}, badf("unknown record type %q", j.T)
}

// unixMilli is the time of a record's "at", zero for none.
func unixMilli(at int64) time.Time {
	if at <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(at)
}

// fastEffect splits an effect payload as this package writes it,
// {"t":"effect","at":N,"e":E} or {"t":"effect","e":E}, into E and N (0
// for none) without a JSON decoder. It reports false for anything else,
// which is then decoded in full.
func fastEffect(payload []byte) (e []byte, at int64, ok bool) {
	if rest, ok := bytes.CutPrefix(payload, []byte(effectPrefixNoTime)); ok {
		if len(rest) < 2 || rest[len(rest)-1] != '}' {
			return nil, 0, false
		}
		return rest[:len(rest)-1], 0, true
	}
	rest, ok := bytes.CutPrefix(payload, []byte(effectPrefix))
	if !ok {
		return nil, 0, false
	}
	i := 0
	for i < len(rest) && i < 19 && '0' <= rest[i] && rest[i] <= '9' {
		at = at*10 + int64(rest[i]-'0')
		i++
	}
	if i == 0 {
		return nil, 0, false
	}
	rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"e":`))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return nil, 0, false
	}
	return rest[:len(rest)-1], at, true
}

// peekEffect reports whether payload is an effect record as this package
// writes it, and its time (0 for the time of the record before it),
// without decoding it.
func peekEffect(payload []byte) (at int64, ok bool) {
	_, at, ok = fastEffect(payload)
	return at, ok
}

// decodeEffect decodes an effect's JSON; errors are *badRecord.
func decodeEffect(b []byte) (*eval.Effect, error) {
	e := new(eval.Effect)
	if err := e.UnmarshalJSON(b); err != nil {
		return nil, badf("the effect is not valid JSON: %v", err)
	}
	if e.ID == "" {
		return nil, badf("the effect has no id")
	}
	if e.Kind == "" {
		kind, ok := kindOfID(e.ID)
		if !ok {
			return nil, badf("the effect %s has no kind", e.ID)
		}
		e.Kind = kind
	}
	if e.Label == "" {
		e.Label = defaultLabel(e.Kind)
	}
	return e, nil
}

// defaultLabel is the label of an effect of kind that appendEffect does
// not write out: "agent()" for an agent, and so on.
func defaultLabel(kind string) string { return kind + "()" }

// appendEffect appends the framed record of e, appended at atMs
// milliseconds since the epoch, or with no time of its own (the time of
// the record before it) for atMs 0. The payload is encoded in place after
// room for the checksum, which is filled in last: one record costs no
// allocation. What decodeEffect can tell from the id (the kind and the
// position) and the default label are not written out.
func appendEffect(dst []byte, e *eval.Effect, atMs int64) ([]byte, error) {
	c := *e
	if kind, ok := kindOfID(e.ID); ok && kind == e.Kind {
		c.Kind = ""
	}
	if e.Label == defaultLabel(e.Kind) {
		c.Label = ""
	}
	start := len(dst)
	dst = append(dst, "00000000 "...)
	body := len(dst)
	if atMs > 0 {
		dst = append(dst, effectPrefix...)
		dst = strconv.AppendInt(dst, atMs, 10)
		dst = append(dst, `,"e":`...)
	} else {
		dst = append(dst, effectPrefixNoTime...)
	}
	dst = c.AppendJSON(dst)
	dst = append(dst, '}')
	payload := dst[body:]
	if bytes.IndexByte(payload, '\n') >= 0 {
		return dst[:start], fmt.Errorf("cannot encode the effect %s: its JSON contains a newline", e.ID)
	}
	const hexDigits = "0123456789abcdef"
	sum := crc32.Checksum(payload, castagnoli())
	for i, shift := 0, 28; shift >= 0; i, shift = i+1, shift-4 {
		dst[start+i] = hexDigits[sum>>uint(shift)&0xf]
	}
	return append(dst, '\n'), nil
}

// appendMeta appends the framed metadata record.
func appendMeta(dst []byte, m Meta) ([]byte, error) {
	started := m.Started
	payload, err := json.Marshal(recordJSON{T: typeMeta, V: formatVersion, Workflow: m.Workflow, Digest: m.WorkflowDigest, Entry: m.Entry, Options: m.Options, Started: &started})
	if err != nil {
		return dst, fmt.Errorf("cannot encode the run's metadata: %w", err)
	}
	return frameChecked(dst, payload)
}

// appendState appends the framed state record.
func appendState(dst []byte, st StateRecord) ([]byte, error) {
	j := recordJSON{T: typeState, At: st.At.UnixMilli(), State: st.State, Error: st.Error, Questions: st.Questions, Owner: st.Owner}
	if st.State == Succeeded {
		j.Result = &st.Result
	}
	payload, err := json.Marshal(j)
	if err != nil {
		return dst, fmt.Errorf("cannot encode the %s state: %w", st.State, err)
	}
	return frameChecked(dst, payload)
}

func frameChecked(dst, payload []byte) ([]byte, error) {
	if bytes.IndexByte(payload, '\n') >= 0 {
		// encoding/json never does this; a custom MarshalJSON could.
		return dst, errors.New("the record's JSON contains a newline")
	}
	return appendFrame(dst, payload), nil
}

// kindOfID reads an effect's kind back from its id, as eval builds it:
// [path/]kind#n, or [path/]kind:what#n for a check. appendEffect only
// relies on it when it gives back the effect's own kind.
func kindOfID(id string) (kind string, ok bool) {
	last := id[strings.LastIndexByte(id, '/')+1:]
	h := strings.LastIndexByte(last, '#')
	if h <= 0 || !digits(last[h+1:]) {
		return "", false
	}
	kind = last[:h]
	if k, _, found := strings.Cut(kind, ":"); found {
		kind = k
	}
	return kind, kind != ""
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
