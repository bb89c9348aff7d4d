package gateway

import (
	"fmt"

	"github.com/aml-go/aml/eval"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type allowAll struct {
	mu    sync.Mutex
	calls []Call
}

func (a *allowAll) Allow() error              { return nil }
func (a *allowAll) Charge(string, eval.Usage) {}
func (a *allowAll) Record(c Call) {
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"soon", 0, false},
		{"-5", 0, false},
	} {
		got, ok := retryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRateLimitStorm: 100 concurrent calls, each refused with 429 or 503
// a random number of times (with Retry-After: 0, an HTTP date in the
// past, or none). The gateway tries each at most Attempts times, never
// waits longer than MaxWait for one, sends exactly the tries it counts
// (no retry multiplies), and the agent gets the success when one came in
// time and the last refusal otherwise.
func TestRateLimitStorm(t *testing.T) {
	const calls, attempts = 100, 4
	fails := make([]int, calls)
	for i := range fails {
		fails[i] = rand.IntN(7)
	}
	var upstreamRequests atomic.Int64
	seen := make([]atomic.Int64, calls)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamRequests.Add(1)
		var i int
		fmt.Sscanf(r.URL.Query().Get("i"), "%d", &i)
		n := int(seen[i].Add(1))
		if n <= fails[i] {
			switch i % 3 {
			case 0:
				w.Header().Set("Retry-After", "0")
			case 1:
				w.Header().Set("Retry-After", time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat))
			}
			status := http.StatusTooManyRequests
			if n%2 == 0 {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, "slow down", status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	}))
	defer upstream.Close()
	policy := Retry{Attempts: attempts, MaxWait: 200 * time.Millisecond, Backoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond}
	g, err := Start(Options{Retry: policy})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m := &allowAll{}
	base, remove, err := g.Route(upstream.URL+"/v1", m)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	statuses := make([]int, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(fmt.Sprintf("%s/chat/completions?i=%d", base, i), "application/json", strings.NewReader(`{"model":"m"}`))
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	var want int64
	for i, f := range fails {
		want += int64(min(f+1, attempts))
		if ok := f < attempts; ok != (statuses[i] == http.StatusOK) {
			t.Errorf("call %d refused %d times: the agent got %d", i, f, statuses[i])
		}
	}
	if got := upstreamRequests.Load(); got != want {
		t.Errorf("the upstream got %d requests, want %d: retries multiplied or were lost", got, want)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m.mu.Lock()
		n := len(m.calls)
		m.mu.Unlock()
		if n >= calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.calls) != calls {
		t.Fatalf("%d calls recorded", len(m.calls))
	}
	for _, c := range m.calls {
		if c.Attempts < 1 || c.Attempts > attempts || c.Waited > policy.MaxWait {
			t.Errorf("call %+v passes the policy", c)
		}
		if (c.Status == http.StatusOK) != (c.Usage.InputTokens == 3) {
			t.Errorf("call %+v: usage counted from a refusal, or missed", c)
		}
	}
}

// TestRetryWaitBound: a Retry-After longer than the whole wait bound is
// not waited for: the agent gets the 429 (with its Retry-After) at once.
func TestRetryWaitBound(t *testing.T) {
	var n atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "come back in an hour", http.StatusTooManyRequests)
	}))
	defer upstream.Close()
	g, _ := Start(Options{})
	defer g.Close()
	base, remove, _ := g.Route(upstream.URL, &allowAll{})
	defer remove()
	start := time.Now()
	resp, err := http.Post(base+"/x", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3600" || n.Load() != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d (Retry-After %q) after %d requests and %s", resp.StatusCode, resp.Header.Get("Retry-After"), n.Load(), time.Since(start))
	}
}
