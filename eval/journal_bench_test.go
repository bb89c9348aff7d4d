package eval_test

import (
	"context"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	filejournal "github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// BenchmarkSeq10kJournal is BenchmarkSeq10k/deterministic with every
// agent recorded in a journal: none (the baseline), in memory, and in the
// file backend (a new run per iteration, closed at its end). replay
// opens a file journal holding all 10,000 results and resumes the tree
// against it: every agent is served from the journal.
func BenchmarkSeq10kJournal(b *testing.B) {
	tree := siblingAgents(benchN)
	ctx := context.Background()
	p := benchProvider(b, "")
	rt := benchRuntime(b, p, noLimits)
	b.Run("none", func(b *testing.B) {
		benchEvaluate(b, rt, p.Reset, tree, benchN)
	})
	b.Run("memory", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Reset()
			if _, err := rt.Evaluate(ctx, tree, eval.EvaluateOptions{RunID: "bench", Journal: eval.NewMemoryJournal()}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file", func(b *testing.B) {
		dir := b.TempDir()
		b.ReportAllocs()
		for b.Loop() {
			p.Reset()
			run, err := filejournal.Create(dir, filejournal.Meta{Workflow: "bench.star"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Evaluate(ctx, tree, eval.EvaluateOptions{RunID: run.ID(), Journal: run}); err != nil {
				b.Fatal(err)
			}
			if err := run.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		dir := b.TempDir()
		run, err := filejournal.Create(dir, filejournal.Meta{Workflow: "bench.star"})
		if err != nil {
			b.Fatal(err)
		}
		want, err := rt.Evaluate(ctx, tree, eval.EvaluateOptions{RunID: run.ID(), Journal: run})
		if err != nil {
			b.Fatal(err)
		}
		id := run.ID()
		if err := run.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p.Reset()
			run, err := filejournal.Open(dir, id)
			if err != nil {
				b.Fatal(err)
			}
			got, err := rt.Resume(ctx, tree, eval.ResumeOptions{RunID: id, Journal: run})
			if err != nil || got != want {
				b.Fatalf("replay: %v", err)
			}
			if n := len(p.Calls()); n != 0 {
				b.Fatalf("the replay ran %d agents live", n)
			}
			if err := run.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// slowAgent answers after a fixed delay, like a real agent session, and
// is not in-process: a journaled run syncs before each call.
type slowAgent struct{ d time.Duration }

func (slowAgent) Name() string { return "slow" }

func (a slowAgent) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	select {
	case <-time.After(a.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &eval.AgentResponse{Text: req.Prompt}, nil
}

// BenchmarkSlowAgentsJournal evaluates 20 sequential agents that take
// 100 ms each, without a journal and with the file journal (a sync
// before every session): the journal's share of a realistic run.
func BenchmarkSlowAgentsJournal(b *testing.B) {
	tree := siblingAgents(20)
	rt := benchRuntime(b, slowAgent{100 * time.Millisecond}, noLimits)
	benchNoneAndFile(b, rt, tree)
}

// BenchmarkParallelScriptsJournal runs 200 host scripts of 10 ms each as
// one parallel(), without a journal and with the file journal: every
// script's record is made durable by the group commit (records that
// complete within one window share one fsync) instead of one fsync each.
func BenchmarkParallelScriptsJournal(b *testing.B) {
	const n = 200
	branches := make([]any, n)
	for i := range branches {
		branches[i] = &eval.Script{Command: "sleep", Args: []string{"0.01"}, Position: eval.Position{File: "bench.star", Line: int32(i + 1), Col: 1}}
	}
	tree := &eval.Parallel{Branches: branches}
	host, err := local.New(local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	limits := noLimits
	rt, err := eval.New(eval.Options{Host: host, Cwd: b.TempDir(), Limits: &limits})
	if err != nil {
		b.Fatal(err)
	}
	benchNoneAndFile(b, rt, tree)
}

// benchNoneAndFile times tree without a journal ("none") and in a new
// file journal run per iteration ("file").
func benchNoneAndFile(b *testing.B, rt *eval.Runtime, tree any) {
	ctx := context.Background()
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			if _, err := rt.Evaluate(ctx, tree); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			run, err := filejournal.Create(dir, filejournal.Meta{Workflow: "bench.star"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Evaluate(ctx, tree, eval.EvaluateOptions{RunID: run.ID(), Journal: run}); err != nil {
				b.Fatal(err)
			}
			if err := run.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
