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
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
	"github.com/aml-go/aml/providers/workspace/filesystem"
	localws "github.com/aml-go/aml/providers/workspace/local"
)

// countingAgent answers "<prompt>!" and counts its live sessions; a
// delay per prompt lets tests make later branches finish first.
type countingAgent struct {
	calls atomic.Int64
	delay func(prompt string) time.Duration
	mu    sync.Mutex
	order []string
}

func (a *countingAgent) Name() string { return "counting" }

func (a *countingAgent) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	a.calls.Add(1)
	if a.delay != nil {
		select {
		case <-time.After(a.delay(req.Prompt)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.mu.Lock()
	a.order = append(a.order, req.Prompt)
	a.mu.Unlock()
	if req.Output != nil {
		return &eval.AgentResponse{Structured: map[string]any{"score": int64(len(req.Prompt)), "text": req.Prompt}}, nil
	}
	return &eval.AgentResponse{Text: "<" + req.Prompt + ">"}, nil
}

// durableTree is a workflow of agents across parallel branches,
// components (with nested evaluate() calls), a component tool call and a
// host script. Every value depends on earlier results, so a wrongly
// served record changes the output.
func durableTree(t *testing.T, tool *eval.Tool) any {
	t.Helper()
	step := func(name string, line int) *eval.Component {
		return &eval.Component{Name: name, Position: pos(line), Fn: func(cc *eval.ComponentContext) (any, error) {
			first, err := cc.Evaluate(&eval.Agent{Position: pos(line + 1), Children: []any{name + " first"}})
			if err != nil {
				return nil, err
			}
			second, err := cc.Evaluate(&eval.Agent{Position: pos(line + 1), Children: []any{name + " second " + first}})
			if err != nil {
				return nil, err
			}
			out, err := cc.CallTool(tool, map[string]any{"text": second})
			if err != nil {
				return nil, err
			}
			return []any{fmt.Sprint(out), &eval.Agent{Position: pos(line + 2), Children: []any{"summary of " + name}}}, nil
		}}
	}
	return []any{
		&eval.Parallel{Position: pos(1), Branches: []any{step("a", 10), step("b", 20), step("c", 30)}},
		"|",
		&eval.Script{Position: pos(40), Shell: "sh", Children: []any{"echo scripted"}},
		&eval.Agent{Position: pos(50), Children: []any{"final"}},
	}
}

func upperTool(t *testing.T, calls *atomic.Int64) *eval.Tool {
	t.Helper()
	tool, err := eval.NewTool(eval.ToolOptions{Name: "upper", Description: "Upper-cases text.", Position: pos(2),
		Execute: func(_ context.Context, in any) (any, error) {
			calls.Add(1)
			return strings.ToUpper(in.(map[string]any)["text"].(string)), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func durableRuntime(t *testing.T, p eval.AgentProvider, scripts *atomic.Int64) *eval.Runtime {
	t.Helper()
	host, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := eval.New(eval.Options{AgentProvider: p, Host: countingHost{host, scripts}, Cwd: t.TempDir(), Limits: &eval.Limits{MaxConcurrentAgents: eval.Unlimited}})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// countingHost counts the host leases' commands.
type countingHost struct {
	eval.SandboxProvider
	n *atomic.Int64
}

func (h countingHost) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	l, err := h.SandboxProvider.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return countingLease{l, h.n}, nil
}

type countingLease struct {
	eval.SandboxLease
	n *atomic.Int64
}

func (l countingLease) Runtime() eval.SandboxRuntime {
	return countingRuntime{l.SandboxLease.Runtime(), l.n}
}

type countingRuntime struct {
	eval.SandboxRuntime
	n *atomic.Int64
}

func (r countingRuntime) Exec(ctx context.Context, cmd string, args []string, o eval.ExecOptions) (*eval.ExecResult, error) {
	r.n.Add(1)
	return r.SandboxRuntime.Exec(ctx, cmd, args, o)
}

func TestJournalReplaysEveryRecordedEffect(t *testing.T) {
	var tools, scripts atomic.Int64
	tool := upperTool(t, &tools)
	// Branch a is slow, so b and c record first: identities must not
	// depend on the order effects finish in.
	agent := &countingAgent{delay: func(p string) time.Duration {
		if strings.HasPrefix(p, "a ") {
			return 30 * time.Millisecond
		}
		return 0
	}}
	rt := durableRuntime(t, agent, &scripts)
	plain, err := rt.Evaluate(context.Background(), durableTree(t, tool))
	if err != nil {
		t.Fatal(err)
	}
	liveAgents, liveTools, liveScripts := agent.calls.Load(), tools.Load(), scripts.Load()
	if liveAgents != 10 || liveTools != 3 || liveScripts != 1 {
		t.Fatalf("a plain run made %d agent, %d tool and %d script calls, want 10, 3, 1", liveAgents, liveTools, liveScripts)
	}

	j := eval.NewMemoryJournal()
	agent.calls.Store(0)
	tools.Store(0)
	scripts.Store(0)
	recorded, err := rt.Evaluate(context.Background(), durableTree(t, tool), eval.EvaluateOptions{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if recorded != plain {
		t.Fatalf("journaled run = %q, plain run = %q", recorded, plain)
	}
	kinds := map[string]int{}
	for _, e := range j.Effects() {
		kinds[e.Kind]++
	}
	if kinds["agent"] != 10 || kinds["tool"] != 3 || kinds["script"] != 1 {
		t.Fatalf("recorded %v, want 10 agents, 3 tools and 1 script", kinds)
	}

	// Resume from every prefix of the record order, as a crash after
	// each effect would leave it.
	effects := j.Effects()
	for k := 0; k <= len(effects); k++ {
		partial := eval.NewMemoryJournal()
		for _, e := range effects[:k] {
			if err := partial.Record(e); err != nil {
				t.Fatal(err)
			}
		}
		agent.calls.Store(0)
		tools.Store(0)
		scripts.Store(0)
		got, err := rt.Resume(context.Background(), durableTree(t, tool), eval.ResumeOptions{RunID: "r", Journal: partial})
		if err != nil {
			t.Fatalf("resume after %d effects: %v", k, err)
		}
		if got != plain {
			t.Fatalf("resume after %d effects = %q, want %q", k, got, plain)
		}
		live := agent.calls.Load() + tools.Load() + scripts.Load()
		if want := int64(len(effects) - k); live != want {
			t.Fatalf("resume after %d of %d effects ran %d live (agents %d, tools %d, scripts %d), want %d", k, len(effects), live, agent.calls.Load(), tools.Load(), scripts.Load(), want)
		}
	}
}

func TestJournalDivergence(t *testing.T) {
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent})
	if err != nil {
		t.Fatal(err)
	}
	tree := func(second string) any {
		return []any{
			&eval.Agent{Position: pos(1), Name: "first", Children: []any{"one"}},
			&eval.Agent{Position: pos(2), Name: "second", Model: "m", Children: []any{second}},
			&eval.Agent{Position: pos(3), Children: []any{"three"}},
		}
	}
	j := eval.NewMemoryJournal()
	if _, err := rt.Evaluate(context.Background(), tree("two"), eval.EvaluateOptions{Journal: j}); err != nil {
		t.Fatal(err)
	}
	agent.calls.Store(0)
	_, err = rt.Resume(context.Background(), tree("TWO"), eval.ResumeOptions{RunID: "r", Journal: j})
	var de *eval.DivergenceError
	if !errors.As(err, &de) {
		t.Fatalf("resume of a changed prompt: %v, want a *DivergenceError", err)
	}
	if de.Pos != pos(2) || de.Label != `agent(name="second")` || strings.Join(de.Changed, ",") != "prompt" {
		t.Fatalf("divergence = %+v, want agent(name=\"second\") at t.star:2:1 with its prompt changed", de)
	}
	if !strings.Contains(err.Error(), "t.star:2:1: agent(name=\"second\") no longer matches the journal: its prompt changed") || !strings.Contains(err.Error(), "--rerun-changed") {
		t.Fatalf("message: %v", err)
	}
	if n := agent.calls.Load(); n != 0 {
		t.Fatalf("a divergent resume ran %d sessions live, want 0", n)
	}

	got, err := rt.Resume(context.Background(), tree("TWO"), eval.ResumeOptions{RunID: "r", Journal: j, RerunChanged: true})
	if err != nil {
		t.Fatal(err)
	}
	if got != "<one><TWO><three>" {
		t.Fatalf("rerun-changed result %q", got)
	}
	// The changed agent and everything after it ran live.
	if n := agent.calls.Load(); n != 2 {
		t.Fatalf("--rerun-changed ran %d sessions live, want 2 (the changed one and the one after it)", n)
	}
}

func TestJournalReadsDivergeBeforeAnythingRuns(t *testing.T) {
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent})
	if err != nil {
		t.Fatal(err)
	}
	tree := &eval.Agent{Position: pos(5), Children: []any{"go"}}
	read := func(v string) []eval.RecordedRead {
		return []eval.RecordedRead{{Kind: "env", Name: "TOKEN", Pos: pos(1), Digest: eval.Fingerprint(v)}}
	}
	j := eval.NewMemoryJournal()
	if _, err := rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{Journal: j, Reads: read("secret-1")}); err != nil {
		t.Fatal(err)
	}
	for _, e := range j.Effects() {
		for _, v := range eval.RequestFields(e.Request) {
			if strings.Contains(v, "secret") {
				t.Fatalf("the journal holds the read value: %+v", e)
			}
		}
	}
	agent.calls.Store(0)
	_, err = rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j, Reads: read("secret-2")})
	var de *eval.DivergenceError
	if !errors.As(err, &de) || de.Label != `env("TOKEN")` || strings.Join(de.Changed, ",") != "value" {
		t.Fatalf("changed env value: %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("the divergence prints the value: %v", err)
	}
	if agent.calls.Load() != 0 {
		t.Fatal("an agent ran before the read divergence was reported")
	}
}

func TestJournalAskSuspendsAndResumes(t *testing.T) {
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent})
	if err != nil {
		t.Fatal(err)
	}
	yesNo, err := eval.NewSchema(map[string]any{"type": "boolean"})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(line int, id, text string, schema *eval.Schema) *eval.Component {
		return &eval.Component{Name: "gate", Position: pos(line), Fn: func(cc *eval.ComponentContext) (any, error) {
			draft, err := cc.Evaluate(&eval.Agent{Position: pos(line + 1), Children: []any{"draft " + text}})
			if err != nil {
				return nil, err
			}
			ans, err := cc.Ask(text+"? "+draft, id, schema, pos(line+2))
			if err != nil {
				return nil, err
			}
			return fmt.Sprintf("[%s=%v]", text, ans), nil
		}}
	}
	tree := &eval.Parallel{Position: pos(1), Branches: []any{ask(10, "publish", "publish", yesNo), ask(20, "", "title", nil)}}
	j := eval.NewMemoryJournal()
	_, err = rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{RunID: "run-1", Journal: j})
	var se *eval.SuspendedError
	if !errors.As(err, &se) {
		t.Fatalf("unanswered questions: %v, want a *SuspendedError", err)
	}
	if len(se.Questions) != 2 || se.RunID != "run-1" {
		t.Fatalf("questions %+v", se.Questions)
	}
	ids := map[string]eval.Question{}
	for _, q := range se.Questions {
		ids[q.ID] = q
	}
	pub, ok := ids["publish"]
	if !ok || pub.Text != "publish? <draft publish>" || pub.Schema["type"] != "boolean" || pub.Source != "t.star:12:1" {
		t.Fatalf("publish question %+v", pub)
	}
	var titleID string
	for id := range ids {
		if id != "publish" {
			titleID = id
		}
	}
	if titleID != "p#0/1/c#0/ask#0" {
		t.Fatalf("generated question id %q is not the ask's identity p#0/1/c#0/ask#0", titleID)
	}
	if err := eval.CheckAnswer(pub, "yes"); err == nil || !strings.Contains(err.Error(), `question "publish"`) || !strings.Contains(err.Error(), `{"type":"boolean"}`) {
		t.Fatalf("a wrong-type answer: %v", err)
	}
	if err := eval.CheckAnswer(ids[titleID], true); err == nil || !strings.Contains(err.Error(), "must be text") {
		t.Fatalf("a non-text answer to a free-text question: %v", err)
	}

	// Answer one: the run stays suspended on the other, and the drafts
	// are not asked for again.
	agent.calls.Store(0)
	_, err = rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "run-1", Journal: j, Answers: map[string]any{"publish": true}})
	if !errors.As(err, &se) || len(se.Questions) != 1 || se.Questions[0].ID != titleID {
		t.Fatalf("after one answer: %v", err)
	}
	got, err := rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "run-1", Journal: j, Answers: map[string]any{titleID: "Hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if got != "[publish=true][title=Hello]" {
		t.Fatalf("answered run = %q", got)
	}
	if n := agent.calls.Load(); n != 0 {
		t.Fatalf("resuming re-ran %d recorded sessions", n)
	}
}

func TestAskWithoutJournal(t *testing.T) {
	comp := &eval.Component{Name: "q", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		ans, err := cc.Ask("name?", "", nil, pos(2))
		if err != nil {
			return nil, err
		}
		return ans, nil
	}}
	rt, err := eval.New(eval.Options{AgentProvider: &countingAgent{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Evaluate(context.Background(), comp); err == nil || !strings.Contains(err.Error(), "ask() has no way to reach a person") {
		t.Fatalf("ask without a journal or Options.Ask: %v", err)
	}
	rt, err = eval.New(eval.Options{AgentProvider: &countingAgent{}, Ask: func(_ context.Context, q eval.Question) (any, error) {
		return "Ada (" + q.Text + ")", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Evaluate(context.Background(), comp)
	if err != nil || got != "Ada (name?)" {
		t.Fatalf("ask through Options.Ask = %q, %v", got, err)
	}
}

func TestJournalStructuredAndTurns(t *testing.T) {
	schema, err := eval.NewSchema(map[string]any{"type": "object", "properties": map[string]any{"score": map[string]any{"type": "integer"}, "text": map[string]any{"type": "string"}}, "required": []any{"score"}})
	if err != nil {
		t.Fatal(err)
	}
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent})
	if err != nil {
		t.Fatal(err)
	}
	var seen []any
	comp := &eval.Component{Name: "s", Position: pos(1), Fn: func(cc *eval.ComponentContext) (any, error) {
		v, err := cc.EvaluateStructured(&eval.Agent{Position: pos(2), Children: []any{"rate"}}, schema, pos(2))
		if err != nil {
			return nil, err
		}
		seen = append(seen, v)
		return fmt.Sprintf("%T %v", v.(map[string]any)["score"], v), nil
	}}
	j := eval.NewMemoryJournal()
	first, err := rt.Evaluate(context.Background(), comp, eval.EvaluateOptions{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	agent.calls.Store(0)
	again, err := rt.Resume(context.Background(), comp, eval.ResumeOptions{RunID: "r", Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if again != first || first != "int64 map[score:4 text:rate]" || agent.calls.Load() != 0 {
		t.Fatalf("structured replay %q, first %q, live %d", again, first, agent.calls.Load())
	}
}

func TestJournalRecordsSessionTurns(t *testing.T) {
	p := &sessionProvider{}
	rt, err := eval.New(eval.Options{AgentProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	tree := &eval.Agent{Position: pos(1), Children: []any{"hi", &eval.FollowUp{Children: []any{"more"}}}}
	j := eval.NewMemoryJournal()
	got, err := rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	effects := j.Effects()
	if len(effects) != 1 || !strings.Contains(string(effects[0].Result), `"turns":[{"index":1,"kind":"initial","stopReason":"end_turn"},{"index":2,"kind":"follow-up","stopReason":"end_turn"}]`) {
		t.Fatalf("recorded %s", effects[0].Result)
	}
	p.turns = nil
	again, err := rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j})
	if err != nil || again != got || len(p.turns) != 0 {
		t.Fatalf("replay = %q (%v), first %q, %d turns run live", again, err, got, len(p.turns))
	}
}

func TestJournalRestoresWorkspaceFiles(t *testing.T) {
	sb, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every step reads what the steps before it wrote, so a step served
	// from the journal whose files were not put back changes the output.
	steps := []string{
		"echo one > a.txt; cat a.txt",
		"echo two >> a.txt; mkdir -p sub; wc -l < a.txt > sub/count; cat sub/count",
		"rm a.txt; echo three > b.txt; ls",
		"cat b.txt sub/count",
	}
	tree := func(ws eval.WorkspaceProvider) any {
		var scripts []any
		for i, s := range steps {
			scripts = append(scripts, &eval.Script{Position: pos(10 + i), Shell: "sh", Children: []any{s}}, "|")
			if i == 1 {
				// Read while the later steps are still being replayed: the
				// files must be those of this point of the recorded run.
				scripts = append(scripts, &eval.Include{Path: "sub/count", NoTitle: true, Position: pos(20)}, "|")
			}
		}
		return &eval.Workspace{ID: "repo", Provider: ws, Position: pos(1), Save: eval.DefaultSavePolicy(),
			Children: []any{&eval.Sandbox{Provider: sb, Access: eval.ReadWrite, Position: pos(2), Children: scripts}}}
	}
	final := func(ws eval.WorkspaceProvider) string {
		t.Helper()
		rt, err := eval.New(eval.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := rt.Evaluate(context.Background(), &eval.Workspace{ID: "repo", Provider: ws, Position: pos(1), Load: &eval.WorkspaceLoad{Revision: "current"},
			Children: []any{&eval.Sandbox{Provider: sb, Access: eval.ReadWrite, Position: pos(2), Children: []any{&eval.Script{Position: pos(3), Shell: "sh", Children: []any{"find . | sort; cat b.txt sub/count"}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	newWS := func() eval.WorkspaceProvider {
		ws, err := filesystem.New(filesystem.Options{Directory: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := newWS()
	j := eval.NewMemoryJournal()
	want, err := rt.Evaluate(context.Background(), tree(ws), eval.EvaluateOptions{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := final(ws)
	if !strings.Contains(want, "three\n2\n|") || !strings.Contains(wantFiles, "./sub/count") {
		t.Fatalf("the recorded run: %q, files %q", want, wantFiles)
	}
	for k := 0; k <= len(steps); k++ {
		partial := j.Truncated(k)
		ws := newWS() // the crashed run never saved
		got, err := rt.Resume(context.Background(), tree(ws), eval.ResumeOptions{RunID: "r", Journal: partial})
		if err != nil {
			t.Fatalf("resume after %d steps: %v", k, err)
		}
		if got != want {
			t.Fatalf("resume after %d steps = %q, want %q", k, got, want)
		}
		if files := final(ws); files != wantFiles {
			t.Fatalf("resume after %d steps saved\n%s\nwant\n%s", k, files, wantFiles)
		}
	}
}

func TestJournalRefusesWhatItCannotRestore(t *testing.T) {
	lw, err := localws.New(localws.Options{Directory: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Workspace{Provider: lw, Position: pos(4)}, eval.EvaluateOptions{Journal: eval.NewMemoryJournal()})
	if err == nil || !strings.Contains(err.Error(), `t.star:4:1: workspace provider "local" edits its directory in place`) {
		t.Fatalf("local workspace in a journaled run: %v", err)
	}
	det, err := deterministic.NewSandbox(deterministic.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Sandbox{Provider: det, Position: pos(6)}, eval.EvaluateOptions{Journal: eval.NewMemoryJournal()})
	if err == nil || !strings.Contains(err.Error(), "t.star:6:1: sandbox provider") || !strings.Contains(err.Error(), "could not put back") {
		t.Fatalf("a stateful sandbox in a journaled run: %v", err)
	}
}

func TestCassetteServesAgentsOnly(t *testing.T) {
	var tools, scripts atomic.Int64
	tool := upperTool(t, &tools)
	agent := &countingAgent{}
	rt := durableRuntime(t, agent, &scripts)
	j := eval.NewMemoryJournal()
	want, err := rt.Evaluate(context.Background(), durableTree(t, tool), eval.EvaluateOptions{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	agent.calls.Store(0)
	tools.Store(0)
	scripts.Store(0)
	c := j.Truncated(len(j.Effects()))
	got, err := rt.Evaluate(context.Background(), durableTree(t, tool), eval.EvaluateOptions{Journal: c, Cassette: true})
	if err != nil || got != want {
		t.Fatalf("cassette replay = %q, %v; want %q", got, err, want)
	}
	if agent.calls.Load() != 0 || tools.Load() != 3 || scripts.Load() != 1 {
		t.Fatalf("a cassette replay ran %d agents, %d tools and %d scripts live, want 0, 3 and 1", agent.calls.Load(), tools.Load(), scripts.Load())
	}
	if n := len(c.Effects()); n != len(j.Effects()) {
		t.Fatalf("a cassette replay recorded %d effects", n-len(j.Effects()))
	}
	_, err = rt.Evaluate(context.Background(), []any{durableTree(t, tool), &eval.Agent{Position: pos(99), Children: []any{"new"}}}, eval.EvaluateOptions{Journal: c, Cassette: true})
	if err == nil || !strings.Contains(err.Error(), "t.star:99:1: agent() has no recording in the cassette") || agent.calls.Load() != 0 {
		t.Fatalf("an agent the cassette never saw: %v (live %d)", err, agent.calls.Load())
	}
	// The final agent of durableTree, at the same identity, with another
	// prompt.
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Position: pos(50), Children: []any{"changed"}}, eval.EvaluateOptions{Journal: c, Cassette: true})
	var de *eval.DivergenceError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "its prompt changed since the cassette was recorded") {
		t.Fatalf("a changed prompt against a cassette: %v", err)
	}
}

func TestResumeVerifyFindsDivergenceBeforeAnythingRuns(t *testing.T) {
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent, Limits: &eval.Limits{MaxConcurrentAgents: eval.Unlimited}})
	if err != nil {
		t.Fatal(err)
	}
	branch := func(line int, prompts ...string) any {
		var seq []any
		for i, p := range prompts {
			seq = append(seq, &eval.Agent{Position: pos(line + i), Children: []any{p}})
		}
		return seq
	}
	tree := func(b2 string) any {
		return &eval.Parallel{Position: pos(1), Branches: []any{branch(10, "a1", "a2"), branch(20, "b1", b2)}}
	}
	full := eval.NewMemoryJournal()
	if _, err := rt.Evaluate(context.Background(), tree("b2"), eval.EvaluateOptions{Journal: full}); err != nil {
		t.Fatal(err)
	}
	// The crash came while a2 ran: every other agent is recorded.
	j := eval.NewMemoryJournal()
	for _, e := range full.Effects() {
		if e.Pos != pos(11) {
			if err := j.Record(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	agent.calls.Store(0)
	_, err = rt.Resume(context.Background(), tree("B2"), eval.ResumeOptions{RunID: "r", Journal: j})
	var de *eval.DivergenceError
	if !errors.As(err, &de) || de.Pos != pos(21) {
		t.Fatalf("verify: %v, want the divergence of b2 at t.star:21:1", err)
	}
	if n := agent.calls.Load(); n != 0 {
		t.Fatalf("a verified resume ran %d agents live before reporting the divergence", n)
	}
	// Unchanged, the verified resume runs a2 live and nothing else.
	got, err := rt.Resume(context.Background(), tree("b2"), eval.ResumeOptions{RunID: "r", Journal: j})
	if err != nil || got != "<a1><a2><b1><b2>" || agent.calls.Load() != 1 {
		t.Fatalf("verified resume = %q, %v, %d live", got, err, agent.calls.Load())
	}
}

func TestJournalPinsTheLoadedRevision(t *testing.T) {
	sb, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := filesystem.New(filesystem.Options{Directory: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := func(children ...any) any {
		return &eval.Workspace{ID: "repo", Provider: ws, Position: pos(1), Load: &eval.WorkspaceLoad{Revision: "current"}, Save: eval.DefaultSavePolicy(),
			Children: []any{&eval.Sandbox{Provider: sb, Access: eval.ReadWrite, Position: pos(2), Children: children}}}
	}
	sh := func(line int, s string) any {
		return &eval.Script{Position: pos(line), Shell: "sh", Children: []any{s}}
	}
	publish := func(v string) {
		t.Helper()
		if _, err := rt.Evaluate(context.Background(), in(sh(3, "echo "+v+" > seed.txt"))); err != nil {
			t.Fatal(err)
		}
	}
	publish("first")
	tree := in(sh(10, "cat seed.txt"), sh(11, "echo step >> seed.txt; cat seed.txt"))
	j := eval.NewMemoryJournal()
	want, err := rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if want != "first\nfirst\nstep\n" || j.Effects()[0].Kind != "workspace" || !strings.Contains(string(j.Effects()[0].Result), `"revision":"`) {
		t.Fatalf("recorded run %q, first effect %+v", want, j.Effects()[0])
	}
	// The crash came after the acquisition was recorded; meanwhile
	// another run published a new revision.
	publish("second")
	got, err := rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j.Truncated(1)})
	if err != nil || got != want {
		t.Fatalf("resume = %q, %v; want %q (from the revision the run loaded)", got, err, want)
	}
}

func TestJournalRefusesDefaultsAtTheStart(t *testing.T) {
	lw, err := localws.New(localws.Options{Directory: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent, WorkspaceProvider: lw})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(context.Background(), &eval.Agent{Position: pos(1), Children: []any{"x"}}, eval.EvaluateOptions{Journal: eval.NewMemoryJournal()})
	if err == nil || !strings.Contains(err.Error(), `the default workspace provider "local" edits its directory in place`) || agent.calls.Load() != 0 {
		t.Fatalf("a journaled run with local_workspace() as the default: %v (%d agents ran)", err, agent.calls.Load())
	}
	if _, err := rt.Evaluate(context.Background(), &eval.Agent{Position: pos(1), Children: []any{"x"}}); err != nil {
		t.Fatalf("without a journal the default is fine: %v", err)
	}
}

func TestJournalIncludeChangedIsADivergence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("secret notes v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent, Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	// The include is outside any agent: its text is the result, and only
	// the include's own record can notice the change.
	tree := []any{&eval.Include{Src: "notes.md", NoTitle: true, Position: pos(3)}, &eval.Agent{Position: pos(4), Children: []any{"go"}}}
	j := eval.NewMemoryJournal()
	if _, err := rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{Journal: j}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("secret notes v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j})
	var de *eval.DivergenceError
	if !errors.As(err, &de) || de.Pos != pos(3) || strings.Join(de.Changed, ",") != "content" || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a changed included file: %v", err)
	}
}

// lookupCounter counts the Lookups made of the journal it wraps; it
// implements neither eval.SizedJournal nor eval.ListingJournal.
type lookupCounter struct {
	m       *eval.MemoryJournal
	lookups atomic.Int64
}

func (c *lookupCounter) Lookup(id string) *eval.Effect {
	c.lookups.Add(1)
	return c.m.Lookup(id)
}

func (c *lookupCounter) Record(e *eval.Effect) error { return c.m.Record(e) }
func (c *lookupCounter) Sync() error                 { return c.m.Sync() }

// listCounter is a lookupCounter that implements eval.ListingJournal and counts
// the listings.
type listCounter struct {
	*lookupCounter
	lists atomic.Int64
}

func (c *listCounter) Effects() []*eval.Effect {
	c.lists.Add(1)
	return c.m.Effects()
}

// sizedCounter is a listCounter that implements eval.SizedJournal.
type sizedCounter struct{ *listCounter }

func (c sizedCounter) Len() int { return c.m.Len() }

// TestJournalFreshRunLooksNothingUp checks the eval.SizedJournal and
// eval.ListingJournal contracts: an evaluation whose journal holds no record
// reads nothing of it, one whose journal lists its records reads them
// once, one whose journal can do neither looks up each effect, and all
// record the same.
func TestJournalFreshRunLooksNothingUp(t *testing.T) {
	var tools, scripts atomic.Int64
	tool := upperTool(t, &tools)
	agent := &countingAgent{}
	rt := durableRuntime(t, agent, &scripts)

	plain := &lookupCounter{m: eval.NewMemoryJournal()}
	want, err := rt.Evaluate(context.Background(), durableTree(t, tool), eval.EvaluateOptions{Journal: plain})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(plain.m.Effects()))
	if got := plain.lookups.Load(); got != n {
		t.Errorf("a journal that is neither a SizedJournal nor a ListingJournal had %d lookups for %d effects, want one each", got, n)
	}

	listed := &listCounter{lookupCounter: &lookupCounter{m: eval.NewMemoryJournal()}}
	if _, err := rt.Evaluate(context.Background(), durableTree(t, tool), eval.EvaluateOptions{Journal: listed}); err != nil {
		t.Fatal(err)
	}
	if l, e := listed.lookups.Load(), listed.lists.Load(); l != 0 || e != 1 {
		t.Errorf("a ListingJournal had %d lookups and %d listings, want none and one", l, e)
	}

	sized := sizedCounter{&listCounter{lookupCounter: &lookupCounter{m: eval.NewMemoryJournal()}}}
	got, err := rt.Evaluate(context.Background(), durableTree(t, tool), eval.EvaluateOptions{Journal: sized})
	if err != nil || got != want {
		t.Fatalf("evaluation with a SizedJournal = %q, %v; want %q", got, err, want)
	}
	if l, e := sized.lookups.Load(), sized.lists.Load(); l != 0 || e != 0 {
		t.Errorf("a fresh SizedJournal had %d lookups and %d listings, want none", l, e)
	}
	if m := int64(len(sized.m.Effects())); m != n {
		t.Errorf("a fresh SizedJournal recorded %d effects, want %d", m, n)
	}

	// Once it holds records, a resume lists them (once for the dry
	// replay, once for the live one) and serves them.
	agent.calls.Store(0)
	again, err := rt.Resume(context.Background(), durableTree(t, tool), eval.ResumeOptions{RunID: "r", Journal: sized})
	if err != nil || again != want {
		t.Fatalf("resume = %q, %v; want %q", again, err, want)
	}
	if e := sized.lists.Load(); e != 2 || agent.calls.Load() != 0 {
		t.Errorf("resume made %d listings and %d live agent calls; want 2 and none", e, agent.calls.Load())
	}
}

// TestJournalToolWithoutInput: a tool called from component code with no
// input (t() in Starlark) is recorded and served again like any other
// call, apart from a call with {} as its input, and a journal does not
// change what a failing or refused call reports.
func TestJournalToolWithoutInput(t *testing.T) {
	var calls atomic.Int64
	tool, err := eval.NewTool(eval.ToolOptions{Name: "t", Description: "d", Position: pos(1),
		Execute: func(_ context.Context, in any) (any, error) {
			calls.Add(1)
			return fmt.Sprintf("ok %d", len(in.(map[string]any))), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	failing, err := eval.NewTool(eval.ToolOptions{Name: "f", Description: "d", Position: pos(2),
		Input:   mustSchema(t, map[string]any{"type": "object", "required": []any{"id"}, "properties": map[string]any{"id": map[string]any{"type": "integer"}}}),
		Execute: func(context.Context, any) (any, error) { return nil, errors.New("boom") }})
	if err != nil {
		t.Fatal(err)
	}
	tree := func(tl *eval.Tool, inputs ...any) any {
		return &eval.Component{Name: "c", Position: pos(3), Fn: func(cc *eval.ComponentContext) (any, error) {
			var out []any
			for _, in := range inputs {
				v, err := cc.CallTool(tl, in)
				if err != nil {
					return nil, err
				}
				out = append(out, fmt.Sprint(v), ";")
			}
			return out, nil
		}}
	}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := eval.NewMemoryJournal()
	got, err := rt.Evaluate(context.Background(), tree(tool, eval.NoInput, map[string]any{}), eval.EvaluateOptions{Journal: j})
	if err != nil || got != "ok 0;ok 0;" {
		t.Fatalf("journaled run: %q, %v", got, err)
	}
	if n := len(j.Effects()); n != 2 {
		t.Fatalf("%d effects recorded, want 2", n)
	}
	calls.Store(0)
	got, err = rt.Resume(context.Background(), tree(tool, eval.NoInput, map[string]any{}), eval.ResumeOptions{RunID: "r", Journal: j})
	if err != nil || got != "ok 0;ok 0;" || calls.Load() != 0 {
		t.Fatalf("resume: %q, %v, %d live calls", got, err, calls.Load())
	}
	// The two calls' records are told apart: swapping them is a change.
	if _, err := rt.Resume(context.Background(), tree(tool, map[string]any{}, eval.NoInput), eval.ResumeOptions{RunID: "r", Journal: j}); err == nil {
		t.Fatal("a resume whose calls swapped their inputs was not reported as a divergence")
	}
	// A refused call reports the same error with and without a journal.
	_, plain := rt.Evaluate(context.Background(), tree(failing, eval.NoInput))
	_, journaled := rt.Evaluate(context.Background(), tree(failing, eval.NoInput), eval.EvaluateOptions{Journal: eval.NewMemoryJournal()})
	if plain == nil || journaled == nil || plain.Error() != journaled.Error() || !strings.Contains(plain.Error(), "input is required") {
		t.Fatalf("a call the schema refuses: without a journal %v, with one %v", plain, journaled)
	}
}
