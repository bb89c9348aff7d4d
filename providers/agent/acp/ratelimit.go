package acp

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
)

// rateLimitText is how the agents say that a model's rate limit ended a
// turn: ACP has no error code or stop reason of its own for it, so the
// agent's error text is read (Claude Code's "API Error: 429
// {...rate_limit_error...}", Codex's "exceeded retry limit, last status:
// 429 Too Many Requests", Gemini's RESOURCE_EXHAUSTED, Anthropic's
// overloaded_error).
var rateLimitText = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b429\b|\b529\b|too many requests|rate[ _-]?limit|resource_exhausted|overloaded`)
})

// notTransient is a limit that waiting does not lift: the account's
// quota or billing.
var notTransient = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)insufficient_quota|billing|credit balance`) })

// retryAfterText reads when the limit said to come back: "retry after
// 20", "Retry-After: 2", "try again in 1.5s", "retryDelay": "30s".
var retryAfterText = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:retry[- _]?after|try again in|retry in|retrydelay)\W{0,4}(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?)?\b`)
})

// rateLimited returns err as an *eval.RateLimitError when its text (or
// the data of the agent's JSON-RPC error) says a model's rate limit ended
// the turn; otherwise err. A cancellation is never one.
func rateLimited(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	text := err.Error()
	var re *acpsdk.RequestError
	if errors.As(err, &re) {
		text = re.Error() // message and data
	}
	if !rateLimitText().MatchString(text) || notTransient().MatchString(text) {
		return err
	}
	return &eval.RateLimitError{RetryAfter: retryAfterIn(text), Err: err}
}

// retryAfterIn reads the first "retry after" of text, or 0.
func retryAfterIn(text string) time.Duration {
	m := retryAfterText().FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil || f <= 0 || f > 86400 {
		return 0
	}
	if strings.HasPrefix(strings.ToLower(m[2]), "m") {
		return time.Duration(f * float64(time.Millisecond))
	}
	return time.Duration(f * float64(time.Second))
}
