// Package s3 implements the "s3" workspace provider: durable workspace
// revisions in an S3 bucket (AWS S3 or any S3-compatible service that
// honours conditional writes), through aws-sdk-go-v2, over the persistent
// revision layer that the filesystem workspace uses (persist).
//
// # Layout
//
// A workspace id is one encoded segment (persist.EncodeSegment) below the
// prefix: <prefix>/<id>/lock.json is the writer lock, workspace.json the
// index and revisions/... the revisions, as the filesystem workspace lays
// them out in a directory.
//
// # Lock and publication
//
// The writer lock is created with If-None-Match: *, refreshed every five
// minutes with If-Match against its last ETag, and taken over by another
// writer once it has not been refreshed for twenty minutes (If-Match
// against the stale lock's ETag, so two writers cannot both take it).
// Revisions are uploaded create-if-absent and the index is published with
// If-Match against the ETag read at acquisition: a writer that lost its
// lock, or a stale one without a lock, fails to publish (the error says to
// reload) and nothing half-published becomes current. The lock is not a
// fencing primitive: a writer paused for longer than the stale age can
// still publish once before it notices, if its index ETag still matches.
//
// # Credentials
//
// Credentials come from the standard AWS chain (environment, shared
// configuration and profile, web identity, instance metadata), never from
// the workflow; Go users may pass a client or a configuration instead.
package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/providers/option"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// Name is the provider's name.
const Name = "s3"

// DefaultPrefix is the key prefix of workspaces when Options.Prefix is
// empty.
const DefaultPrefix = "aml/workspaces"

// The lock's timing: refreshed every LockRefresh, stale after LockStale
// without a refresh.
const (
	LockRefresh = 5 * time.Minute
	LockStale   = 20 * time.Minute
)

// ErrLockLost is wrapped by the errors of a lease whose writer lock was
// taken over or removed by another writer.
var ErrLockLost = errors.New("the S3 workspace's writer lock was lost")

// Options configure the provider.
type Options struct {
	// Client is the S3 client; nil makes one from Config, or from the
	// standard AWS chain with Region, Profile, Endpoint and
	// ForcePathStyle.
	Client *s3.Client
	// Config is the AWS configuration to make the client from when Client
	// is nil; nil loads the standard chain.
	Config *aws.Config
	// Bucket is the bucket (required).
	Bucket string
	// Prefix is the key prefix of the workspaces; "" means DefaultPrefix.
	Prefix string
	// Region, Profile, Endpoint and ForcePathStyle adjust the client made
	// from the chain: a region, a shared-configuration profile, the URL of
	// an S3-compatible service and path-style addressing (most of them
	// need it).
	Region, Profile, Endpoint string
	ForcePathStyle            bool
	// StoreOptions are the format of new revisions, the bounds of a
	// revision and the parent of materializations.
	persist.StoreOptions
	// RequestTimeout bounds how long an operation may go without
	// progress (no answer, no byte sent or received) across its
	// attempts before it fails with a *StallError; 0 is
	// DefaultRequestTimeout (60 s). ResponseTimeout bounds how long one
	// attempt waits for the first byte of its answer, or for the next
	// byte of a transfer, before it is tried again; 0 is
	// DefaultResponseTimeout (10 s), and it is at most RequestTimeout.
	// A transfer that keeps moving is never cut. Both apply to clients
	// made from the options, not to Client.
	RequestTimeout, ResponseTimeout time.Duration
	// AcceptLostUpdates skips the check, on first use of a service and
	// bucket, that the service honours the conditional writes the
	// protocol relies on (see checkConditions). On a service that
	// ignores them, a stale writer's save replaces a newer revision
	// without a word, and two writers (lock = False, or after a lost
	// lock) can both publish: set it only for a store one writer uses.
	AcceptLostUpdates bool
}

// New returns the S3 workspace provider. It validates the options and
// loads the AWS configuration; it does not contact the service (a missing
// bucket or bad credentials are reported at acquisition). The provider is
// safe for concurrent use.
func New(opts Options) (eval.WorkspaceProvider, error) {
	if err := CheckOptions(opts); err != nil {
		return nil, err
	}
	st, err := NewStorage(opts)
	if err != nil {
		return nil, err
	}
	return persist.New(st, persist.Options{StoreOptions: opts.StoreOptions}), nil
}

// CheckOptions reports what New refuses in opts before it does anything
// (it loads no configuration and contacts nothing): a malformed name,
// bucket or prefix, an unknown format, a negative bound. aml check calls
// it on a call's literal arguments.
func CheckOptions(opts Options) error {
	if err := checkStorageOptions(opts); err != nil {
		return err
	}
	if err := opts.StoreOptions.Validate(); err != nil {
		return fmt.Errorf("s3 workspace: %w", err)
	}
	return nil
}

// checkStorageOptions checks the options of the storage.
func checkStorageOptions(opts Options) error {
	for _, o := range []struct{ label, v string }{
		{"bucket", opts.Bucket}, {"prefix", opts.Prefix}, {"region", opts.Region}, {"profile", opts.Profile},
		{"endpoint", opts.Endpoint}, {"temporary directory", opts.TemporaryDirectory},
	} {
		if err := option.Check("s3 workspace", o.label, o.v, false); err != nil {
			return err
		}
	}
	if err := checkBucket(opts.Bucket); err != nil {
		return err
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := persist.ValidateStoragePath(prefix); err != nil {
		return fmt.Errorf("s3 workspace prefix %q must be relative, with no empty, \".\" or \"..\" segments and no leading or trailing slash", opts.Prefix)
	}
	return nil
}

// Storage is the persist.Storage of the provider. It is safe for
// concurrent use.
type Storage struct {
	cli    *s3.Client
	bucket string
	prefix string
	// now, refresh and stale are the lock's clock (tests shorten them).
	now            func() time.Time
	refresh, stale time.Duration
	// partSize is the multipart part size (PartSize; tests shorten it).
	partSize int64
	// trustKey names the service and bucket for checkConditions (a
	// string, or a clientKey), and acceptLostUpdates is
	// Options.AcceptLostUpdates.
	trustKey          any
	acceptLostUpdates bool
}

// NewStorage validates opts and returns the storage.
func NewStorage(opts Options) (*Storage, error) {
	if err := checkStorageOptions(opts); err != nil {
		return nil, err
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	cli, err := NewClient(opts)
	if err != nil {
		return nil, err
	}
	var trustKey any
	switch {
	case opts.Client != nil:
		k := clientKey{client: weak.Make(opts.Client), bucket: opts.Bucket}
		trustKey = k
		runtime.AddCleanup(opts.Client, func(k clientKey) { trusted.Delete(k) }, k)
	case opts.Endpoint != "":
		trustKey = opts.Endpoint + " " + opts.Bucket
	default:
		trustKey = "aws " + opts.Region + " " + opts.Profile + " " + opts.Bucket
	}
	return &Storage{cli: cli, bucket: opts.Bucket, prefix: prefix, now: time.Now, refresh: LockRefresh, stale: LockStale, partSize: PartSize,
		trustKey: trustKey, acceptLostUpdates: opts.AcceptLostUpdates}, nil
}

// NewClient returns opts.Client, or a client made from opts.Config, or
// from the standard AWS chain with opts.Region, Profile, Endpoint and
// ForcePathStyle. It sends checksums only where S3 requires them, which
// S3-compatible services accept.
func NewClient(opts Options) (*s3.Client, error) {
	cli := opts.Client
	if cli == nil {
		cfg := opts.Config
		if cfg == nil {
			// The SDK logs to stderr by default (a warning when it falls
			// back from IMDSv2, for one): what it has to say reaches the
			// user in the operation's error instead.
			lo := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
			if opts.Region != "" {
				lo = append(lo, config.WithRegion(opts.Region))
			}
			if opts.Profile != "" {
				lo = append(lo, config.WithSharedConfigProfile(opts.Profile))
			}
			c, err := config.LoadDefaultConfig(context.Background(), lo...)
			if err != nil {
				return nil, fmt.Errorf("s3 workspace: loading the AWS configuration: %w", err)
			}
			cfg = &c
		}
		cli = s3.NewFromConfig(*cfg, func(o *s3.Options) {
			if opts.Endpoint != "" {
				o.BaseEndpoint = aws.String(opts.Endpoint)
			}
			o.UsePathStyle = opts.ForcePathStyle
			if o.Region == "" {
				o.Region = "us-east-1"
			}
			// S3-compatible services do not all accept the flexible
			// checksums the SDK sends by default.
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			budget := opts.RequestTimeout
			if budget <= 0 {
				budget = DefaultRequestTimeout
			}
			idle := opts.ResponseTimeout
			if idle <= 0 {
				idle = DefaultResponseTimeout
			}
			idle = min(idle, budget)
			o.HTTPClient = httpClient(idle)
			o.Retryer = retryer()
			endpoint := opts.Endpoint
			if endpoint == "" {
				endpoint = "s3." + o.Region + ".amazonaws.com"
			}
			o.APIOptions = append(o.APIOptions, stallBound(endpoint, idle, budget))
		})
	}
	return cli, nil
}

// checkBucket applies S3's bucket naming rules (3 to 63 lower-case
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit).
func checkBucket(b string) error {
	ok := len(b) >= 3 && len(b) <= 63
	for i := 0; ok && i < len(b); i++ {
		c := b[i]
		ok = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || (c == '.' || c == '-') && i > 0 && i < len(b)-1
	}
	if !ok {
		return fmt.Errorf("s3 workspace bucket %q is not a valid bucket name: 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit", b)
	}
	return nil
}

// Name implements persist.Storage.
func (s *Storage) Name() string { return Name }

var (
	_ persist.Locator = (*Storage)(nil)
	_ persist.Lister  = (*Storage)(nil)
)

// Location implements persist.Locator: the s3:// URL of object path of
// workspace id.
func (s *Storage) Location(id, path string) string {
	seg, err := persist.EncodeSegment(id)
	if err != nil {
		seg = id
	}
	return fmt.Sprintf("s3://%s/%s/%s/%s", s.bucket, s.prefix, seg, path)
}

// Store implements persist.Locator: s3://BUCKET/PREFIX.
func (s *Storage) Store() string { return fmt.Sprintf("s3://%s/%s", s.bucket, s.prefix) }

var _ persist.Unlocker = (*Storage)(nil)

// Unlock implements persist.Unlocker: it removes lock.json (conditionally
// on the ETag it judged) when its holder is a process of this machine
// that is gone, or it was not refreshed for the stale age by the
// service's clock, or with force.
func (s *Storage) Unlock(ctx context.Context, id string, force bool) (string, error) {
	seg, err := persist.EncodeSegment(id)
	if err != nil {
		return "", err
	}
	l := &lease{s: s, id: id, base: s.prefix + "/" + seg + "/"}
	held, err := l.readLock(ctx)
	if err != nil {
		return "", err
	}
	if held == nil {
		return "", fmt.Errorf("s3 workspace %q has no writer lock (%s): %w", id, l.lockKey(), fs.ErrNotExist)
	}
	holder := "an object that holds no lock record"
	if held.ok {
		holder = held.describe()
		dead := procscope.MarkerGone(held.rec.Process)
		if !dead && held.age < s.stale && !force {
			return holder, fmt.Errorf("s3 workspace %q: %s is held by %s, which refreshes it; it was not removed (--force removes it anyway, and the run then fails to save): %w", id, l.lockKey(), holder, persist.ErrLockHeld)
		}
	}
	_, err = s.cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(l.key("lock.json")), IfMatch: aws.String(held.etag)})
	if err != nil && !notFound(err) {
		if preconditionFailed(err) {
			return holder, fmt.Errorf("s3 workspace %q: %s changed while it was judged (a run took it or refreshed it); run the command again", id, l.lockKey())
		}
		return holder, s.wrap("removing the writer lock", l.key("lock.json"), err)
	}
	return holder, nil
}

// Workspaces implements persist.Lister: the ids of the workspaces below
// the prefix (common prefixes whose name is the encoding of an id).
func (s *Storage) Workspaces(ctx context.Context) ([]string, error) {
	var ids []string
	pages := s3.NewListObjectsV2Paginator(s.cli, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + "/"), Delimiter: aws.String("/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("listing the workspaces under", s.prefix+"/", err)
		}
		for _, p := range page.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), s.prefix+"/"), "/")
			id, err := url.PathUnescape(name)
			if err != nil {
				continue
			}
			if seg, err := persist.EncodeSegment(id); err != nil || seg != name {
				continue
			}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// lockRecord is the content of lock.json.
type lockRecord struct {
	Owner      string `json:"owner"`
	Evaluation string `json:"evaluationId,omitempty"`
	// Process is the holder's owner mark (procscope.Marker): its pid and
	// machine, so that a process of the same machine can tell it is gone.
	Process string `json:"process,omitempty"`
	// Host and PID name the holder for people.
	Host        string    `json:"host,omitempty"`
	PID         int       `json:"pid,omitempty"`
	AcquiredAt  time.Time `json:"acquiredAt"`
	RefreshedAt time.Time `json:"refreshedAt"`
}

// heldLock is a lock.json read back: its record, its ETag, and how long
// ago it was last written by the service's clock.
type heldLock struct {
	rec  lockRecord
	etag string
	age  time.Duration
	// ok is set when the content is a lock record.
	ok bool
}

// describe names the holder for messages.
func (h *heldLock) describe() string {
	r := h.rec
	var b strings.Builder
	b.WriteString("run ")
	if r.Evaluation != "" {
		b.WriteString(r.Evaluation)
	} else {
		b.WriteString("(unknown)")
	}
	if r.Host != "" {
		fmt.Fprintf(&b, " on host %s", r.Host)
	}
	if r.PID > 0 {
		fmt.Fprintf(&b, " (pid %d)", r.PID)
	}
	if !r.AcquiredAt.IsZero() {
		fmt.Fprintf(&b, ", held since %s", r.AcquiredAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, ", last refreshed %s ago by the service's clock", h.age.Round(time.Second))
	return b.String()
}

// lockReadTries is how often a lock.json that reads back empty or
// unparseable is read again before it is judged: a service under load
// can answer a read of an object being replaced with nothing.
const lockReadTries = 4

// readLock reads lock.json, retrying a read that comes back without a
// record. A missing lock is (nil, nil).
func (l *lease) readLock(ctx context.Context) (*heldLock, error) {
	var last *heldLock
	for try := 0; try < lockReadTries; try++ {
		if try > 0 {
			select {
			case <-time.After(time.Duration(try) * 100 * time.Millisecond):
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		get, err := l.s.cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key("lock.json"))})
		if err != nil {
			if notFound(err) {
				return nil, nil
			}
			return nil, l.s.wrap("reading the writer lock", "lock.json", err)
		}
		data, rerr := io.ReadAll(io.LimitReader(get.Body, 1<<16))
		get.Body.Close()
		h := &heldLock{etag: aws.ToString(get.ETag), age: l.s.serviceAge(get.ResultMetadata, aws.ToTime(get.LastModified))}
		if rerr == nil && json.Unmarshal(data, &h.rec) == nil && !h.rec.RefreshedAt.IsZero() {
			h.ok = true
			return h, nil
		}
		last = h
	}
	return last, nil
}

// serviceAge is how long ago lastModified was by the service's clock:
// the response's Date header, else this machine's clock (Storage.now,
// which tests move).
func (s *Storage) serviceAge(md middleware.Metadata, lastModified time.Time) time.Duration {
	if lastModified.IsZero() {
		return 0
	}
	now := time.Now()
	if raw, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && raw != nil {
		if d, err := http.ParseTime(raw.Header.Get("Date")); err == nil {
			now = d
		}
	}
	// Tests move Storage.now; in a run it is time.Now and adds nothing.
	now = now.Add(time.Until(s.now()))
	return now.Sub(lastModified)
}

// lockKey is the full s3:// URL of the workspace's lock, for messages.
func (l *lease) lockKey() string { return fmt.Sprintf("s3://%s/%s", l.s.bucket, l.key("lock.json")) }

// unlockHint says how to remove a lock no run holds.
func (l *lease) unlockHint() string {
	return fmt.Sprintf("if no run holds it (a run killed on another machine), remove it with `aml workspace unlock %s %s`", l.s.Store(), l.id)
}

// Acquire implements persist.Storage: the namespace of req.ID, with the
// writer lock when req.Lock.
func (s *Storage) Acquire(ctx context.Context, req persist.StorageAcquireRequest) (persist.StorageLease, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	seg, err := persist.EncodeSegment(req.ID)
	if err != nil {
		return nil, err
	}
	if err := s.checkConditions(ctx); err != nil {
		return nil, err
	}
	l := &lease{s: s, id: req.ID, base: s.prefix + "/" + seg + "/", token: uuid.NewString(), done: make(chan struct{}), evaluation: req.EvaluationID, acquired: s.now().UTC()}
	if req.Lock {
		if err := l.lock(ctx, req.EvaluationID); err != nil {
			return nil, err
		}
		l.locked = true
		l.stopped.Add(1)
		go l.heartbeat()
	} else if err := s.probe(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// probe checks that the bucket is reachable.
func (s *Storage) probe(ctx context.Context) error {
	_, err := s.cli.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	return s.wrap("checking the bucket", "", err)
}

// lease is one workspace namespace.
type lease struct {
	s     *Storage
	id    string
	base  string // key prefix of the namespace, ending in "/"
	token string
	// evaluation and acquired are recorded in the lock.
	evaluation string
	acquired   time.Time

	mu       sync.Mutex
	locked   bool
	lockETag string
	lost     error
	released bool
	done     chan struct{}
	stopped  sync.WaitGroup
}

func (l *lease) key(p string) string { return l.base + p }

// lock takes the writer lock: created if absent, or taken over from a
// holder that stopped refreshing it.
func (l *lease) lock(ctx context.Context, evaluation string) error {
	now := l.s.now().UTC()
	rec := lockRecord{Owner: l.token, Evaluation: evaluation, Process: procscope.Marker(), Host: procscope.Hostname(), PID: os.Getpid(), AcquiredAt: now, RefreshedAt: now}
	body, _ := json.Marshal(rec)
	out, err := l.s.cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key("lock.json")),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*")})
	if err == nil {
		l.lockETag = aws.ToString(out.ETag)
		return nil
	}
	if !preconditionFailed(err) {
		return l.s.wrap("creating the writer lock", "lock.json", err)
	}
	// Held: take it over when its holder is provably gone (a process of
	// this machine that no longer exists) or when it went stale by the
	// service's clock.
	held, err := l.readLock(ctx)
	if err != nil {
		return err
	}
	if held == nil { // released meanwhile: try once more
		return l.lock(ctx, evaluation)
	}
	if !held.ok {
		return &eval.WorkspaceConflictError{WorkspaceID: l.id, Err: fmt.Errorf("%s is not a lock aml wrote (it holds no lock record); %s", l.lockKey(), l.unlockHint())}
	}
	dead := procscope.MarkerGone(held.rec.Process)
	if !dead && held.age < l.s.stale {
		return &eval.WorkspaceConflictError{WorkspaceID: l.id, Err: fmt.Errorf("%s is held by %s; a lock is taken over after %s without a refresh, or at once by a process of the holder's machine once the holder is gone; %s", l.lockKey(), held.describe(), l.s.stale, l.unlockHint())}
	}
	out, err = l.s.cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key("lock.json")),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"), IfMatch: aws.String(held.etag)})
	if err != nil {
		if preconditionFailed(err) {
			return &eval.WorkspaceConflictError{WorkspaceID: l.id, Err: errors.New("another writer took the stale lock over first")}
		}
		return l.s.wrap("taking the stale writer lock over", "lock.json", err)
	}
	l.lockETag = aws.ToString(out.ETag)
	return nil
}

// heartbeat refreshes the lock until release; a refresh refused by the
// service means the lock was lost.
func (l *lease) heartbeat() {
	defer l.stopped.Done()
	t := time.NewTicker(l.s.refresh)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			if err := l.refresh(context.Background()); err != nil {
				l.mu.Lock()
				if errors.Is(err, ErrLockLost) {
					l.lost = err
				}
				l.mu.Unlock()
				if errors.Is(err, ErrLockLost) {
					return
				}
			}
		}
	}
}

func (l *lease) refresh(ctx context.Context) error {
	l.mu.Lock()
	etag := l.lockETag
	l.mu.Unlock()
	now := l.s.now().UTC()
	body, _ := json.Marshal(lockRecord{Owner: l.token, Evaluation: l.evaluation, Process: procscope.Marker(), Host: procscope.Hostname(), PID: os.Getpid(), AcquiredAt: l.acquired, RefreshedAt: now})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := l.s.cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key("lock.json")),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"), IfMatch: aws.String(etag)})
	if err != nil {
		if preconditionFailed(err) || notFound(err) {
			return fmt.Errorf("refreshing the lock of workspace %q: %w", l.id, ErrLockLost)
		}
		return l.s.wrap("refreshing the writer lock", "lock.json", err)
	}
	l.mu.Lock()
	l.lockETag = aws.ToString(out.ETag)
	l.mu.Unlock()
	return nil
}

// CheckLock implements persist.LockChecker: the lock is still this
// lease's.
func (l *lease) CheckLock(ctx context.Context) error {
	l.mu.Lock()
	locked, lost := l.locked, l.lost
	l.mu.Unlock()
	if !locked {
		return nil
	}
	if lost != nil {
		return lost
	}
	held, err := l.readLock(ctx)
	switch {
	case err != nil:
		return err
	case held == nil:
		return l.loseLock(fmt.Errorf("%s is gone", l.lockKey()))
	case !held.ok:
		return fmt.Errorf("s3 workspace %q: %s reads back without a lock record %d times in a row: cannot tell whether this run still holds it", l.id, l.lockKey(), lockReadTries)
	case held.rec.Owner != l.token:
		return l.loseLock(fmt.Errorf("%s is now held by %s", l.lockKey(), held.describe()))
	}
	return nil
}

func (l *lease) loseLock(why error) error {
	err := fmt.Errorf("workspace %q: %v: %w", l.id, why, ErrLockLost)
	l.mu.Lock()
	l.lost = err
	l.mu.Unlock()
	return err
}

func (l *lease) usable(ctx context.Context, mutating bool) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("s3 workspace %q: used after release", l.id)
	}
	if mutating && l.lost != nil {
		return l.lost
	}
	return nil
}

// Read implements persist.StorageLease.
func (l *lease) Read(ctx context.Context, p string) (io.ReadCloser, persist.Version, error) {
	if err := persist.ValidateStoragePath(p); err != nil {
		return nil, "", err
	}
	if err := l.usable(ctx, false); err != nil {
		return nil, "", err
	}
	out, err := l.s.cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key(p))})
	if err != nil {
		return nil, "", l.s.wrap("reading", l.key(p), err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		out.Body.Close()
		return nil, "", fmt.Errorf("s3 workspace: s3://%s/%s came without an ETag, which the publication protocol needs: the service is not compatible enough", l.s.bucket, l.key(p))
	}
	return &resumingBody{ctx: ctx, l: l, key: l.key(p), etag: etag, body: out.Body}, persist.Version(etag), nil
}

// Write implements persist.StorageLease with S3's conditional PUT.
func (l *lease) Write(ctx context.Context, p string, body io.Reader, opts persist.WriteOptions) (persist.Version, error) {
	if err := persist.ValidateStoragePath(p); err != nil {
		return "", err
	}
	if err := l.usable(ctx, true); err != nil {
		return "", err
	}
	in := &s3.PutObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key(p))}
	if opts.ContentType != "" {
		in.ContentType = aws.String(opts.ContentType)
	}
	switch opts.Condition.Kind() {
	case persist.ConditionAbsent:
		in.IfNoneMatch = aws.String("*")
	case persist.ConditionVersion:
		in.IfMatch = aws.String(string(opts.Condition.Version()))
	}
	if opts.Condition.Kind() != persist.ConditionVersion {
		// A body larger than one part goes up in parts, streamed: at most
		// one part is in memory. (The index, the one object replaced by
		// version, is small.)
		head, err := io.ReadAll(io.LimitReader(body, l.s.partSize+1))
		if err != nil {
			return "", err
		}
		if int64(len(head)) > l.s.partSize {
			return l.multipart(ctx, p, io.MultiReader(bytes.NewReader(head), body), opts)
		}
		body = bytes.NewReader(head)
		if opts.ContentLength >= 0 && opts.ContentLength != int64(len(head)) {
			return "", fmt.Errorf("s3 workspace: writing s3://%s/%s: the body has %d bytes, its content length is %d", l.s.bucket, l.key(p), len(head), opts.ContentLength)
		}
		opts.ContentLength = int64(len(head))
	}
	seekable, size, cleanup, err := rewindable(body, opts.ContentLength)
	if err != nil {
		return "", fmt.Errorf("s3 workspace: writing s3://%s/%s: %w", l.s.bucket, l.key(p), err)
	}
	defer cleanup()
	in.Body, in.ContentLength = seekable, aws.Int64(size)
	out, err := l.s.cli.PutObject(ctx, in)
	if err != nil {
		if preconditionFailed(err) {
			return "", fmt.Errorf("s3 workspace: writing s3://%s/%s: the object changed since it was read (%s): another writer published first; reload the workspace: %w", l.s.bucket, l.key(p), opts.Condition, persist.ErrPreconditionFailed)
		}
		return "", l.s.wrap("writing", l.key(p), err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return "", fmt.Errorf("s3 workspace: writing s3://%s/%s returned no ETag, which the publication protocol needs", l.s.bucket, l.key(p))
	}
	return persist.Version(etag), nil
}

// PartSize is the size of the parts of a multipart upload (S3 wants at
// least 5 MiB): a Write of a larger body uploads it in parts.
const PartSize = 16 << 20

// multipart uploads body in parts of the storage's part size, created
// only if absent when the condition says so (CompleteMultipartUpload with
// If-None-Match: *); a failure aborts the upload.
func (l *lease) multipart(ctx context.Context, p string, body io.Reader, opts persist.WriteOptions) (persist.Version, error) {
	key := l.key(p)
	create := &s3.CreateMultipartUploadInput{Bucket: aws.String(l.s.bucket), Key: aws.String(key)}
	if opts.ContentType != "" {
		create.ContentType = aws.String(opts.ContentType)
	}
	up, err := l.s.cli.CreateMultipartUpload(ctx, create)
	if err != nil {
		return "", l.s.wrap("starting a multipart upload of", key, err)
	}
	abort := func(cause error) (persist.Version, error) {
		_, _ = l.s.cli.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: aws.String(l.s.bucket), Key: aws.String(key), UploadId: up.UploadId})
		return "", cause
	}
	buf := make([]byte, l.s.partSize)
	var parts []types.CompletedPart
	var total int64
	for n := int32(1); ; n++ {
		k, rerr := io.ReadFull(body, buf)
		if k > 0 {
			part, err := l.s.cli.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(l.s.bucket), Key: aws.String(key), UploadId: up.UploadId,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(buf[:k]), ContentLength: aws.Int64(int64(k))})
			if err != nil {
				return abort(l.s.wrap(fmt.Sprintf("uploading part %d of", n), key, err))
			}
			parts = append(parts, types.CompletedPart{ETag: part.ETag, PartNumber: aws.Int32(n)})
			total += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return abort(fmt.Errorf("s3 workspace: reading the body of s3://%s/%s: %w", l.s.bucket, key, rerr))
		}
	}
	if opts.ContentLength >= 0 && total != opts.ContentLength {
		return abort(fmt.Errorf("s3 workspace: writing s3://%s/%s: the body has %d bytes, its content length is %d", l.s.bucket, key, total, opts.ContentLength))
	}
	complete := &s3.CompleteMultipartUploadInput{Bucket: aws.String(l.s.bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}
	if opts.Condition.Kind() == persist.ConditionAbsent {
		complete.IfNoneMatch = aws.String("*")
	}
	out, err := l.s.cli.CompleteMultipartUpload(ctx, complete)
	if err != nil {
		if preconditionFailed(err) {
			return abort(fmt.Errorf("s3 workspace: writing s3://%s/%s: it exists: %w", l.s.bucket, key, persist.ErrPreconditionFailed))
		}
		return abort(l.s.wrap("completing the multipart upload of", key, err))
	}
	etag := aws.ToString(out.ETag)
	// The version is the ETag reads report (some services give a
	// completed upload another one than its GET does).
	if head, err := l.s.cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(key)}); err == nil && aws.ToString(head.ETag) != "" {
		etag = aws.ToString(head.ETag)
	}
	if etag == "" {
		return "", fmt.Errorf("s3 workspace: writing s3://%s/%s returned no ETag, which the publication protocol needs", l.s.bucket, key)
	}
	return persist.Version(etag), nil
}

// memoryBody is the largest body a Write keeps in memory to sign it;
// larger ones that cannot seek are spooled to a temporary file.
const memoryBody = 8 << 20

// rewindable returns body as a seekable reader of known size, which
// request signing needs: as it is when it seeks, in memory when small,
// else spooled to a temporary file (removed by cleanup) so that a large
// archive never sits in memory.
func rewindable(body io.Reader, length int64) (io.ReadSeeker, int64, func(), error) {
	none := func() {}
	if rs, ok := body.(io.ReadSeeker); ok && length >= 0 {
		return rs, length, none, nil
	}
	head, err := io.ReadAll(io.LimitReader(body, memoryBody+1))
	if err != nil {
		return nil, 0, none, err
	}
	if len(head) <= memoryBody {
		if length >= 0 && int64(len(head)) != length {
			return nil, 0, none, fmt.Errorf("the body has %d bytes, its content length is %d", len(head), length)
		}
		return bytes.NewReader(head), int64(len(head)), none, nil
	}
	f, err := os.CreateTemp("", ".aml-s3-upload-*")
	if err != nil {
		return nil, 0, none, err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, io.MultiReader(bytes.NewReader(head), body))
	if err == nil && length >= 0 && n != length {
		err = fmt.Errorf("the body has %d bytes, its content length is %d", n, length)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		cleanup()
		return nil, 0, none, err
	}
	return f, n, cleanup, nil
}

// List implements persist.StorageLease, following ListObjectsV2's
// continuation.
func (l *lease) List(ctx context.Context, prefix string) ([]string, error) {
	infos, err := l.ListInfo(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Path
	}
	return out, nil
}

var _ persist.InfoLister = (*lease)(nil)

// ListInfo implements persist.InfoLister: the listing's sizes and
// Last-Modified times (the service's clock).
func (l *lease) ListInfo(ctx context.Context, prefix string) ([]persist.ObjectInfo, error) {
	if err := persist.ValidateStoragePrefix(prefix); err != nil {
		return nil, err
	}
	if err := l.usable(ctx, false); err != nil {
		return nil, err
	}
	var out []persist.ObjectInfo
	pages := s3.NewListObjectsV2Paginator(l.s.cli, &s3.ListObjectsV2Input{Bucket: aws.String(l.s.bucket), Prefix: aws.String(l.key(prefix))})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, l.s.wrap("listing", l.key(prefix), err)
		}
		for _, o := range page.Contents {
			if k := strings.TrimPrefix(aws.ToString(o.Key), l.base); k != "lock.json" {
				out = append(out, persist.ObjectInfo{Path: k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
			}
		}
	}
	slices.SortFunc(out, func(a, b persist.ObjectInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

var _ persist.Copier = (*lease)(nil)

// Copy implements persist.Copier with a server-side CopyObject, created
// only if dst is absent: the folder format reuses unchanged files without
// sending them again.
func (l *lease) Copy(ctx context.Context, src, dst string) error {
	for _, p := range []string{src, dst} {
		if err := persist.ValidateStoragePath(p); err != nil {
			return err
		}
	}
	if err := l.usable(ctx, true); err != nil {
		return err
	}
	segs := strings.Split(l.s.bucket+"/"+l.key(src), "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	_, err := l.s.cli.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key(dst)),
		CopySource: aws.String(strings.Join(segs, "/")), IfNoneMatch: aws.String("*")})
	if err != nil {
		if preconditionFailed(err) {
			return fmt.Errorf("s3 workspace: copying to s3://%s/%s: it exists: %w", l.s.bucket, l.key(dst), persist.ErrPreconditionFailed)
		}
		return l.s.wrap("copying "+l.key(src)+" to", l.key(dst), err)
	}
	return nil
}

var _ persist.UploadSweeper = (*lease)(nil)

// SweepUploads implements persist.UploadSweeper: it aborts the
// incomplete multipart uploads under the workspace's revisions whose
// revision live does not claim, which a killed save left (they are
// invisible to listings, and kept, and billed, until aborted).
func (l *lease) SweepUploads(ctx context.Context, live func(revisionID string) bool) (persist.Sweep, error) {
	var sw persist.Sweep
	if err := l.usable(ctx, true); err != nil {
		return sw, err
	}
	prefix := l.key("revisions/")
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(l.s.bucket), Prefix: aws.String(prefix)}
	for {
		out, err := l.s.cli.ListMultipartUploads(ctx, in)
		if err != nil {
			if noSuchUpload(err) {
				return sw, nil // some services say so when there is none
			}
			return sw, l.s.wrap("listing the incomplete uploads under", prefix, err)
		}
		for _, u := range out.Uploads {
			rel := strings.TrimPrefix(aws.ToString(u.Key), l.base)
			revID := strings.TrimSuffix(strings.TrimPrefix(rel, "revisions/"), ".tar.gz")
			if i := strings.IndexByte(revID, '/'); i >= 0 {
				revID = revID[:i]
			}
			if live(revID) {
				continue
			}
			_, err := l.s.cli.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(l.s.bucket), Key: u.Key, UploadId: u.UploadId})
			if err != nil && !notFound(err) {
				return sw, l.s.wrap("aborting the incomplete upload "+aws.ToString(u.UploadId)+" of", aws.ToString(u.Key), err)
			}
			sw.Removed = append(sw.Removed, "incomplete upload of "+rel)
		}
		if !aws.ToBool(out.IsTruncated) {
			return sw, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// Delete implements persist.StorageLease.
func (l *lease) Delete(ctx context.Context, paths []string) error {
	if err := l.usable(ctx, true); err != nil {
		return err
	}
	for _, p := range paths {
		if err := persist.ValidateStoragePath(p); err != nil {
			return err
		}
		_, err := l.s.cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key(p))})
		if err != nil && !notFound(err) {
			return l.s.wrap("deleting", l.key(p), err)
		}
	}
	return nil
}

// Release implements persist.StorageLease: it stops the refreshes and
// removes the lock when it is still this lease's. It is idempotent.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	locked, lost := l.locked, l.lost
	close(l.done)
	l.mu.Unlock()
	l.stopped.Wait()
	if !locked {
		return nil
	}
	if lost != nil {
		return lost
	}
	if err := l.CheckLockReleased(ctx); err != nil {
		return err
	}
	_, err := l.s.cli.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key("lock.json")), IfMatch: aws.String(l.lockETag)})
	if err != nil && !notFound(err) && !preconditionFailed(err) {
		return l.s.wrap("removing the writer lock", "lock.json", err)
	}
	return nil
}

// CheckLockReleased reports a lock lost before release (the lease is
// released, so CheckLock would refuse).
func (l *lease) CheckLockReleased(ctx context.Context) error {
	held, err := l.readLock(context.WithoutCancel(ctx))
	switch {
	case err != nil:
		return nil // cannot tell: the conditional delete decides
	case held == nil:
		return fmt.Errorf("workspace %q: %s was gone at release: %w", l.id, l.lockKey(), ErrLockLost)
	case held.ok && held.rec.Owner != l.token:
		return fmt.Errorf("workspace %q: %s was held by %s at release: %w", l.id, l.lockKey(), held.describe(), ErrLockLost)
	}
	return nil
}

// status returns the HTTP status of an SDK error, or 0.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func preconditionFailed(err error) bool { return status(err) == http.StatusPreconditionFailed }

func notFound(err error) bool {
	if noBucket(err) {
		return false
	}
	var nsk *types.NoSuchKey
	return errors.As(err, &nsk) || status(err) == http.StatusNotFound
}

// noSuchUpload reports S3's NoSuchUpload error.
func noSuchUpload(err error) bool {
	var nsu *types.NoSuchUpload
	var api smithy.APIError
	return errors.As(err, &nsu) || errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload"
}

func noBucket(err error) bool {
	var nsb *types.NoSuchBucket
	var api smithy.APIError
	return errors.As(err, &nsb) || errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket"
}

// wrap names an S3 failure: a missing object (persist.ErrNotExist), a
// missing bucket, access denied, throttling (after the SDK's retries), an
// endpoint that does not answer.
func (s *Storage) wrap(what, key string, err error) error {
	if err == nil {
		return nil
	}
	loc := fmt.Sprintf("s3://%s/%s", s.bucket, key)
	switch code := status(err); {
	case noBucket(err) || code == http.StatusNotFound && key == "":
		return fmt.Errorf("s3 workspace: %s: the bucket %q does not exist (or this endpoint does not serve it): %w", what, s.bucket, err)
	case notFound(err):
		return fmt.Errorf("s3 workspace: %s %s: %w (%v)", what, loc, persist.ErrNotExist, err)
	case code == http.StatusForbidden:
		return fmt.Errorf("s3 workspace: %s %s: access denied: check the credentials and that the policy allows s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the prefix: %w", what, loc, err)
	case code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests:
		return fmt.Errorf("s3 workspace: %s %s: the service is throttling (after the SDK's retries): %w", what, loc, err)
	case code == 0 && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		if ue := new(os.SyscallError); errors.As(err, &ue) || strings.Contains(err.Error(), "connect") {
			return fmt.Errorf("s3 workspace: %s %s: the endpoint does not answer (check endpoint= and the network): %w", what, loc, err)
		}
	}
	return fmt.Errorf("s3 workspace: %s %s: %w", what, loc, err)
}
