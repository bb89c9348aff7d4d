package gateway

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Limit bounds the calls to one upstream, across every session and run
// of the gateway's process: Concurrent calls at once, RPM calls started
// and TPM tokens (input and output) spent in any minute. A zero field
// bounds nothing. A call waits for room, never fails for want of it.
type Limit struct {
	Concurrent int
	RPM        int
	TPM        int64
}

// limiter enforces one upstream's Limit. Safe for concurrent use.
type limiter struct {
	lim   Limit
	slots chan struct{}

	mu     sync.Mutex
	starts []time.Time // call starts in the last minute
	spends []spend     // tokens spent in the last minute
}

type spend struct {
	at     time.Time
	tokens int64
}

func newLimiter(l Limit) *limiter {
	lm := &limiter{lim: l}
	if l.Concurrent > 0 {
		lm.slots = make(chan struct{}, l.Concurrent)
	}
	return lm
}

// acquire waits until a call may start, and returns the function that
// ends it with the tokens it spent.
func (l *limiter) acquire(ctx context.Context) (func(tokens int64), error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	for {
		wait := l.admit(time.Now())
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if l.slots != nil {
				<-l.slots
			}
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
	return func(tokens int64) {
		if tokens > 0 && l.lim.TPM > 0 {
			l.mu.Lock()
			l.spends = append(l.spends, spend{time.Now(), tokens})
			l.mu.Unlock()
		}
		if l.slots != nil {
			<-l.slots
		}
	}, nil
}

// admit records a start at now and returns 0 when the minute's requests
// and tokens leave room for it, else how long to wait before asking again.
func (l *limiter) admit(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	cut := now.Add(-time.Minute)
	for len(l.starts) > 0 && !l.starts[0].After(cut) {
		l.starts = l.starts[1:]
	}
	for len(l.spends) > 0 && !l.spends[0].at.After(cut) {
		l.spends = l.spends[1:]
	}
	if l.lim.RPM > 0 && len(l.starts) >= l.lim.RPM {
		return l.starts[0].Sub(cut) + time.Millisecond
	}
	if l.lim.TPM > 0 {
		var used int64
		for _, s := range l.spends {
			used += s.tokens
		}
		if used >= l.lim.TPM {
			return l.spends[0].at.Sub(cut) + time.Millisecond
		}
	}
	if l.lim.RPM > 0 {
		l.starts = append(l.starts, now)
	}
	return 0
}

// SetLimits sets the rate limits of upstreams, replacing those set
// before: a key is an upstream's host ("api.openai.com") or a base URL
// ("https://api.openai.com/v1"), which wins over its host. Calls in
// flight keep the limiter they started under.
func (g *Gateway) SetLimits(limits map[string]Limit) error {
	out := make(map[string]*limiter, len(limits))
	for k, l := range limits {
		if l.Concurrent < 0 || l.RPM < 0 || l.TPM < 0 {
			return fmt.Errorf("rate limit of %q: concurrent, rpm and tpm must not be negative", k)
		}
		out[strings.TrimSuffix(k, "/")] = newLimiter(l)
	}
	g.mu.Lock()
	g.limits = out
	g.mu.Unlock()
	return nil
}

// limiterFor returns the limiter of upstream u, or nil.
func (g *Gateway) limiterFor(u *url.URL) *limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.limits[strings.TrimSuffix(u.String(), "/")]; l != nil {
		return l
	}
	return g.limits[u.Host]
}
