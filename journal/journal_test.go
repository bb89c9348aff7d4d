package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

func testMeta() Meta {
	return Meta{
		Workflow:       "review.star",
		WorkflowDigest: strings.Repeat("ab", 32),
		Entry:          "main",
		Options:        json.RawMessage("{\n  \"model\": \"opus\",\n  \"max-steps\": 10\n}"),
		Started:        time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC),
	}
}

// agentEffect is a typical agent effect: a nested id, five request
// fingerprints and a small structured result.
func agentEffect(n int, result string) *eval.Effect {
	return &eval.Effect{
		ID:    fmt.Sprintf("c#0/agent#%d", n),
		Order: fmt.Sprintf("0.%d", n),
		Kind:  "agent",
		Pos:   eval.Position{File: "review.star", Line: 14, Col: 5},
		Label: `agent(name="reviewer")`,
		// As the evaluator writes them: five fields, 11-character digests.
		Request: fmt.Sprintf("model=%.11s;prompt=%.11s;provider=%.11s;schema=%.11s;system=%.11s",
			eval.Fingerprint("opus"), eval.Fingerprint(fmt.Sprint("prompt", n)), eval.Fingerprint("claude"), eval.Fingerprint("{}"), eval.Fingerprint("system")),
		Result: json.RawMessage(result),
	}
}

func mustCreate(t testing.TB, dir string) *Run {
	t.Helper()
	r, err := Create(dir, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustOpen(t testing.TB, dir, id string) *Run {
	t.Helper()
	r, err := Open(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustRecord(t testing.TB, r *Run, es ...*eval.Effect) {
	t.Helper()
	for _, e := range es {
		if err := r.Record(e); err != nil {
			t.Fatal(err)
		}
	}
}

func mustClose(t testing.TB, r *Run) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func sameEffect(t *testing.T, what string, got, want *eval.Effect) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no effect, want %+v", what, want)
	}
	// The journal keeps a result byte for byte.
	w := *want
	if !reflect.DeepEqual(*got, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, *got, w)
	}
}

func logPath(dir, id string) string { return filepath.Join(dir, id, logName) }

func readLog(t *testing.T, dir, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(logPath(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendLog(t *testing.T, dir, id string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(logPath(dir, id), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	id := r.ID()
	if r.State() != Running {
		t.Errorf("a new run's state is %q, want running", r.State())
	}
	first := agentEffect(0, `{"text":"first"}`)
	script := &eval.Effect{ID: "script#0", Order: "1", Kind: "script", Pos: eval.Position{File: "review.star", Line: 20, Col: 1}, Label: "script()", Request: "command=" + eval.Fingerprint("ls") + ";environment=" + eval.Fingerprint(""), Result: json.RawMessage(`"a\nb\n"`)}
	include := &eval.Effect{ID: `include:lib%2Fy.star#0`, Kind: "include", Pos: eval.Position{File: "lib/x.star", Line: 2, Col: 1}, Label: "include(\"lib/y.star\")", Request: "content=" + eval.Fingerprint("x")}
	// Neither can be abbreviated: a kind other than its id's, an id of
	// another form.
	odd := &eval.Effect{ID: "agent#1", Kind: "tool", Pos: eval.Position{File: "me@host.star", Line: 3, Col: 4}, Label: "tool(t)", Result: json.RawMessage(`{"output":"<ok>"}`)}
	custom := &eval.Effect{ID: "question-1", Kind: "ask", Pos: eval.Position{File: "review.star", Line: 9, Col: 2}, Result: json.RawMessage(`"yes"`)}
	again := agentEffect(0, `{"text":"second"}`)
	mustRecord(t, r, first, script, include, odd, custom, again)
	if got := r.Lookup(first.ID); got != again {
		t.Errorf("Lookup before Sync: got %+v, want the last record", got)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r)

	r = mustOpen(t, dir, id)
	defer r.Close()
	if r.ID() != id {
		t.Errorf("ID() = %q, want %q", r.ID(), id)
	}
	sameEffect(t, "the repeated id", r.Lookup(first.ID), again)
	sameEffect(t, "script", r.Lookup(script.ID), script)
	sameEffect(t, "include", r.Lookup(include.ID), include)
	sameEffect(t, "odd file name", r.Lookup(odd.ID), odd)
	// An effect without a label reads back with its kind's default one.
	customRead := *custom
	customRead.Label = "ask()"
	sameEffect(t, "custom id", r.Lookup(custom.ID), &customRead)
	if r.Lookup("agent#7") != nil {
		t.Error("Lookup of an unknown id returned an effect")
	}
	all := r.Effects()
	want := []*eval.Effect{first, script, include, odd, &customRead, again}
	if len(all) != len(want) {
		t.Fatalf("Effects() has %d records, want %d", len(all), len(want))
	}
	for i := range want {
		sameEffect(t, fmt.Sprintf("Effects()[%d]", i), all[i], want[i])
	}
	m, wm := r.Meta(), testMeta()
	if m.Workflow != wm.Workflow || m.WorkflowDigest != wm.WorkflowDigest || m.Entry != wm.Entry || !m.Started.Equal(wm.Started) {
		t.Errorf("Meta() = %+v, want %+v", m, wm)
	}
	if string(m.Options) != `{"model":"opus","max-steps":10}` {
		t.Errorf("Meta().Options = %s, want the options compacted", m.Options)
	}
	if r.State() != Running || r.Torn() != nil {
		t.Errorf("State() = %q, Torn() = %v; want running and no torn tail", r.State(), r.Torn())
	}

	// The file: one framed record per line, the kind left out only where
	// the id gives it back.
	lines := strings.Split(strings.TrimSuffix(string(readLog(t, dir, id)), "\n"), "\n")
	if len(lines) != 2+len(want) {
		t.Fatalf("journal.log has %d lines, want %d", len(lines), 2+len(want))
	}
	for i, l := range lines {
		if _, bad := unframe([]byte(l + "\n")); bad != "" {
			t.Errorf("line %d: %s: %s", i+1, bad, l)
		}
	}
	if !strings.Contains(lines[0], `"t":"meta"`) || !strings.Contains(lines[1], `"t":"state"`) {
		t.Errorf("the first records are not meta and state:\n%s\n%s", lines[0], lines[1])
	}
	if strings.Contains(lines[2], `"kind"`) || !strings.Contains(lines[2], `"file":"review.star","line":14,"col":5`) || !strings.Contains(lines[2], `"o":"0.0"`) {
		t.Errorf("an agent effect was written with its redundant kind or without its position and order: %s", lines[2])
	}
	if strings.Contains(lines[4], `"kind"`) {
		t.Errorf("a check was written with its redundant kind: %s", lines[4])
	}
	if !strings.Contains(lines[5], `"kind":"tool"`) || !strings.Contains(lines[6], `"kind":"ask"`) {
		t.Errorf("effects whose ids do not give their kind lost it:\n%s\n%s", lines[5], lines[6])
	}
}

func TestStates(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	qs := []eval.Question{{ID: "q1", Text: "Ship it?", Source: "review.star:3:1"}, {ID: "q2", Text: "Which?", Schema: map[string]any{"type": "string"}}}
	if err := r.SetState(StateRecord{State: Suspended, Questions: qs}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetState(StateRecord{State: Interrupted}); err == nil {
		t.Error("SetState(interrupted) succeeded; it is not a recorded state")
	}
	if got := r.Questions(); !reflect.DeepEqual(got, qs) {
		t.Errorf("Questions() = %+v, want %+v", got, qs)
	}
	mustClose(t, r)
	r = mustOpen(t, dir, r.ID())
	if r.State() != Suspended || !reflect.DeepEqual(r.Questions(), qs) {
		t.Errorf("after Open: State() = %q, Questions() = %+v", r.State(), r.Questions())
	}
	if err := r.SetState(StateRecord{State: Running}); err != nil {
		t.Fatal(err)
	}
	if r.Questions() != nil {
		t.Errorf("Questions() = %+v for a running run, want none", r.Questions())
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	if err := r.SetState(StateRecord{State: Failed, At: at, Error: "agent(name=\"x\") failed:\nboom"}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r)
	r = mustOpen(t, dir, r.ID())
	defer r.Close()
	st := r.LastState()
	if st.State != Failed || st.Error != "agent(name=\"x\") failed:\nboom" || !st.At.Equal(at) {
		t.Errorf("LastState() = %+v", st)
	}
}

func TestPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "journal")
	r := mustCreate(t, dir)
	defer r.Close()
	for _, c := range []struct {
		path string
		want fs.FileMode
		dir  bool
	}{
		{dir, 0o700, true},
		{filepath.Join(dir, r.ID()), 0o700, true},
		{logPath(dir, r.ID()), 0o600, false},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() != c.dir || fi.Mode().Perm() != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.want)
		}
	}
}

func TestTornTail(t *testing.T) {
	e1 := agentEffect(1, `{"text":"one"}`)
	e2 := agentEffect(2, `{"text":"two"}`)
	e3 := agentEffect(3, `{"text":"three"}`)
	line2, err := appendEffect(nil, e2, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	badSum := bytes.Clone(line2)
	badSum[0] ^= 1 // still a hex digit, another checksum
	badJSON := appendFrame(nil, []byte(`{"t":"effect","at":1,"e":{"id":`))
	for _, c := range []struct {
		name string
		tail []byte
	}{
		{"half a record", line2[:len(line2)/2]},
		{"a wrong checksum", badSum},
		{"bad JSON", badJSON},
		{"no newline", line2[:len(line2)-1]},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := mustCreate(t, dir)
			id := r.ID()
			mustRecord(t, r, e1)
			mustClose(t, r)
			good := readLog(t, dir, id)
			appendLog(t, dir, id, c.tail)

			r = mustOpen(t, dir, id)
			torn := r.Torn()
			if torn == nil || torn.Offset != int64(len(good)) || torn.Bytes != len(c.tail) {
				t.Fatalf("Torn() = %+v, want offset %d and %d bytes", torn, len(good), len(c.tail))
			}
			sameEffect(t, "the record before the torn one", r.Lookup(e1.ID), e1)
			if r.Lookup(e2.ID) != nil || len(r.Effects()) != 1 {
				t.Errorf("the torn record was read: %v", r.Effects())
			}
			// Closing without appending leaves the file alone.
			mustClose(t, r)
			if got := readLog(t, dir, id); !bytes.Equal(got, append(bytes.Clone(good), c.tail...)) {
				t.Fatalf("Open and Close changed the file:\n%q", got)
			}

			r = mustOpen(t, dir, id)
			mustRecord(t, r, e3)
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			got := readLog(t, dir, id)
			if !bytes.HasPrefix(got, good) {
				t.Fatalf("the records before the torn one changed:\n%q", got)
			}
			rest := got[len(good):]
			if _, bad := unframe(rest); bad != "" || bytes.Count(rest, []byte("\n")) != 1 {
				t.Fatalf("after the next append the file ends with %q, want one valid record (%s)", rest, bad)
			}
			mustClose(t, r)
			r = mustOpen(t, dir, id)
			defer r.Close()
			if r.Torn() != nil || len(r.Effects()) != 2 {
				t.Fatalf("after the repair: Torn() = %+v, %d effects", r.Torn(), len(r.Effects()))
			}
			sameEffect(t, "the record after the repair", r.Lookup(e3.ID), e3)
		})
	}
}

func TestCorruptMiddle(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	id := r.ID()
	mustRecord(t, r, agentEffect(1, `{"text":"one"}`), agentEffect(2, `{"text":"two"}`), agentEffect(3, `{"text":"three"}`))
	mustClose(t, r)
	b := readLog(t, dir, id)
	lines := bytes.SplitAfter(b, []byte("\n"))
	// Line 4 is the second effect: meta, state, effect 1, effect 2.
	i := bytes.Index(lines[3], []byte("two"))
	lines[3][i] = 'T'
	if err := os.WriteFile(logPath(dir, id), bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, id)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a journal damaged in the middle: %v, want ErrCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, logPath(dir, id)) || !strings.Contains(msg, "line 4") || !strings.Contains(msg, "checksum") {
		t.Errorf("the error does not name the file, line and problem: %v", err)
	}
	// The failed Open released the lock.
	if held, err := probe(filepath.Join(dir, id)); err != nil || held {
		t.Errorf("after a failed Open the lock is held (%v, %v)", held, err)
	}
	sums, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || !errors.Is(sums[0].ReadErr, ErrCorrupt) {
		t.Errorf("List of a corrupt run: %+v, want a ReadErr wrapping ErrCorrupt", sums)
	}
}

func TestCreationInterrupted(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	id := r.ID()
	mustClose(t, r)
	b := readLog(t, dir, id)
	if err := os.WriteFile(logPath(dir, id), b[:20], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, id); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "creation was interrupted") {
		t.Errorf("Open of a run with half a metadata record: %v", err)
	}
	// A journal starting with something else than metadata.
	var st []byte
	st, _ = appendState(st, StateRecord{State: Running, At: time.Now()})
	if err := os.WriteFile(logPath(dir, id), append(st, st...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, id); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("Open of a journal without metadata: %v", err)
	}
}

func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	_, err := Open(dir, r.ID())
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open of a run held by Create: %v, want ErrLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, r.ID()) || !strings.Contains(msg, "another process right now") || !strings.Contains(msg, "wait") || !strings.Contains(msg, "stop it") {
		t.Errorf("the error does not explain the lock: %v", err)
	}
	mustClose(t, r)
	r2 := mustOpen(t, dir, r.ID())
	if _, err := Open(dir, r.ID()); !errors.Is(err, ErrLocked) {
		t.Errorf("Open of a run held by Open: %v, want ErrLocked", err)
	}
	mustClose(t, r2)
	mustClose(t, mustOpen(t, dir, r.ID()))
}

func TestCloseIdempotent(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	e := agentEffect(1, `{"text":"one"}`)
	mustRecord(t, r, e)
	mustClose(t, r)
	if err := r.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if err := r.Record(agentEffect(2, `{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v, want ErrClosed", err)
	}
	if err := r.SetState(StateRecord{State: Succeeded}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetState after Close: %v, want ErrClosed", err)
	}
	if r.Lookup(e.ID) != e {
		t.Error("Lookup after Close lost the record")
	}
	// Close made the unsynced record durable.
	r = mustOpen(t, dir, r.ID())
	defer r.Close()
	sameEffect(t, "the record Close synced", r.Lookup(e.ID), e)
}

func TestRecordRefuses(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	for _, e := range []*eval.Effect{nil, {Kind: "agent"}, {ID: "x"}} {
		if err := r.Record(e); err == nil {
			t.Errorf("Record(%+v) succeeded", e)
		}
	}
	if len(r.Effects()) != 0 {
		t.Errorf("refused effects were recorded: %v", r.Effects())
	}
}

func TestInvalidIDs(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "journal")
	r := mustCreate(t, dir)
	mustClose(t, r)
	// A run outside dir that a bad id could reach.
	outside := mustCreate(t, parent)
	mustClose(t, outside)
	for _, id := range []string{"", ".", "..", "../" + outside.ID(), "a/b", `a\b`, "x..y", ".hidden", "a\x00b"} {
		if _, err := Open(dir, id); err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrLocked) {
			t.Errorf("Open(%q): %v, want an invalid id error", id, err)
		}
	}
}

func TestMissing(t *testing.T) {
	dir := t.TempDir()
	id := eval.NewRunID()
	_, err := Open(dir, id)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open of a missing run: %v, want fs.ErrNotExist naming the run and directory", err)
	}
	if _, err := os.Stat(filepath.Join(dir, id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing run created it: %v", err)
	}
	missing := filepath.Join(dir, "nope")
	if _, err := List(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List of a missing directory: %v, want fs.ErrNotExist", err)
	}
	if _, err := Prune(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Prune of a missing directory: %v, want fs.ErrNotExist", err)
	}
	if _, err := Open(missing, id); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open in a missing directory: %v, want fs.ErrNotExist", err)
	}
}

func TestSyncOnlyWhenDirty(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	fsyncs := func() int {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return r.fsyncs
	}
	step := func(what string, want int) {
		t.Helper()
		if err := r.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := fsyncs(); got != want {
			t.Fatalf("%s: %d fsyncs, want %d", what, got, want)
		}
	}
	if got := fsyncs(); got != 0 {
		t.Fatalf("Create fsynced %d times, want 0 (the first Sync makes the run durable)", got)
	}
	step("Sync after Create", 1)
	step("Sync again", 1)
	mustRecord(t, r, agentEffect(1, `{}`))
	step("Sync after Record", 2)
	step("Sync with nothing new", 2)
	r.Lookup(agentEffect(1, `{}`).ID)
	step("Sync after Lookup", 2)
	mustRecord(t, r, agentEffect(2, `{}`), agentEffect(3, `{}`))
	step("Sync after two Records", 3)
	if err := r.SetState(StateRecord{State: Succeeded}); err != nil {
		t.Fatal(err)
	}
	step("Sync after SetState", 4)

	// Concurrent Syncs share fsyncs and never lose a record.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				if err := r.Record(agentEffect(1000*g+i, `{}`)); err != nil {
					t.Error(err)
				}
				if err := r.Sync(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := fsyncs() - 4; n < 1 || n > 160 {
		t.Errorf("%d fsyncs for 160 records", n)
	}
	r.mu.RLock()
	synced, appended := r.synced, r.appended
	r.mu.RUnlock()
	if synced != appended {
		t.Errorf("after every Sync returned, %d of %d records are synced", synced, appended)
	}
	before := fsyncs()
	mustClose(t, r)
	if fsyncs() != before {
		t.Errorf("Close of a synced run fsynced again")
	}
}

func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	const goroutines, each = 16, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				e := agentEffect(g*each+i, fmt.Sprintf(`{"text":"%d"}`, g*each+i))
				if err := r.Record(e); err != nil {
					t.Error(err)
					return
				}
				if r.Lookup(e.ID) != e {
					t.Errorf("Lookup(%s) after its Record did not return it", e.ID)
				}
				if i%7 == 0 {
					if err := r.Sync(); err != nil {
						t.Error(err)
					}
				}
				_ = r.Effects()
			}
		})
	}
	wg.Wait()
	mustClose(t, r)
	r = mustOpen(t, dir, r.ID())
	defer r.Close()
	if n := len(r.Effects()); n != goroutines*each {
		t.Fatalf("%d effects after reopening, want %d", n, goroutines*each)
	}
	for n := range goroutines * each {
		sameEffect(t, fmt.Sprint("effect ", n), r.Lookup(agentEffect(n, "").ID), agentEffect(n, fmt.Sprintf(`{"text":"%d"}`, n)))
	}
}

func TestKindOfID(t *testing.T) {
	for _, c := range []struct {
		id   string
		kind string
		ok   bool
	}{
		{"agent#2", "agent", true},
		{"c#0/agent#12", "agent", true},
		{"c#0/p#1/3/script#0", "script", true},
		{"include:docs%2Fa.md#0", "include", true},
		{"c#2/read:env:HOME#1", "read", true},
		{"agent#x", "", false},
		{"agent", "", false},
		{"#0", "", false},
		{"c#0/p#0/3", "", false},
		{"question-1", "", false},
	} {
		kind, ok := kindOfID(c.id)
		if kind != c.kind || ok != c.ok {
			t.Errorf("kindOfID(%q) = %q, %v; want %q, %v", c.id, kind, ok, c.kind, c.ok)
		}
	}
}

// TestEffectSize checks the budget: a typical agent effect's
// record, framing included, takes at most 300 bytes besides its result.
func TestEffectSize(t *testing.T) {
	result := `{"text":"LGTM: two nits in review.go"}`
	e := agentEffect(2, result)
	line, err := appendEffect(nil, e, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	overhead := len(line) - len(result)
	t.Logf("a typical agent effect: %d bytes besides its %d-byte result:\n%s", overhead, len(result), line)
	if overhead > 300 {
		t.Errorf("a typical agent effect takes %d bytes besides its result, over the budget of 300", overhead)
	}
	// What Record writes is that line.
	dir := t.TempDir()
	r := mustCreate(t, dir)
	before := len(readLog(t, dir, r.ID()))
	mustRecord(t, r, e)
	mustClose(t, r)
	if grew := len(readLog(t, dir, r.ID())) - before; grew != len(line) {
		t.Errorf("Record wrote %d bytes, want %d", grew, len(line))
	}
}

// TestRecordTimes checks the effect records' times: a batch written in
// one millisecond carries one "at", a record in a later millisecond its
// own, and List reads the last time back.
func TestRecordTimes(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	const n = 3*drainBatch + 5 // several batches for the drain goroutine
	for i := range n {
		mustRecord(t, r, agentEffect(i, `{"text":"x"}`))
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Millisecond)
	before := time.Now().Truncate(time.Millisecond)
	mustRecord(t, r, agentEffect(n, `{"text":"last"}`))
	mustClose(t, r)
	after := time.Now()

	lines := strings.Split(strings.TrimSuffix(string(readLog(t, dir, r.ID())), "\n"), "\n")
	effects := lines[2:]
	if len(effects) != n+1 {
		t.Fatalf("%d effect lines, want %d", len(effects), n+1)
	}
	// A record carries its time only when it differs from the record
	// before it: the times written in the burst strictly increase.
	atRe := regexp.MustCompile(`^[0-9a-f]{8} \{"t":"effect","at":([0-9]+),"e":`)
	timed, last := 0, int64(0)
	for _, l := range effects[:n] {
		if m := atRe.FindStringSubmatch(l); m != nil {
			at, _ := strconv.ParseInt(m[1], 10, 64)
			if at <= last {
				t.Errorf("an effect repeats the time of the one before it (%d after %d): %s", at, last, l)
			}
			timed, last = timed+1, at
		} else if !strings.Contains(l, `{"t":"effect","e":`) {
			t.Errorf("an effect line of neither form: %s", l)
		}
	}
	if timed < 1 {
		t.Errorf("%d of %d effects written in a burst carry their time", timed, n)
	}
	if !strings.Contains(effects[n], `"at":`) {
		t.Errorf("the effect recorded 3 ms after the others has no time of its own: %s", effects[n])
	}
	runs, err := List(dir)
	if err != nil || len(runs) != 1 {
		t.Fatalf("List: %v, %v", runs, err)
	}
	if last := runs[0].LastAt; last.Before(before) || last.After(after) {
		t.Errorf("LastAt %v, want the last record's time, in [%v, %v]", last, before, after)
	}
	// The untimed records read back whole.
	r = mustOpen(t, dir, r.ID())
	defer r.Close()
	if got := len(r.Effects()); got != n+1 {
		t.Errorf("Open read %d effects, want %d", got, n+1)
	}
}

// TestRecordRefusals checks that Record refuses a result with a raw
// newline at once, and that after Close it fails.
func TestRecordRefusals(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	bad := agentEffect(1, "{\"text\":\n\"x\"}")
	if err := r.Record(bad); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("Record of a result with a newline: %v", err)
	}
	mustRecord(t, r, agentEffect(2, `{}`))
	if got := r.Len(); got != 1 {
		t.Errorf("Len() = %d, want 1 (the refused record is not kept)", got)
	}
	mustClose(t, r)
	if err := r.Record(agentEffect(3, `{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v, want ErrClosed", err)
	}
}

// TestFormatOneIsRefused checks that a run recorded by the format that
// keyed effects by source positions is refused by Open, with ErrFormat
// and a message saying what to do, and listed with that error.
func TestFormatOneIsRefused(t *testing.T) {
	dir := t.TempDir()
	id := "01234567-89ab-7def-8123-456789abcdef"
	if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
		t.Fatal(err)
	}
	var b []byte
	b = appendFrame(b, []byte(`{"t":"meta","v":1,"workflow":"review.star","started":"2026-01-02T03:04:05Z"}`))
	b = appendFrame(b, []byte(`{"t":"state","at":1767323045000,"state":"running"}`))
	b = appendFrame(b, []byte(`{"t":"effect","at":1767323045001,"e":{"id":"agent@review.star:3:5#0","result":{"text":"x"}}}`))
	if err := os.WriteFile(logPath(dir, id), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, id)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "recorded by an earlier aml (journal format 1") || !strings.Contains(err.Error(), "start it again with aml run") {
		t.Fatalf("Open of a format 1 run: %v", err)
	}
	runs, err := List(dir)
	if err != nil || len(runs) != 1 || !errors.Is(runs[0].ReadErr, ErrFormat) {
		t.Fatalf("List of a format 1 run: %+v, %v", runs, err)
	}
}

// TestResultAndOwners checks that the final result and the owners of a
// run's processes are recorded and read back.
func TestResultAndOwners(t *testing.T) {
	dir := t.TempDir()
	meta := testMeta()
	meta.Owner = "aml-1-aa-first"
	r, err := Create(dir, meta)
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID()
	if m := r.Meta(); m.Owner != "" {
		t.Errorf("Meta().Owner = %q, want it left out of the metadata", m.Owner)
	}
	if err := r.SetState(StateRecord{State: Running, Owner: "aml-2-aa-second"}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetState(StateRecord{State: Succeeded, Result: "line one\nline two"}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r)
	r = mustOpen(t, dir, id)
	defer r.Close()
	if got := r.Owners(); strings.Join(got, ",") != "aml-1-aa-first,aml-2-aa-second" {
		t.Errorf("Owners() = %v", got)
	}
	if st := r.LastState(); st.State != Succeeded || st.Result != "line one\nline two" {
		t.Errorf("LastState() = %+v", st)
	}
	runs, err := List(dir)
	if err != nil || len(runs) != 1 || runs[0].Result != "line one\nline two" {
		t.Fatalf("List: %+v, %v", runs, err)
	}
	// An empty result is a result too.
	r2 := mustCreate(t, dir)
	if err := r2.SetState(StateRecord{State: Succeeded}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r2)
	if !strings.Contains(string(readLog(t, dir, r2.ID())), `"state":"succeeded","result":""`) {
		t.Errorf("an empty result is not recorded:\n%s", readLog(t, dir, r2.ID()))
	}
}
