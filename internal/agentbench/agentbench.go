// Package agentbench measures how long a real agent takes from the start
// of an AML session to its first model request, which is the first
// prompt reaching the model: process start, ACP handshake, session/new
// (MCP servers included) and the agent's own preparation.
package agentbench

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
)

// Start runs two sub-benchmarks of one-turn sessions of the agent that
// provider makes against the fake model, each reporting the mean time to
// the first model request in ms/first-request: "cold", where every
// session gets a new, empty cache directory, and "warm", where every
// session shares one that a session before the timing filled. provider
// passes cache to the agent as its caches' home (Node's compile cache,
// an unpacked package); an agent with no such cache runs the same way
// in both. The operating system's file cache is warm in both.
func Start(b *testing.B, provider func(model *fakemodel.Server, cache string) eval.AgentProvider) {
	b.Helper()
	var mu sync.Mutex
	var first time.Time
	model := fakemodel.Start(func(r *fakemodel.Request) fakemodel.Reply {
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		mu.Unlock()
		return fakemodel.Script(r)
	})
	b.Cleanup(model.Close)
	session := func(b *testing.B, cache string) time.Duration {
		mu.Lock()
		first = time.Time{}
		mu.Unlock()
		rt, err := eval.New(eval.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		if _, err := rt.Evaluate(ctx, &eval.Agent{Provider: provider(model, cache), Children: []any{"hello"}}); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			b.Fatal("the session made no model request")
		}
		return first.Sub(start)
	}
	b.Run("cold", func(b *testing.B) {
		var total time.Duration
		n := 0
		for b.Loop() {
			dir, err := os.MkdirTemp("", "aml-bench-cache-")
			if err != nil {
				b.Fatal(err)
			}
			total += session(b, dir)
			n++
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/first-request")
	})
	b.Run("warm", func(b *testing.B) {
		dir := b.TempDir()
		session(b, dir)
		var total time.Duration
		n := 0
		for b.Loop() {
			total += session(b, dir)
			n++
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/first-request")
	})
}
