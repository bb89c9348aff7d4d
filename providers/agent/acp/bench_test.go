package acp_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// BenchmarkSession measures the engine's own cost of one whole session
// against the Go fake agent: spawn, initialize, session/new, one prompt
// and cleanup.
func BenchmarkSession(b *testing.B) {
	p := fake(b, nil)
	req := &eval.AgentRequest{Prompt: "say ok"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Run(ctx, req, nil)
		if err != nil || resp.Text != "ok" {
			b.Fatal(resp, err)
		}
	}
}

// BenchmarkTurn measures one additional session/prompt turn in an open
// session.
func BenchmarkTurn(b *testing.B) {
	p := fake(b, nil)
	ctx := context.Background()
	s, err := p.OpenSession(ctx, &eval.AgentRequest{Prompt: "say ok"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r, err := s.RunTurn(ctx, eval.AgentTurn{Index: i + 1, Kind: "follow-up", Text: "msg m ok"})
		if err != nil || r.Text != "ok" {
			b.Fatal(r, err)
		}
	}
}

// TestManyConcurrentSessions runs 100 sessions at once (no concurrency
// limit) and checks that no goroutine or agent process outlives them.
func TestManyConcurrentSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping 100 concurrent agent processes in -short mode")
	}
	before := runtime.NumGoroutine()
	p := fake(t, nil)
	children := make([]any, 100)
	for i := range children {
		children[i] = &eval.Agent{Provider: p, Children: []any{fmt.Sprintf("say %d,", i)}}
	}
	limits := eval.DefaultLimits()
	limits.MaxConcurrentAgents = eval.Unlimited
	limits.MaxAgentCalls = eval.Unlimited
	rt, err := eval.New(eval.Options{Limits: &limits})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := rt.Evaluate(ctx, &eval.Parallel{Branches: children})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, ","); n != 100 {
		t.Fatalf("got %d results", n)
	}
	deadline := time.Now().Add(hangBound)
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if kids := childProcesses(t); len(kids) > 0 {
		t.Fatalf("agent processes left behind: %v", kids)
	}
}

// childProcesses lists live (non-zombie) children of this process.
func childProcesses(t *testing.T) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := fmt.Sprint(os.Getpid())
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == self && f[0] != "Z" {
			out = append(out, e.Name())
		}
	}
	return out
}
