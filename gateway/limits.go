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
	out, err := limiters(limits)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.limits = out
	g.mu.Unlock()
	return nil
}

// group is the rate limits of a group of routes, and how many members
// it has.
type group struct {
	limits  map[string]*limiter
	members int
}

// JoinGroup makes the routes of group (RouteIn) share limits, in place of
// the gateway's own, until every member has called the function it
// returns: a worker that serves the sessions of several runs holds each
// run's sessions to that run's limits. The first member's limits stand
// while the group has members.
func (g *Gateway) JoinGroup(name string, limits map[string]Limit) (leave func(), err error) {
	ls, err := limiters(limits)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.groups == nil {
		g.groups = map[string]*group{}
	}
	gr := g.groups[name]
	if gr == nil {
		gr = &group{limits: ls}
		g.groups[name] = gr
	}
	gr.members++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			if gr.members--; gr.members == 0 && g.groups[name] == gr {
				delete(g.groups, name)
			}
			g.mu.Unlock()
		})
	}, nil
}

// limiters makes the limiters of limits.
func limiters(limits map[string]Limit) (map[string]*limiter, error) {
	out := make(map[string]*limiter, len(limits))
	for k, l := range limits {
		if l.Concurrent < 0 || l.RPM < 0 || l.TPM < 0 {
			return nil, fmt.Errorf("rate limit of %q: concurrent, rpm and tpm must not be negative", k)
		}
		out[strings.TrimSuffix(k, "/")] = newLimiter(l)
	}
	return out, nil
}

// limiterFor returns the limiter of upstream u for a route of group (""
// for none), or nil.
func (g *Gateway) limiterFor(u *url.URL, name string) *limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	limits := g.limits
	if gr := g.groups[name]; name != "" && gr != nil {
		limits = gr.limits
	}
	if l := limits[strings.TrimSuffix(u.String(), "/")]; l != nil {
		return l
	}
	return limits[u.Host]
}
