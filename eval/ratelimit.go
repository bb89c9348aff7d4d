package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"
)

// RateLimitRetry is how a model's rate limit is handled, once: by AML's
// model gateway for each model call of a metered session, and by the
// evaluator for an unmetered session that a rate limit ended (a
// *RateLimitError), which it runs again from its start. A call or session
// is tried at most Attempts times in all, while the waits between tries
// add up to no more than MaxWait; each wait is what the limit asked for
// (Retry-After) or an exponential backoff with jitter. It is a plain
// value.
type RateLimitRetry struct {
	// Attempts bounds the tries, the first included; 1 turns retries
	// off.
	Attempts int
	// MaxWait bounds the time spent waiting between tries.
	MaxWait time.Duration
	// Backoff is the first backoff when the limit says nothing of when
	// to come back; it doubles per try, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultRateLimitRetry is the policy of a zero RateLimitRetry: 5 tries,
// waits of at most 2 minutes in all, backoff from 1 s up to 30 s.
var DefaultRateLimitRetry = RateLimitRetry{Attempts: 5, MaxWait: 2 * time.Minute, Backoff: time.Second, MaxBackoff: 30 * time.Second}

// WithDefaults returns r with the zero fields of a zero r filled from
// DefaultRateLimitRetry; a r that sets anything keeps its zero fields as
// their defaults too, and Attempts is at least 1.
func (r RateLimitRetry) WithDefaults() RateLimitRetry {
	d := DefaultRateLimitRetry
	if r.Attempts == 0 {
		r.Attempts = d.Attempts
	}
	if r.MaxWait == 0 {
		r.MaxWait = d.MaxWait
	}
	if r.Backoff == 0 {
		r.Backoff = d.Backoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(d.MaxBackoff, r.Backoff)
	}
	r.Attempts = max(r.Attempts, 1)
	return r
}

// Validate reports a policy with negative bounds.
func (r RateLimitRetry) Validate() error {
	if r.Attempts < 0 || r.MaxWait < 0 || r.Backoff < 0 || r.MaxBackoff < 0 {
		return errors.New("rate limit retry: attempts, max_wait_s and the backoffs must not be negative")
	}
	return nil
}

// RateLimitError is a provider's error for a session that a model's rate
// limit ended (an HTTP 429 or 503, "overloaded", a quota of requests per
// minute) before it finished. The evaluator runs an unmetered session
// that fails with one again, under Options.RateLimitRetry.
type RateLimitError struct {
	// RetryAfter is when the limit said to come back, or 0.
	RetryAfter time.Duration
	// Err is the provider's error.
	Err error
}

func (e *RateLimitError) Error() string { return e.Err.Error() }

// Unwrap returns the provider's error.
func (e *RateLimitError) Unwrap() error { return e.Err }

// RetryKind is the kind of the record that keeps how often a journaled
// session was run again after a rate limit, and how long that waited, so
// that a resume goes on from there rather than from zero. It is not an
// effect of the program: replays neither reach nor miss it.
const RetryKind = "retry"

// RecordedRetries reads a RetryKind record: how often its session was run
// again after a rate limit, and how long that waited in all.
func RecordedRetries(e *Effect) (attempts int, waited time.Duration, ok bool) {
	if e == nil || e.Kind != RetryKind {
		return 0, 0, false
	}
	var r retryRecord
	if json.Unmarshal(e.Result, &r) != nil {
		return 0, 0, false
	}
	return r.Attempts, time.Duration(r.WaitedMS) * time.Millisecond, true
}

// retryRecord is the result of a RetryKind record.
type retryRecord struct {
	Attempts int   `json:"attempts"`
	WaitedMS int64 `json:"waited_ms"`
}

// retryID is the identity of the retry record of effect id.
func retryID(id string) string { return id + "!retry" }

// rateLimited runs an unmetered session, and runs it again from its start
// while a rate limit ends it and the policy allows. entry is the
// session's journal record to be, or nil.
func (d *domain) rateLimited(ctx context.Context, entry *Effect, n *Agent, p AgentProvider, req *AgentRequest, agentSpan *span, plan *agentPlan, sandbox *SandboxSession, turns *[]turnRecord) (*AgentResponse, error) {
	if metered(p, req, sandbox) {
		// The model gateway retried each call: retrying the session too
		// would multiply the tries.
		return d.session(ctx, n, p, req, agentSpan, plan, sandbox, turns)
	}
	policy := DefaultRateLimitRetry
	if r := d.rt.opts.RateLimitRetry; r != nil {
		policy = r.WithDefaults()
	}
	var state retryRecord
	loaded := entry == nil
	for {
		if turns != nil {
			*turns = (*turns)[:0]
		}
		resp, err := d.session(ctx, n, p, req, agentSpan, plan, sandbox, turns)
		var rl *RateLimitError
		if err == nil || !errors.As(err, &rl) || ctx.Err() != nil {
			return resp, err
		}
		if !loaded {
			// What the run's earlier evaluations retried, read only once
			// a rate limit is met: a journal pays no lookup otherwise.
			loaded = true
			if rec := d.journal.lookup(retryID(entry.ID)); rec != nil && rec.Kind == RetryKind {
				_ = json.Unmarshal(rec.Result, &state)
			}
		}
		state.Attempts++
		if state.Attempts >= policy.Attempts {
			return nil, gaveUp(err, fmt.Sprintf("a rate limit ended it %d times, the most configure(rate_limit_retry = {\"attempts\": N}) allows", state.Attempts))
		}
		delay := rl.RetryAfter
		if delay <= 0 {
			delay = backoffDelay(policy, state.Attempts, n.Position.String())
		}
		waited := time.Duration(state.WaitedMS) * time.Millisecond
		if waited+delay > policy.MaxWait {
			return nil, gaveUp(err, fmt.Sprintf("a rate limit ended it %d times, and waiting %s more would pass the %s that configure(rate_limit_retry = {\"max_wait_s\": N}) allows", state.Attempts, delay.Round(time.Millisecond), policy.MaxWait))
		}
		state.WaitedMS = (waited + delay).Milliseconds()
		if entry != nil {
			b, _ := json.Marshal(state)
			if rerr := d.record(&Effect{ID: retryID(entry.ID), Kind: RetryKind, Pos: entry.Pos, Label: entry.Label, Result: b}, false); rerr != nil {
				return nil, rerr
			}
		}
		agentSpan.event("agent.rate_limited", attrs{"attempt", int64(state.Attempts), "delayMs", delay.Milliseconds(), "error", rl.Error()}, nil)
		if d.sleep(ctx, delay) != nil || ctx.Err() != nil {
			return nil, canceled(ctx, n.Position)
		}
	}
}

// gaveUp adds why the session is not run again to its error.
func gaveUp(err error, why string) error {
	var ee *EvaluationError
	if errors.As(err, &ee) && ee == err {
		c := *ee
		c.Msg += " (" + why + ")"
		return &c
	}
	return fmt.Errorf("%w (%s)", err, why)
}

// backoffDelay is the backoff before try attempt+1: exponential from
// policy.Backoff, at most policy.MaxBackoff, with jitter drawn from the
// node and the attempt so that a replay (on Temporal) waits the same.
func backoffDelay(policy RateLimitRetry, attempt int, node string) time.Duration {
	b := policy.Backoff
	for i := 1; i < attempt && b < policy.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, policy.MaxBackoff)
	h := fnv.New64a()
	h.Write([]byte(node + "#" + strconv.Itoa(attempt)))
	// Between half and all of the backoff.
	return b/2 + time.Duration(h.Sum64()%uint64(b/2+1))
}
