package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// DefaultRequestTimeout bounds how long an operation (one call of the
// service, with its retries) may go without any progress: no response,
// no byte sent or received, for this long across its attempts fails it
// with an error that names the endpoint and the option
// (Options.RequestTimeout, request_timeout_ms). A transfer that keeps
// moving is never cut.
const DefaultRequestTimeout = 60 * time.Second

// DefaultResponseTimeout bounds how long one attempt of a request may
// wait for the first byte of its answer, or a transfer for its next byte,
// before the attempt fails and the request is tried again
// (Options.ResponseTimeout, response_timeout_ms).
const DefaultResponseTimeout = 10 * time.Second

// retryAttempts is how often the SDK tries a request: connection resets,
// timeouts, throttling and 5xx answers, and S3's 409
// ConditionalRequestConflict (which AWS documents as "retry"), are
// tried again with backoff.
const retryAttempts = 5

// httpClient is the HTTP client of an S3 client made from options: each
// connection fails a read or a write that makes no progress for idle,
// and a response whose headers do not come within idle, so a stalled
// service fails the attempt (the SDK then retries it) instead of hanging
// the run; a transfer that keeps moving is never cut. Its transport
// records the progress of each operation (see stallBound).
func httpClient(idle time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: idle, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, idle: idle}, nil
	}
	t.ResponseHeaderTimeout = idle
	t.TLSHandshakeTimeout = idle
	return &http.Client{Transport: progressTransport{t}}
}

// progress is when an operation last made progress (Unix nanoseconds):
// an answer, a byte of one, or a byte of its request's body that no
// earlier attempt had sent (sending the same bytes again is no progress).
type progress struct {
	last atomic.Int64
	// sent is the most of the request's body an attempt sent; answered
	// reports that an attempt got an answer.
	sent     atomic.Int64
	answered atomic.Bool
}

func (p *progress) touch() { p.last.Store(time.Now().UnixNano()) }

// answer records an answer, or a byte of one.
func (p *progress) answer() {
	p.answered.Store(true)
	p.touch()
}

// sending records that an attempt has sent off bytes of the body.
func (p *progress) sending(off int64) {
	for {
		old := p.sent.Load()
		if off <= old {
			return
		}
		if p.sent.CompareAndSwap(old, off) {
			p.touch()
			return
		}
	}
}

// progressKey carries an operation's *progress in its context.
type progressKey struct{}

// progressTransport records, for the operation that a request belongs
// to, each answer and each byte sent or received.
type progressTransport struct{ base http.RoundTripper }

func (t progressTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p, _ := req.Context().Value(progressKey{}).(*progress)
	if p == nil {
		return t.base.RoundTrip(req)
	}
	if req.Body != nil && req.Body != http.NoBody {
		r := req.Clone(req.Context())
		r.Body = &progressBody{ReadCloser: req.Body, p: p, request: true}
		req = r
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		p.answer()
		resp.Body = &progressBody{ReadCloser: resp.Body, p: p}
	}
	return resp, err
}

// progressBody records the progress of the bytes it moves: of a
// request's body (request), or of an answer's.
type progressBody struct {
	io.ReadCloser
	p       *progress
	request bool
	off     int64
}

func (b *progressBody) Read(q []byte) (int, error) {
	n, err := b.ReadCloser.Read(q)
	if n > 0 {
		b.off += int64(n)
		if b.request {
			b.p.sending(b.off)
		} else {
			b.p.answer()
		}
	}
	return n, err
}

// StallError is the failure of an operation of the service that made no
// progress (no answer, no byte moved) for Options.RequestTimeout across
// its attempts.
type StallError struct {
	// Endpoint names the service.
	Endpoint string
	// Operation is the SDK's name of the operation (PutObject, …).
	Operation string
	// Waited is how long the operation went without progress;
	// ResponseTimeout and RequestTimeout are the options that bound it.
	Waited, ResponseTimeout, RequestTimeout time.Duration
	// Err is what the last attempt reported.
	Err error
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%s: the S3 endpoint %s answered nothing and moved no byte for %s, across its retries: it is unreachable, or stalled; check the endpoint and the network (response_timeout_ms = %d bounds each attempt, request_timeout_ms = %d the whole)",
		e.Operation, e.Endpoint, e.Waited.Round(100*time.Millisecond), e.ResponseTimeout.Milliseconds(), e.RequestTimeout.Milliseconds())
}

// Unwrap returns the last attempt's error.
func (e *StallError) Unwrap() error { return e.Err }

// stallBound bounds each operation of a client (its attempts and the
// waits between them) by budget without progress: a watchdog cancels
// the operation once nothing moved for that long, and its error becomes
// a *StallError naming endpoint. The body of an object a GetObject
// returns is read after the operation; its own reads are bounded by the
// connection's idle deadline and resumed (resumingBody).
//
// An operation whose attempts all ran out (response timeout each) before
// the budget, with no progress at all, fails with a *StallError too.
func stallBound(endpoint string, idle, budget time.Duration) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("aml.stallBound", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			p := &progress{}
			p.touch()
			start := p.last.Load()
			ctx, cancel := context.WithCancelCause(context.WithValue(ctx, progressKey{}, p))
			stalled := errors.New("no progress")
			stop := make(chan struct{})
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				tick := time.NewTicker(max(budget/20, time.Millisecond))
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-ctx.Done():
						return
					case <-tick.C:
						if time.Since(time.Unix(0, p.last.Load())) >= budget {
							cancel(stalled)
							return
						}
					}
				}
			}()
			out, md, err := next.HandleInitialize(ctx, in)
			close(stop)
			<-watched
			if err != nil {
				err = credentialsHint(err)
				waited := time.Since(time.Unix(0, start))
				if errors.Is(context.Cause(ctx), stalled) || (!p.answered.Load() && waited >= idle && ctx.Err() == nil) {
					err = &StallError{Endpoint: endpoint, Operation: awsmiddleware.GetOperationName(ctx), Waited: waited,
						ResponseTimeout: idle, RequestTimeout: budget, Err: err}
				}
				cancel(nil)
				return out, md, err
			}
			if g, ok := out.Result.(*s3.GetObjectOutput); ok && g.Body != nil {
				// The body outlives the operation: its context ends
				// when it is closed.
				g.Body = &closeCancels{ReadCloser: g.Body, cancel: func() { cancel(nil) }}
			} else {
				cancel(nil)
			}
			return out, md, err
		}), middleware.Before)
	}
}

// closeCancels cancels a context when the body it wraps is closed.
type closeCancels struct {
	io.ReadCloser
	cancel func()
}

func (c *closeCancels) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// idleConn moves its deadline forward on every read and write: an
// operation fails only after idle without progress in either direction
// (a read that waits for the answer while the request's body is still
// being sent waits as long as the body moves).
type idleConn struct {
	net.Conn
	idle time.Duration
	// wrote is when a write last moved bytes (Unix nanoseconds).
	wrote atomic.Int64
}

func (c *idleConn) Read(p []byte) (int, error) {
	for {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
		n, err := c.Conn.Read(p)
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, c.wrote.Load())) < c.idle {
			continue // the request is still being sent
		}
		return n, err
	}
}

// Write writes p a chunk at a time, each with its own deadline: one
// large write (a whole upload's body) keeps moving for longer than idle.
func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), idleWriteChunk)]
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
		n, err := c.Conn.Write(chunk)
		if n > 0 {
			c.wrote.Store(time.Now().UnixNano())
		}
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// idleWriteChunk is how much of a write goes to the connection under one
// deadline.
const idleWriteChunk = 64 << 10

// retryer is the SDK's standard retryer, with more attempts and S3's
// ConditionalRequestConflict retried too.
func retryer() aws.Retryer {
	return retry.AddWithErrorCodes(retry.AddWithMaxAttempts(retry.NewStandard(), retryAttempts), "ConditionalRequestConflict")
}

// bodyRetries is how often a read of an object's body that breaks off
// (a connection cut, a stall) is resumed from where it stopped.
const bodyRetries = 3

// resumingBody reads an object's body and, when the read breaks off,
// fetches the rest (a range GET from where it stopped, conditional on
// the ETag it started with) instead of failing the whole restore.
type resumingBody struct {
	ctx  context.Context
	l    *lease
	key  string
	etag string
	body io.ReadCloser
	off  int64
	// tries counts the resumptions so far.
	tries int
}

func (r *resumingBody) Read(p []byte) (int, error) {
	for {
		n, err := r.body.Read(p)
		r.off += int64(n)
		if err == nil || err == io.EOF || n > 0 {
			if err != nil && err != io.EOF && n > 0 {
				// Hand over what arrived; the error comes back next time.
				return n, nil
			}
			return n, err
		}
		if r.ctx.Err() != nil || r.tries >= bodyRetries {
			return 0, fmt.Errorf("s3 workspace: reading s3://%s/%s broke off after %d bytes (%d resumptions): %w", r.l.s.bucket, r.key, r.off, r.tries, err)
		}
		r.tries++
		r.body.Close()
		out, gerr := r.l.s.cli.GetObject(r.ctx, &s3.GetObjectInput{Bucket: aws.String(r.l.s.bucket), Key: aws.String(r.key),
			Range: aws.String(fmt.Sprintf("bytes=%d-", r.off)), IfMatch: aws.String(r.etag)})
		if gerr != nil {
			if preconditionFailed(gerr) {
				return 0, fmt.Errorf("s3 workspace: s3://%s/%s changed while it was read (its ETag is no longer %s): %w", r.l.s.bucket, r.key, r.etag, errors.Join(err, gerr))
			}
			return 0, r.l.s.wrap(fmt.Sprintf("resuming the read (at byte %d, after %v) of", r.off, err), r.key, gerr)
		}
		r.body = out.Body
	}
}

func (r *resumingBody) Close() error { return r.body.Close() }

// CredentialsError reports that no AWS credentials were found for the S3
// service: the SDK's own error, which ends in whatever its last source
// said (often the EC2 instance metadata service of a machine that is not
// an EC2 instance), with what to set.
type CredentialsError struct {
	// Err is the SDK's error.
	Err error
}

// Error says what to set, then what the SDK said.
func (e *CredentialsError) Error() string {
	return "s3 workspace: no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or s3_workspace(profile=...)) in the environment of aml, or run where an instance role provides them (" + e.Err.Error() + ")"
}

// Unwrap returns the SDK's error.
func (e *CredentialsError) Unwrap() error { return e.Err }

// credentialsHint wraps an operation's error in a *CredentialsError when
// the SDK found no credentials to sign it with.
func credentialsHint(err error) error {
	var ce *CredentialsError
	if errors.As(err, &ce) || !strings.Contains(err.Error(), "get identity: get credentials:") {
		return err
	}
	return &CredentialsError{Err: err}
}
