package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
)

// ErrUntrusted is wrapped by the error of an acquisition refused because
// the service ignores the conditional writes the protocol relies on.
var ErrUntrusted = errors.New("the S3 service does not honour conditional writes")

// trusted caches, for the life of the process, what the first use of a
// service and bucket found out: key is the endpoint (or the client) and
// the bucket. Only definite answers are kept; a probe that could not run
// (the network) is tried again by the next acquisition.
var trusted sync.Map // string, or clientKey -> *trust

// clientKey names a client the caller gave (Options.Client) and the
// bucket. The client is held weakly: a client made later at the address
// of a collected one is another key, so it never inherits what the
// first one's service was found to do; the entry goes with the client.
type clientKey struct {
	client weak.Pointer[s3.Client]
	bucket string
}

type trust struct {
	mu   sync.Mutex
	done bool
	err  error // nil: the service honours the conditions
}

// checkConditions makes sure, once per process for each service and
// bucket, that the service honours the conditional writes the workspace
// protocol relies on, before anything is written to it: a create with
// If-None-Match: * of a scratch key below the prefix, the same create
// again (which must fail), and a replace with If-Match of a wrong ETag
// (which must fail). Three small requests and a delete. With
// Options.AcceptLostUpdates nothing is checked.
func (s *Storage) checkConditions(ctx context.Context) error {
	if s.acceptLostUpdates {
		return nil
	}
	v, _ := trusted.LoadOrStore(s.trustKey, &trust{})
	t := v.(*trust)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return t.err
	}
	ignored, err := s.probeConditions(ctx)
	switch {
	case err != nil:
		return err // not a definite answer: asked again next time
	case ignored != "":
		t.done, t.err = true, fmt.Errorf("s3 workspace: the service serving bucket %q does not honour conditional writes (%s): the workspace protocol needs them, and without them a stale writer's save or two writers' saves silently lose updates; run `aml workspace verify s3://%s/%s` for the details, and use a service that honours them (AWS S3, SeaweedFS, MinIO, Cloudflare R2), or set accept_lost_updates = True on s3_workspace() (Go: s3.Options.AcceptLostUpdates) to use it anyway: %w", s.bucket, ignored, s.bucket, s.prefix, ErrUntrusted)
	default:
		t.done = true
	}
	return t.err
}

// probeConditions runs the probe on a scratch key and returns what the
// service ignored ("" for nothing), or why the probe could not run.
func (s *Storage) probeConditions(ctx context.Context) (ignored string, err error) {
	key := s.prefix + "/.aml-probe-" + uuid.NewString()
	put := func(mutate func(*s3.PutObjectInput)) error {
		in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("probe")), ContentLength: aws.Int64(5)}
		mutate(in)
		_, err := s.cli.PutObject(ctx, in)
		return err
	}
	if err := put(func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); err != nil {
		return "", s.wrap("checking that the service honours conditional writes (a create with If-None-Match: * of", key, err)
	}
	defer s.cli.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	switch err := put(func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); {
	case err == nil:
		return "a create with If-None-Match: * of an existing key succeeded", nil
	case !preconditionFailed(err):
		return "", s.wrap("checking that the service honours conditional writes (a second create with If-None-Match: * of", key, err)
	}
	switch err := put(func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"00000000000000000000000000000000"`) }); {
	case err == nil:
		return "a replace with If-Match of a wrong ETag succeeded", nil
	case !preconditionFailed(err):
		return "", s.wrap("checking that the service honours conditional writes (a replace with If-Match of", key, err)
	}
	return "", nil
}
