package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DefaultRequestTimeout bounds how long a request may go without any
// progress: no response, or no byte sent or received, for this long
// fails it (Options.RequestTimeout). A transfer that keeps moving is
// never cut.
const DefaultRequestTimeout = 60 * time.Second

// retryAttempts is how often the SDK tries a request: connection resets,
// timeouts, throttling and 5xx answers, and S3's 409
// ConditionalRequestConflict (which AWS documents as "retry"), are
// tried again with backoff.
const retryAttempts = 5

// httpClient is the HTTP client of an S3 client made from options: each
// connection fails a read or a write that makes no progress for idle,
// and a response whose headers do not come within idle, so a stalled
// service fails the request (the SDK then retries it) instead of hanging
// the run; a transfer that keeps moving is never cut.
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
	return &http.Client{Transport: t}
}

// idleConn moves its deadline forward on every read and write: an
// operation fails only after idle without progress.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

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
