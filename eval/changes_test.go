package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// stepsProgram is a workflow whose component body evaluates one agent
// per step, in order, and joins their texts; a sibling branch evaluates
// its own agents, and a final agent follows the fan-out. Positions are
// shifted by at: the same program with lines added above it.
func stepsProgram(at int, steps []string, sibling ...string) any {
	body := &eval.Component{Name: "steps", Position: pos(at + 10), Fn: func(cc *eval.ComponentContext) (any, error) {
		var outs []string
		for i, s := range steps {
			out, err := cc.Evaluate(&eval.Agent{Name: s, Position: pos(at + 11 + i), Children: []any{s}})
			if err != nil {
				return nil, err
			}
			outs = append(outs, out)
		}
		return strings.Join(outs, "+"), nil
	}}
	var side []any
	for i, s := range sibling {
		side = append(side, &eval.Agent{Name: s, Position: pos(at + 30 + i), Children: []any{s}})
	}
	return []any{
		&eval.Parallel{Position: pos(at + 1), Branches: []any{body, &eval.Fragment{Position: pos(at + 2), Children: side}}},
		&eval.Agent{Name: "final", Position: pos(at + 40), Children: []any{"final"}},
	}
}

// recorded runs program in a new memory journal and returns the journal.
func recorded(t *testing.T, rt *eval.Runtime, program any) *eval.MemoryJournal {
	t.Helper()
	j := eval.NewMemoryJournal()
	if _, err := rt.Evaluate(context.Background(), program, eval.EvaluateOptions{Journal: j}); err != nil {
		t.Fatal(err)
	}
	return j
}

func changesRuntime(t *testing.T, agent eval.AgentProvider) *eval.Runtime {
	t.Helper()
	rt, err := eval.New(eval.Options{AgentProvider: agent, Limits: &eval.Limits{MaxConcurrentAgents: eval.Unlimited, MaxAgentCalls: eval.Unlimited}})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestIdentitiesIgnorePositions checks that an edit that moves every
// node (lines added above, as a comment or a helper would) leaves every
// record served.
func TestIdentitiesIgnorePositions(t *testing.T) {
	agent := &countingAgent{}
	rt := changesRuntime(t, agent)
	want := []string{"a", "b", "c"}
	j := recorded(t, rt, stepsProgram(0, want, "x", "y"))
	first := agent.calls.Load()
	for _, e := range j.Effects() {
		if strings.Contains(e.ID, "t.star") || strings.Contains(e.ID, ":") {
			t.Fatalf("identity %q holds a position", e.ID)
		}
	}
	for _, shift := range []int{0, 1, 7, 100} {
		agent.calls.Store(0)
		got, err := rt.Resume(context.Background(), stepsProgram(shift, want, "x", "y"), eval.ResumeOptions{RunID: "r", Journal: j})
		if err != nil {
			t.Fatalf("shifted by %d lines: %v", shift, err)
		}
		if n := agent.calls.Load(); n != 0 {
			t.Fatalf("shifted by %d lines: %d of %d agents ran again", shift, n, first)
		}
		if !strings.HasSuffix(got, "<final>") {
			t.Fatalf("shifted by %d lines: result %q", shift, got)
		}
	}
}

// TestChangesAreNamedBeforeAnythingRuns edits the recorded program in
// each way a change can take and checks what the resume reports, that
// nothing ran live before it, and what --rerun-changed then runs.
func TestChangesAreNamedBeforeAnythingRuns(t *testing.T) {
	base := []string{"a", "b", "c"}
	for _, c := range []struct {
		name    string
		steps   []string
		sibling []string
		kind    eval.ChangeKind
		label   string
		pos     eval.Position // where the change is reported
		msg     string
		live    int64 // sessions --rerun-changed runs
	}{
		{name: "changed prompt", steps: []string{"a", "B", "c"}, kind: eval.ChangeRequest, label: `agent(name="B")`, pos: pos(12),
			msg: `t.star:12:1: agent(name="B") no longer matches the journal: its prompt changed since the run was recorded (in its place the run recorded agent(name="b") at t.star:12:1)`, live: 2},
		{name: "inserted at the end of a finished context", steps: []string{"a", "b", "c", "d"}, kind: eval.ChangeInserted, label: `agent(name="d")`, pos: pos(14),
			msg: `t.star:14:1: agent(name="d") was inserted since the run was recorded: the journal has no record of it, but records of what the run did after its place`, live: 1},
		{name: "inserted in the middle", steps: []string{"a", "x", "b", "c"}, kind: eval.ChangeInserted, label: `agent(name="x")`, pos: pos(12),
			msg: `t.star:12:1: agent(name="x") was inserted since the run was recorded: the journal has no record of it, but records of what the run did after its place`, live: 3},
		{name: "inserted at the start", steps: []string{"x", "a", "b", "c"}, kind: eval.ChangeInserted, label: `agent(name="x")`, pos: pos(11),
			msg: `t.star:11:1: agent(name="x") was inserted since the run was recorded`, live: 4},
		{name: "two inserted in a row", steps: []string{"a", "x", "y", "b", "c"}, kind: eval.ChangeInserted, label: `agent(name="x")`, pos: pos(12),
			msg: `t.star:13:1: agent(name="y") was inserted since the run was recorded`, live: 4},
		{name: "changed in the middle and inserted after", steps: []string{"a", "B", "x", "c"}, kind: eval.ChangeRequest, label: `agent(name="B")`, pos: pos(12),
			msg: `t.star:12:1: agent(name="B") no longer matches the journal: its prompt changed since the run was recorded (in its place the run recorded agent(name="b") at t.star:12:1)`, live: 3},
		{name: "removed at the start", steps: []string{"b", "c"}, kind: eval.ChangeRemoved, label: `agent(name="a")`, pos: pos(11),
			msg: `t.star:11:1: agent(name="a") was removed since the run was recorded: the journal recorded it here, and the program no longer reaches it; in its place runs agent(name="b") at t.star:11:1, which the run recorded after it`, live: 2},
		{name: "removed in the middle", steps: []string{"a", "c"}, kind: eval.ChangeRemoved, label: `agent(name="b")`, pos: pos(12),
			msg: `t.star:12:1: agent(name="b") was removed since the run was recorded: the journal recorded it here, and the program no longer reaches it; in its place runs agent(name="c") at t.star:12:1, which the run recorded after it`, live: 1},
		{name: "removed at the end", steps: []string{"a", "b"}, kind: eval.ChangeRemoved, label: `agent(name="c")`, pos: pos(13),
			msg: `t.star:13:1: agent(name="c") was removed since the run was recorded: the journal recorded it here, and the program no longer reaches it`, live: 0},
		{name: "swapped", steps: []string{"a", "c", "b"}, kind: eval.ChangeRemoved, label: `agent(name="b")`, pos: pos(12),
			msg: `in its place runs agent(name="c") at t.star:12:1, which the run recorded after it`, live: 2},
		{name: "changed in a sibling branch", steps: base, sibling: []string{"x", "Y"}, kind: eval.ChangeRequest, label: `agent(name="Y")`, pos: pos(31),
			msg: `t.star:31:1: agent(name="Y") no longer matches the journal: its prompt changed`, live: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			agent := &countingAgent{}
			rt := changesRuntime(t, agent)
			j := recorded(t, rt, stepsProgram(0, base, "x", "y"))
			sibling := c.sibling
			if sibling == nil {
				sibling = []string{"x", "y"}
			}
			edited := stepsProgram(0, c.steps, sibling...)
			agent.calls.Store(0)
			_, err := rt.Resume(context.Background(), edited, eval.ResumeOptions{RunID: "r", Journal: j})
			var de *eval.DivergenceError
			if !errors.As(err, &de) {
				t.Fatalf("resume: %v, want a *DivergenceError", err)
			}
			if de.Kind != c.kind || de.Label != c.label || de.Pos != c.pos {
				t.Fatalf("change = %s %s at %s, want %s %s at %s\n%v", de.Kind, de.Label, de.Pos, c.kind, c.label, c.pos, err)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "--rerun-changed") {
				t.Fatalf("message:\n%v\nwant it to hold\n%s", err, c.msg)
			}
			if n := agent.calls.Load(); n != 0 {
				t.Fatalf("%d agents ran live before the change was reported", n)
			}

			// --rerun-changed: the change and what follows it in its
			// context run live, the rest is served, and each accepted
			// change is reported first.
			var reported []string
			var mu sync.Mutex
			got, err := rt.Resume(context.Background(), edited, eval.ResumeOptions{RunID: "r", Journal: j, RerunChanged: true, OnChange: func(d *eval.DivergenceError) {
				mu.Lock()
				reported = append(reported, d.Describe())
				mu.Unlock()
			}})
			if err != nil {
				t.Fatalf("--rerun-changed: %v", err)
			}
			if n := agent.calls.Load(); n != c.live {
				t.Fatalf("--rerun-changed ran %d sessions live, want %d (%v)", n, c.live, agent.order)
			}
			if len(reported) == 0 || !strings.Contains(reported[0], c.label) {
				t.Fatalf("--rerun-changed reported %q, want the change to %s", reported, c.label)
			}
			plain, err := rt.Evaluate(context.Background(), edited)
			if err != nil || got != plain {
				t.Fatalf("--rerun-changed result %q, %v; an uninterrupted run of the edited program gives %q", got, err, plain)
			}

			// The journal now holds the edited program: resuming it
			// again serves everything.
			agent.calls.Store(0)
			again, err := rt.Resume(context.Background(), edited, eval.ResumeOptions{RunID: "r", Journal: j})
			if err != nil || again != plain || agent.calls.Load() != 0 {
				t.Fatalf("resume after --rerun-changed = %q, %v, %d live; want %q served", again, err, agent.calls.Load(), plain)
			}
		})
	}
}

// TestInsertedEffectOfAnotherKind checks that an effect with no record
// between recorded ones is reported as inserted: a tool call added
// before the agents of a context that went on.
func TestInsertedEffectOfAnotherKind(t *testing.T) {
	var calls atomic.Int64
	tool := upperTool(t, &calls)
	agent := &countingAgent{}
	rt := changesRuntime(t, agent)
	program := func(withTool bool) any {
		return &eval.Component{Name: "c", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
			if withTool {
				if _, err := cc.CallTool(tool, map[string]any{"text": "x"}); err != nil {
					return nil, err
				}
			}
			a, err := cc.Evaluate(&eval.Agent{Position: pos(3), Children: []any{"one"}})
			if err != nil {
				return nil, err
			}
			return cc.Evaluate(&eval.Agent{Position: pos(4), Children: []any{"two " + a}})
		}}
	}
	j := recorded(t, rt, program(false))
	agent.calls.Store(0)
	_, err := rt.Resume(context.Background(), program(true), eval.ResumeOptions{RunID: "r", Journal: j})
	var de *eval.DivergenceError
	if !errors.As(err, &de) || de.Kind != eval.ChangeInserted || de.Label != `tool("upper")` || de.Pos != pos(2) {
		t.Fatalf("resume: %v, want the tool call at t.star:2:1 reported as inserted", err)
	}
	if calls.Load() != 0 || agent.calls.Load() != 0 {
		t.Fatalf("%d tool calls and %d agents ran before the report", calls.Load(), agent.calls.Load())
	}
}

// TestSeveralChangesAreAllNamed checks that a resume reports every
// change it finds, ordered by position, not only the first.
func TestSeveralChangesAreAllNamed(t *testing.T) {
	agent := &countingAgent{}
	rt := changesRuntime(t, agent)
	j := recorded(t, rt, stepsProgram(0, []string{"a", "b"}, "x", "y"))
	_, err := rt.Resume(context.Background(), stepsProgram(0, []string{"A", "b"}, "X", "y"), eval.ResumeOptions{RunID: "r", Journal: j})
	if err == nil {
		t.Fatal("resume of two changes succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `t.star:11:1: agent(name="A")`) || !strings.HasPrefix(lines[1], `t.star:30:1: agent(name="X")`) {
		t.Fatalf("resume reported:\n%v\nwant the changes at t.star:11:1 and t.star:30:1, in that order", err)
	}
}

// TestRerunChangedKeepsSiblingsServed checks that a change in one
// parallel() branch runs only that branch's rest live: its sibling and
// what comes before the change are served.
func TestRerunChangedKeepsSiblingsServed(t *testing.T) {
	agent := &countingAgent{}
	rt := changesRuntime(t, agent)
	j := recorded(t, rt, stepsProgram(0, []string{"a", "b", "c"}, "x", "y", "z"))
	agent.calls.Store(0)
	agent.order = nil
	if _, err := rt.Resume(context.Background(), stepsProgram(0, []string{"a", "b", "c"}, "x", "Y", "z"), eval.ResumeOptions{RunID: "r", Journal: j, RerunChanged: true}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(agent.order, ","); got != "Y,z" {
		t.Fatalf("--rerun-changed ran %q live, want only the changed sibling agent and the one after it (Y,z)", got)
	}
}

// TestQuestionIdsNameOneQuestion checks that an ask() id names one
// question per run: a loop asking the same id again fails, naming both
// places, with a journal or without.
func TestQuestionIdsNameOneQuestion(t *testing.T) {
	loop := &eval.Component{Name: "deploy", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		for _, env := range []string{"dev", "stage", "prod"} {
			if _, err := cc.Ask("deploy to "+env+"?", "deploy", nil, pos(5)); err != nil {
				return nil, err
			}
		}
		return "deployed", nil
	}}
	rt, err := eval.New(eval.Options{Ask: func(context.Context, eval.Question) (any, error) { return "yes", nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []eval.Journal{nil, eval.NewMemoryJournal()} {
		opts := eval.EvaluateOptions{Journal: j, Answers: map[string]any{"deploy": "yes"}}
		_, err := rt.Evaluate(context.Background(), loop, opts)
		if err == nil || !strings.Contains(err.Error(), `t.star:5:1: ask(id="deploy"): the question id "deploy" was already asked at the same place`) || !strings.Contains(err.Error(), "give each ask() its own id") {
			t.Fatalf("journal %v: a reused question id: %v", j != nil, err)
		}
	}
	// Distinct ids are three questions, each needing its own answer.
	distinct := &eval.Component{Name: "deploy", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		for i, env := range []string{"dev", "stage", "prod"} {
			if _, err := cc.Ask("deploy to "+env+"?", fmt.Sprint("deploy-", env), nil, pos(5+i)); err != nil {
				return nil, err
			}
		}
		return "deployed", nil
	}}
	j := eval.NewMemoryJournal()
	_, err = rt.Evaluate(context.Background(), distinct, eval.EvaluateOptions{Journal: j, Answers: map[string]any{"deploy-dev": "yes"}})
	var se *eval.SuspendedError
	if !errors.As(err, &se) || len(se.Questions) != 1 || se.Questions[0].ID != "deploy-stage" {
		t.Fatalf("one answer of three: %v, want the run suspended on deploy-stage", err)
	}
}

// syncTracker is a memory journal that notes when each record was
// appended and when a Sync first covered it, and counts the Syncs that
// covered a record.
type syncTracker struct {
	*eval.MemoryJournal
	mu       sync.Mutex
	appended []time.Time
	durable  []time.Time
	ids      []string
	syncs    int
}

func (s *syncTracker) Record(e *eval.Effect) error {
	s.mu.Lock()
	s.appended = append(s.appended, time.Now())
	s.durable = append(s.durable, time.Time{})
	s.ids = append(s.ids, e.ID)
	s.mu.Unlock()
	return s.MemoryJournal.Record(e)
}

func (s *syncTracker) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	covered := false
	for i := range s.durable {
		if s.durable[i].IsZero() {
			s.durable[i], covered = now, true
		}
	}
	if covered {
		s.syncs++
	}
	return nil
}

// barrierAgent holds every session until n have started, then answers
// at once, except "slow", which answers 600 ms later. It is not
// InProcess: its sessions reach outside the process.
type barrierAgent struct {
	n       int
	mu      sync.Mutex
	started int
	all     chan struct{}
}

func (a *barrierAgent) Name() string { return "barrier" }

func (a *barrierAgent) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	a.mu.Lock()
	a.started++
	if a.started == a.n {
		close(a.all)
	}
	a.mu.Unlock()
	select {
	case <-a.all:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if req.Prompt == "slow" {
		select {
		case <-time.After(600 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &eval.AgentResponse{Text: req.Prompt}, nil
}

// TestFinishedMeansRecorded checks the group commit: external effects
// that complete are durable within the commit window although no other
// effect starts (their slow sibling runs on), and completions that come
// together share one Sync.
func TestFinishedMeansRecorded(t *testing.T) {
	const fast = 40
	agent := &barrierAgent{n: fast + 1, all: make(chan struct{})}
	rt := changesRuntime(t, agent)
	var branches []any
	for i := range fast {
		branches = append(branches, &eval.Agent{Position: pos(i + 2), Children: []any{fmt.Sprint("fast ", i)}})
	}
	branches = append(branches, &eval.Agent{Position: pos(50), Children: []any{"slow"}})
	j := &syncTracker{MemoryJournal: eval.NewMemoryJournal()}
	const window = 20 * time.Millisecond
	var slowDone time.Time
	if _, err := rt.Evaluate(context.Background(), &eval.Parallel{Position: pos(1), Branches: branches}, eval.EvaluateOptions{Journal: j, CommitWindow: window}); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var worst time.Duration
	for i, id := range j.ids {
		if id == fmt.Sprintf("p#0/%d/agent#0", fast) {
			slowDone = j.appended[i]
		}
	}
	for i, id := range j.ids {
		if j.appended[i].Equal(slowDone) {
			continue // the slow one: durable at the end
		}
		wait := j.durable[i].Sub(j.appended[i])
		worst = max(worst, wait)
		// A generous bound (the window, plus a scheduler's delay on a
		// loaded machine), far below the slow sibling's 600 ms.
		if wait > window+300*time.Millisecond || !j.durable[i].Before(slowDone) {
			t.Fatalf("record %s waited %s to be durable (window %s), until after the slow sibling ended", id, wait, window)
		}
	}
	// The 40 completions come together: a few Syncs cover them, plus
	// the final one.
	if j.syncs > 10 {
		t.Fatalf("%d Syncs covered the records of %d completions that came together: they should share Syncs", j.syncs, fast+1)
	}
	t.Logf("%d records, %d Syncs, the longest wait for durability %s (window %s)", len(j.ids), j.syncs, worst, window)
}

// TestChangedIncludeInSiblingStopsBeforeAnythingRuns checks that a
// changed include() file in one parallel() branch stops the resume
// before the other branch runs anything live.
func TestChangedIncludeInSiblingStopsBeforeAnythingRuns(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent, Cwd: dir, Limits: &eval.Limits{MaxConcurrentAgents: eval.Unlimited}})
	if err != nil {
		t.Fatal(err)
	}
	program := &eval.Parallel{Position: pos(1), Branches: []any{
		// Branch 0 has an effect the crash left unrecorded: it would run
		// live first.
		[]any{&eval.Agent{Position: pos(2), Children: []any{"zero"}}, &eval.Agent{Position: pos(3), Children: []any{"pending"}}},
		&eval.Agent{Position: pos(4), Children: []any{&eval.Include{Src: "notes.md", NoTitle: true, Position: pos(5)}}},
	}}
	full := recorded(t, rt, program)
	j := eval.NewMemoryJournal()
	for _, e := range full.Effects() {
		if e.Pos != pos(3) {
			if err := j.Record(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(file, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent.calls.Store(0)
	_, err = rt.Resume(context.Background(), program, eval.ResumeOptions{RunID: "r", Journal: j})
	var de *eval.DivergenceError
	if !errors.As(err, &de) || de.Pos != pos(5) || strings.Join(de.Changed, ",") != "content" {
		t.Fatalf("resume: %v, want the changed include at t.star:5:1", err)
	}
	if n := agent.calls.Load(); n != 0 {
		t.Fatalf("%d agents ran live before the changed include was reported", n)
	}
}
