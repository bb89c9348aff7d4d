package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimiterWindow: rpm admits that many starts in any minute and says
// how long to wait for the next; tpm holds new calls while the minute's
// tokens reach it.
func TestLimiterWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	l := newLimiter(Limit{RPM: 3})
	for i := range 3 {
		if w := l.admit(t0.Add(time.Duration(i) * time.Second)); w != 0 {
			t.Fatalf("start %d waits %v", i, w)
		}
	}
	if w := l.admit(t0.Add(10 * time.Second)); w < 49*time.Second || w > 51*time.Second {
		t.Fatalf("the fourth start in a minute waits %v, want about 50s", w)
	}
	if w := l.admit(t0.Add(61 * time.Second)); w != 0 {
		t.Fatalf("a start a minute later waits %v", w)
	}
	l = newLimiter(Limit{TPM: 100})
	if w := l.admit(t0); w != 0 {
		t.Fatal(w)
	}
	l.spends = append(l.spends, spend{t0, 120})
	if w := l.admit(t0.Add(30 * time.Second)); w < 29*time.Second || w > 31*time.Second {
		t.Fatalf("over tpm: waits %v, want about 30s", w)
	}
	if w := l.admit(t0.Add(61 * time.Second)); w != 0 {
		t.Fatalf("a minute later: waits %v", w)
	}
}

// TestConcurrentLimit: calls to an upstream with a concurrency limit of
// 2 wait for one another, whatever route (session) they come from, and
// all succeed; another upstream is not held.
func TestConcurrentLimit(t *testing.T) {
	var now, peak atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond) // the upstream call takes time, so that calls overlap
		now.Add(-1)
		fmt.Fprint(w, `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	defer upstream.Close()
	g, _ := Start(Options{})
	defer g.Close()
	if err := g.SetLimits(map[string]Limit{upstream.URL + "/v1": {Concurrent: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetLimits(map[string]Limit{"x": {RPM: -1}}); err == nil {
		t.Fatal("a negative limit was accepted")
	}
	if err := g.SetLimits(map[string]Limit{upstream.URL + "/v1/": {Concurrent: 2}}); err != nil {
		t.Fatal(err)
	}
	var bases []string
	for range 3 {
		base, remove, err := g.Route(upstream.URL+"/v1", &allowAll{})
		if err != nil {
			t.Fatal(err)
		}
		defer remove()
		bases = append(bases, base)
	}
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(bases[i%3]+"/chat/completions", "application/json", strings.NewReader(`{}`))
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("call %d: %v %v", i, resp, err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	if peak.Load() != 2 {
		t.Fatalf("%d calls reached the upstream at once under a limit of 2", peak.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newLimiter(Limit{Concurrent: 1}).acquire(ctx); err != nil {
		// A free slot is taken even when ctx is done: select picks
		// either; both are fine.
		_ = err
	}
}

// TestGroupLimits: the routes of a group are held by the group's limits
// while it has members, not by the gateway's own, and another group's
// routes by neither; once every member left, the gateway's own apply.
func TestGroupLimits(t *testing.T) {
	g, _ := Start(Options{})
	defer g.Close()
	up, _ := url.Parse("http://model.example/v1")
	if err := g.SetLimits(map[string]Limit{"model.example": {Concurrent: 9}}); err != nil {
		t.Fatal(err)
	}
	global := g.limiterFor(up, "")
	leave1, err := g.JoinGroup("run-1", map[string]Limit{"model.example": {Concurrent: 1}})
	if err != nil {
		t.Fatal(err)
	}
	leave2, _ := g.JoinGroup("run-1", map[string]Limit{"model.example": {Concurrent: 5}})
	in := g.limiterFor(up, "run-1")
	if in == nil || in == global || in.lim.Concurrent != 1 {
		t.Fatalf("run-1's routes are held by %+v, want its first member's limit of 1", in)
	}
	if g.limiterFor(up, "run-2") != global || g.limiterFor(up, "") != global {
		t.Fatal("a route of no group, or of a group without members, is not held by the gateway's own limits")
	}
	leave1()
	leave1() // a second call changes nothing
	if g.limiterFor(up, "run-1") != in {
		t.Fatal("the group lost its limits while a member remained")
	}
	leave2()
	if g.limiterFor(up, "run-1") != global {
		t.Fatal("the group kept its limits once every member left")
	}
	if _, err := g.JoinGroup("run-3", map[string]Limit{"x": {TPM: -1}}); err == nil {
		t.Fatal("a negative limit was accepted")
	}
}
