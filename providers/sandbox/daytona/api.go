package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Errors a caller can test for with errors.Is.
var (
	// ErrUnauthorized: the service refused the credentials (401) or
	// their permissions (403).
	ErrUnauthorized = errors.New("daytona refused the credentials")
	// ErrNotFound: what a request named does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrRateLimited: the service kept answering 429 Too Many Requests.
	ErrRateLimited = errors.New("rate limited by daytona")
	// ErrBuildFailed: the sandbox's image or snapshot could not be built
	// or started (the states build_failed and error).
	ErrBuildFailed = errors.New("daytona sandbox failed to build")
	// ErrSandboxGone: the sandbox was destroyed while it was in use.
	ErrSandboxGone = errors.New("daytona sandbox no longer exists")
)

// APIError is a request the service answered with an error status. It
// is not changed once returned, so it may be shared between goroutines.
type APIError struct {
	// Op says what the request was for ("creating a sandbox").
	Op string
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the service's message (credentials redacted).
	Message string
	// Attempts is the number of requests made (more than one when 429s
	// were retried).
	Attempts int
}

// Error implements error: the operation, the status and what it means
// for the caller, and the service's message.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	switch e.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Sprintf("daytona: %s: the API key was refused (401 Unauthorized; check DAYTONA_API_KEY and DAYTONA_API_URL): %s", e.Op, msg)
	case http.StatusForbidden:
		return fmt.Sprintf("daytona: %s: forbidden (403; the API key lacks the permission, or DAYTONA_ORGANIZATION_ID names another organization): %s", e.Op, msg)
	case http.StatusTooManyRequests:
		return fmt.Sprintf("daytona: %s: rate limited (429 Too Many Requests) on each of %d attempts: %s", e.Op, e.Attempts, msg)
	}
	return fmt.Sprintf("daytona: %s: %d %s: %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode), msg)
}

// Unwrap returns ErrUnauthorized, ErrNotFound or ErrRateLimited as the
// status says.
func (e *APIError) Unwrap() error {
	switch e.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusTooManyRequests:
		return ErrRateLimited
	}
	return nil
}

// request is one API call.
type request struct {
	op     string
	method string
	url    string
	// body is JSON-encoded (nil: no body).
	body any
	// header adds headers.
	header http.Header
	// detach lets an attempt under way finish when ctx is cancelled (its
	// answer matters: a create the service carried out), though no new
	// attempt starts.
	detach bool
	// idempotent requests are also retried after network failures and
	// 502, 503 and 504 answers.
	idempotent bool
}

// call makes a JSON request, retrying it as the options allow, and
// decodes a success's body into out (when not nil).
func (s *Service) call(ctx context.Context, rq request, out any) error {
	resp, err := s.send(ctx, rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("daytona: %s: reading the answer: %w", rq.op, s.redactErr(err))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("daytona: %s: the answer is not the JSON expected: %w", rq.op, err)
	}
	return nil
}

// send makes a request and returns a success's response (whose body the
// caller closes); an error status becomes an *APIError. Each attempt has
// the deadline RequestTimeout for its answer's headers (a response body
// is the caller's to bound); 429s are retried up to MaxRetries times,
// after the Retry-After the service asks for (at most MaxRetryWait).
func (s *Service) send(ctx context.Context, rq request) (*http.Response, error) {
	var body []byte
	if rq.body != nil {
		var err error
		if body, err = json.Marshal(rq.body); err != nil {
			return nil, fmt.Errorf("daytona: %s: encoding the request: %w", rq.op, err)
		}
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		resp, cb, err := s.attempt(ctx, rq, body)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil && !rq.detach {
				return nil, context.Cause(ctx)
			}
			if !rq.idempotent || attempt > s.opts.MaxRetries {
				return nil, fmt.Errorf("daytona: %s: %w", rq.op, err)
			}
			wait = backoff(attempt)
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return resp, nil
		default:
			apiErr := s.apiError(rq.op, resp, attempt)
			cb.release()
			retry := resp.StatusCode == http.StatusTooManyRequests ||
				(rq.idempotent && (resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout))
			if !retry || attempt > s.opts.MaxRetries {
				return nil, apiErr
			}
			wait = retryAfter(resp.Header.Get("Retry-After"), time.Now())
			if wait <= 0 {
				wait = backoff(attempt)
			}
		}
		wait = min(wait, s.opts.MaxRetryWait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// attempt makes one request. Its deadline, RequestTimeout, runs until
// the answer's body is closed, unless the caller takes the body over
// (cancelBody.takeOver) and bounds it itself.
func (s *Service) attempt(ctx context.Context, rq request, body []byte) (*http.Response, *cancelBody, error) {
	actx := ctx
	if rq.detach {
		actx = context.WithoutCancel(ctx)
	}
	actx, cancel := context.WithCancel(actx)
	cb := &cancelBody{cancel: cancel}
	cb.timer = time.AfterFunc(s.opts.RequestTimeout, func() {
		cb.timedOut.Store(true)
		cancel()
	})
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, rq.method, rq.url, rd)
	if err != nil {
		cb.release()
		return nil, nil, err
	}
	s.authorize(req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range rq.header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cb.release()
		if cb.timedOut.Load() {
			return nil, nil, fmt.Errorf("no answer within %v", s.opts.RequestTimeout)
		}
		return nil, nil, s.redactErr(err)
	}
	cb.ReadCloser = resp.Body
	resp.Body = cb
	return resp, cb, nil
}

// authorize adds the credentials.
func (s *Service) authorize(h http.Header) {
	h.Set("Authorization", "Bearer "+s.opts.APIKey)
	if s.opts.OrganizationID != "" {
		h.Set("X-Daytona-Organization-ID", s.opts.OrganizationID)
	}
	h.Set("User-Agent", "aml-daytona")
}

// apiError reads an error answer.
func (s *Service) apiError(op string, resp *http.Response, attempts int) *APIError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return &APIError{Op: op, StatusCode: resp.StatusCode, Message: s.redact(errorMessage(data)), Attempts: attempts}
}

// errorMessage takes the message of an error body: the control plane's
// {"message": ...} (a string or a list), the toolbox's {"error": ...} or
// {"message": ...}, else the text itself.
func errorMessage(data []byte) string {
	var v struct {
		Message any    `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(data, &v) == nil {
		switch m := v.Message.(type) {
		case string:
			if m != "" {
				return m
			}
		case []any:
			parts := make([]string, 0, len(m))
			for _, p := range m {
				parts = append(parts, fmt.Sprint(p))
			}
			return strings.Join(parts, "; ")
		}
		if v.Error != "" {
			return v.Error
		}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	return msg
}

// redact removes the API key from text the service or the network sent.
func (s *Service) redact(text string) string {
	if len(s.opts.APIKey) >= 4 {
		text = strings.ReplaceAll(text, s.opts.APIKey, "[redacted]")
	}
	return text
}

// redactErr redacts an error's text (keeping it for errors.Is).
func (s *Service) redactErr(err error) error {
	if err == nil || len(s.opts.APIKey) < 4 || !strings.Contains(err.Error(), s.opts.APIKey) {
		return err
	}
	return &redactedError{msg: s.redact(err.Error()), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now)
	}
	return 0
}

// backoff is the wait before retry n when the service gave none.
func backoff(n int) time.Duration {
	return time.Duration(250<<min(n, 6)) * time.Millisecond
}

// cancelBody is a response body whose request's context ends when it is
// closed, or when the request's deadline passes first.
type cancelBody struct {
	io.ReadCloser
	cancel   context.CancelFunc
	timer    *time.Timer
	timedOut atomic.Bool
}

// Read implements io.Reader, naming a passed deadline.
func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.timedOut.Load() {
		err = fmt.Errorf("%w (the request's deadline passed)", err)
	}
	return n, err
}

// Close implements io.Closer.
func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// release ends the request's context.
func (b *cancelBody) release() {
	b.timer.Stop()
	b.cancel()
}

// takeOver stops the request's deadline: the caller bounds the body's
// reads itself and ends the request with cancel.
func (b *cancelBody) takeOver() bool { return b.timer.Stop() }
