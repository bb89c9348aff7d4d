package acp

import (
	"context"
	"errors"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
)

func TestRateLimitedRecognisesTheAgentsWords(t *testing.T) {
	cases := []struct {
		err   error
		limit bool
		after time.Duration
	}{
		{errors.New(`API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}`), true, 0},
		{errors.New("stream error: exceeded retry limit, last status: 429 Too Many Requests"), true, 0},
		{acpsdk.NewInternalError(map[string]any{"details": "RESOURCE_EXHAUSTED: quota metric, retryDelay: 30s"}), true, 30 * time.Second},
		{errors.New(`{"type":"overloaded_error"} retry-after: 2`), true, 2 * time.Second},
		{errors.New("Rate limit reached; please try again in 350ms"), true, 350 * time.Millisecond},
		{errors.New("429: You exceeded your current quota (insufficient_quota), check your plan and billing details"), false, 0},
		{errors.New("the agent crashed at line 4290"), false, 0},
		{errors.New("ENOENT: no such file"), false, 0},
	}
	for _, c := range cases {
		got := rateLimited(context.Background(), c.err)
		var rl *eval.RateLimitError
		if errors.As(got, &rl) != c.limit {
			t.Errorf("%v: rate limit = %v, want %v", c.err, !c.limit, c.limit)
			continue
		}
		if c.limit && rl.RetryAfter != c.after {
			t.Errorf("%v: retry after %v, want %v", c.err, rl.RetryAfter, c.after)
		}
	}
	// A cancelled turn is never a rate limit.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var rl *eval.RateLimitError
	if errors.As(rateLimited(ctx, errors.New("429")), &rl) {
		t.Error("a cancelled turn read as a rate limit")
	}
}
