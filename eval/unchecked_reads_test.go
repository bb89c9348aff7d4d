package eval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aml-go/aml/eval"
)

// TestResumeUncheckedReads: a resume that cannot check read digests (the
// run was recorded under another key) serves the recorded reads as they
// are, neither compared nor recorded again, and records new ones.
func TestResumeUncheckedReads(t *testing.T) {
	agent := &countingAgent{}
	rt, err := eval.New(eval.Options{AgentProvider: agent})
	if err != nil {
		t.Fatal(err)
	}
	// digest is what the component code reads; second, when set, is a
	// read the recorded run did not make.
	var digest, second string
	tree := &eval.Component{Name: "main", Position: pos(2), Fn: func(cc *eval.ComponentContext) (any, error) {
		if err := cc.Read(eval.RecordedRead{Kind: "env", Name: "INNER", Pos: pos(3), Digest: digest}); err != nil {
			return nil, err
		}
		if second != "" {
			if err := cc.Read(eval.RecordedRead{Kind: "env", Name: "NEW", Pos: pos(4), Digest: second}); err != nil {
				return nil, err
			}
		}
		return &eval.Agent{Position: pos(5), Children: []any{"go"}}, nil
	}}
	reads := func(d string) []eval.RecordedRead {
		return []eval.RecordedRead{{Kind: "env", Name: "TOKEN", Pos: pos(1), Digest: d}}
	}
	j := eval.NewMemoryJournal()
	digest = "recorded-inner"
	if _, err := rt.Evaluate(context.Background(), tree, eval.EvaluateOptions{Journal: j, Reads: reads("recorded-top")}); err != nil {
		t.Fatal(err)
	}
	recorded := len(j.Effects())

	// Checked, the changed digests are a divergence.
	digest = "other-inner"
	_, err = rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j, Reads: reads("other-top")})
	var de *eval.DivergenceError
	if !errors.As(err, &de) {
		t.Fatalf("a checked resume with changed read digests: %v, want a divergence", err)
	}

	// Unchecked, they are served as recorded; the agent is replayed.
	agent.calls.Store(0)
	for range 2 {
		got, err := rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j, Reads: reads("other-top"), UncheckedReads: true})
		if err != nil {
			t.Fatalf("unchecked resume: %v", err)
		}
		if got != "<go>" {
			t.Fatalf("unchecked resume = %q", got)
		}
	}
	if n := agent.calls.Load(); n != 0 {
		t.Fatalf("the unchecked resume ran %d agent sessions live, want 0", n)
	}
	if n := len(j.Effects()); n != recorded {
		t.Fatalf("the unchecked resume recorded %d effects, want none", n-recorded)
	}

	// A read with no record is recorded.
	second = "new-read"
	if _, err := rt.Resume(context.Background(), tree, eval.ResumeOptions{RunID: "r", Journal: j, Reads: reads("other-top"), UncheckedReads: true}); err != nil {
		t.Fatal(err)
	}
	effects := j.Effects()
	if len(effects) != recorded+1 || effects[recorded].Kind != "read" || effects[recorded].Label != `env("NEW")` {
		t.Fatalf("a new read under UncheckedReads: %d effects, last %+v; want it recorded", len(effects), effects[len(effects)-1])
	}
}
