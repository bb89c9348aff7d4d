// Package modal is the client of Modal's sandbox service for the remote
// sandbox provider (providers/sandbox/remote): it implements
// remote.Service and remote.Machine over Modal's official Go SDK
// (github.com/modal-labs/modal-client/go, v0.11.1).
//
// A sandbox is made as the original AML's modalSandbox() makes it: the
// app AppName is looked up (and created when missing), the registry image
// Image is resolved with Images.FromRegistry and built, and
// Sandboxes.Create makes the sandbox with Create's parameters, the
// request's labels carried as Modal tags (by which List finds
// sandboxes). Destroy terminates. The SDK picks the sandbox backend (V2
// by default; MODAL_SANDBOX_V2=false or sandbox_v2 = false in
// ~/.modal.toml selects the first one); both are served.
//
// Processes are Sandbox.Exec with the literal argv, the working
// directory, the environment and Modal's own exec timeout (whole
// seconds, rounded up); stdout and stderr stream separately, stdin is
// written as the caller writes it (or closed at once when the command
// takes none). Modal offers no way to signal one exec, so the argv runs
// under a small /bin/sh wrapper that says its process id on stderr's
// first line (taken off before the caller reads) and then becomes the
// argv (exec "$@", nothing re-interpreted); Kill runs kill -KILL on its
// process group (or the process) in the sandbox, and terminates the whole
// sandbox when that cannot be done, as the remote.Process contract
// allows.
//
// Files: Upload uses the SDK's filesystem API (Filesystem.CopyFromLocal,
// which streams a file in 256 KiB chunks over one resumable stream); the
// API takes a local file, so the data is spooled to a private temporary
// file first (disk, never memory). Download streams the file through
// Exec (dd, in segments of 8 MiB): the filesystem API has no streaming
// read (ReadBytes holds the whole file in memory, and CopyToLocal writes
// a local file only after the whole remote read finished, under the
// tool's size limit), and the core reads a bounded prefix of files that
// may be huge. The segments bound memory: the SDK's connection to a
// sandbox lets Modal send up to 64 MiB ahead of a slow reader. Closing a
// download early kills its segment. The image therefore needs /bin/sh
// and dd besides AML's tar, mkdir and rm.
//
// Errors say their cause: refused or missing credentials
// (ErrUnauthorized), rate limits (ErrRateLimited; Modal's retry hints are
// honoured by the SDK for at most MaxThrottleWait), an image that fails to
// build (ErrBuildFailed), a sandbox that ended under a command, for
// example terminated from outside (ErrSandboxGone), and an API that
// cannot be reached or does not answer in time (ErrUnavailable; every
// call is bounded by RequestTimeout or CreateTimeout). Secrets are never
// printed.
package modal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aml-go/aml/providers/option"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// DefaultImage is the registry image of a sandbox when Options.Image is
// empty.
const DefaultImage = "wearesingular/aml-agent-sandbox:latest"

// DefaultAppName is the Modal app sandboxes belong to when
// Options.AppName is empty.
const DefaultAppName = "aml"

// DefaultSandboxTimeout is a sandbox's lifetime when Create.Timeout is
// zero. Modal's own default, five minutes, is shorter than many agent
// runs; the provider terminates its sandboxes on release in any case.
const DefaultSandboxTimeout = time.Hour

// CreateTag is the tag whose value is unique to one Create call: when a
// creation's outcome is unknown (it was cancelled and the service did not
// answer in time, or the request failed in the network), the sandbox it
// may have made is found by it and terminated.
const CreateTag = "aml.modal.create"

// Errors the causes wrap, for errors.Is.
var (
	// ErrUnauthorized: Modal refused the credentials, or none were found.
	ErrUnauthorized = errors.New("modal refused the credentials")
	// ErrRateLimited: Modal kept rate limiting after the bounded wait.
	ErrRateLimited = errors.New("rate limited by modal")
	// ErrBuildFailed: the sandbox's image failed to build.
	ErrBuildFailed = errors.New("modal image failed to build")
	// ErrSandboxGone: the sandbox ended (terminated from outside, or at
	// its lifetime limit) or was destroyed.
	ErrSandboxGone = errors.New("modal sandbox no longer runs")
	// ErrUnavailable: the Modal API could not be reached or did not
	// answer in time.
	ErrUnavailable = errors.New("modal API unavailable")
)

// Options configures a Service. The zero value of a field means its
// default.
type Options struct {
	// Client is an initialized SDK client to use, with its own
	// credentials, environment and throttle bound; the caller closes it.
	// Mutually exclusive with TokenID, TokenSecret, Environment and
	// MaxThrottleWait.
	Client *sdk.Client
	// TokenID and TokenSecret authenticate the client the Service makes;
	// by default the SDK reads MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, else
	// the active profile of ~/.modal.toml (MODAL_CONFIG_PATH names
	// another file, MODAL_PROFILE another profile). Never printed.
	TokenID, TokenSecret string
	// Environment is the Modal environment; default MODAL_ENVIRONMENT,
	// the profile's, else the workspace's default environment.
	Environment string
	// AppName is the app sandboxes are made in (created when missing);
	// default DefaultAppName.
	AppName string
	// Image is the registry image reference of sandboxes, resolved with
	// Images.FromRegistry; default DefaultImage. It must hold /bin/sh
	// (and, for AML's transfers and downloads, tar, mkdir, rm and dd).
	Image string
	// Create holds the SDK's native sandbox parameters (CPU, memory,
	// GPU, regions, network, secrets, volumes, ...). Its Tags are added
	// to the request's labels (a label wins over a tag of the same name);
	// a zero Timeout means DefaultSandboxTimeout. Its Workdir, when set,
	// is the directory relative guest paths resolve against ("/" when
	// not).
	Create sdk.SandboxCreateParams
	// CreateTimeout bounds a sandbox's creation, from the app lookup and
	// the image's build until the sandbox is scheduled; default ten
	// minutes.
	CreateTimeout time.Duration
	// RequestTimeout bounds every other call until its answer (listing,
	// termination, starting a command, killing one); default 60 seconds.
	RequestTimeout time.Duration
	// MaxThrottleWait bounds how long the SDK waits out Modal's rate
	// limiting, following its retry hints, before a call fails with
	// ErrRateLimited; default MODAL_MAX_THROTTLE_WAIT (seconds) when set,
	// else 60 seconds; negative gives up at the first rate limit.
	MaxThrottleWait time.Duration
}

// Service is the Modal client: it implements remote.Service. It is safe
// for concurrent use.
type Service struct {
	opts   Options
	client *sdk.Client
	owned  bool
	// throttleWait describes the throttle bound for errors.
	throttleWait string
	workdir      string

	// base is cancelled by Close: it ends the watchers of machines.
	base context.Context
	stop context.CancelFunc

	// lookup serializes the app's lookup and the image's build; app and
	// image are kept once they succeeded.
	lookup chan struct{}
	mu     sync.Mutex
	app    *sdk.App
	image  *sdk.Image
}

var _ remote.Service = (*Service)(nil)

// New validates opts and returns a Service; it makes the SDK client
// unless opts.Client is given, and makes no request.
func New(opts Options) (*Service, error) {
	if err := CheckOptions(opts); err != nil {
		return nil, err
	}
	if opts.AppName == "" {
		opts.AppName = DefaultAppName
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	opts.Create.Tags = maps.Clone(opts.Create.Tags)
	opts.Create.Env = maps.Clone(opts.Create.Env)
	if opts.Create.Timeout == 0 {
		opts.Create.Timeout = DefaultSandboxTimeout
	}
	if opts.CreateTimeout <= 0 {
		opts.CreateTimeout = 10 * time.Minute
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	s := &Service{opts: opts, client: opts.Client, lookup: make(chan struct{}, 1), workdir: opts.Create.Workdir}
	if s.workdir == "" {
		s.workdir = "/"
	}
	s.throttleWait = "the client's bound"
	if s.client == nil {
		params := &sdk.ClientParams{TokenID: opts.TokenID, TokenSecret: opts.TokenSecret, Environment: opts.Environment}
		wait := opts.MaxThrottleWait
		switch {
		case wait < 0:
			wait = 0
		case wait == 0 && os.Getenv("MODAL_MAX_THROTTLE_WAIT") != "":
			s.throttleWait = "MODAL_MAX_THROTTLE_WAIT=" + os.Getenv("MODAL_MAX_THROTTLE_WAIT") + "s"
		case wait == 0:
			wait = 60 * time.Second
		}
		if !strings.HasPrefix(s.throttleWait, "MODAL_") {
			params.MaxThrottleWait = &wait
			s.throttleWait = wait.String()
		}
		c, err := sdk.NewClientWithOptions(params)
		if err != nil {
			// The SDK's errors name files and settings, never secrets.
			return nil, fmt.Errorf("modal: making the client: %w", err)
		}
		s.client, s.owned = c, true
	}
	s.base, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// Close ends the watchers of the Service's sandboxes (it destroys none)
// and closes the SDK client it made (not an injected one).
func (s *Service) Close() {
	s.stop()
	if s.owned {
		s.client.Close()
	}
}

// Name returns "modal".
func (s *Service) Name() string { return "modal" }

// Client is the SDK client.
func (s *Service) Client() *sdk.Client { return s.client }

// call runs f with ctx bounded by timeout; a timeout says which call did
// not answer.
func (s *Service) call(ctx context.Context, op string, timeout time.Duration, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f(cctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if cctx.Err() != nil {
		return fmt.Errorf("modal: %s: %w: no answer within %v", op, ErrUnavailable, timeout)
	}
	return s.explain(op, err)
}

// appAndImage returns the app (made when missing) and the built image,
// kept once they succeeded.
func (s *Service) appAndImage(ctx context.Context) (*sdk.App, *sdk.Image, error) {
	select {
	case s.lookup <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, context.Cause(ctx)
	}
	defer func() { <-s.lookup }()
	s.mu.Lock()
	app, img := s.app, s.image
	s.mu.Unlock()
	if app == nil {
		err := s.call(ctx, fmt.Sprintf("looking up the app %q", s.opts.AppName), s.opts.RequestTimeout, func(ctx context.Context) error {
			var err error
			app, err = s.client.Apps.FromName(ctx, s.opts.AppName, &sdk.AppFromNameParams{CreateIfMissing: true})
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		s.mu.Lock()
		s.app = app
		s.mu.Unlock()
	}
	if img == nil {
		built, err := s.client.Images.FromRegistry(s.opts.Image, nil).Build(ctx, app, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, context.Cause(ctx)
			}
			return nil, nil, s.explain(fmt.Sprintf("building the image %q", s.opts.Image), err)
		}
		img = built
		s.mu.Lock()
		s.image = img
		s.mu.Unlock()
	}
	return app, img, nil
}

// params are the creation parameters of a sandbox with labels.
func (s *Service) params(labels map[string]string, createID string) *sdk.SandboxCreateParams {
	p := s.opts.Create
	p.Tags = maps.Clone(s.opts.Create.Tags)
	if p.Tags == nil {
		p.Tags = map[string]string{}
	}
	maps.Copy(p.Tags, labels)
	p.Tags[CreateTag] = createID
	p.Env = maps.Clone(s.opts.Create.Env)
	return &p
}

// Create implements remote.Service. The app and image are resolved under
// ctx; the sandbox's creation then runs detached from ctx's cancellation,
// so that a sandbox made as ctx is cancelled is known and terminated
// before Create returns: it waits for the service's answer for at most
// RequestTimeout, then looks for the sandbox by its CreateTag.
func (s *Service) Create(ctx context.Context, req remote.CreateRequest) (remote.Machine, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.opts.CreateTimeout,
		fmt.Errorf("modal: creating a sandbox did not finish within %v: %w", s.opts.CreateTimeout, ErrUnavailable))
	defer cancel()
	app, img, err := s.appAndImage(cctx)
	if err != nil {
		return nil, err
	}
	createID := uuid.NewString()
	params := s.params(req.Labels, createID)
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.CreateTimeout)
	defer dcancel()
	type result struct {
		sb  *sdk.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := s.client.Sandboxes.Create(dctx, app, img, params)
		done <- result{sb, err}
	}()
	var r result
	select {
	case r = <-done:
		if r.err != nil {
			err := s.explain("creating a sandbox", r.err)
			if cctx.Err() != nil {
				err = context.Cause(cctx)
			}
			if ambiguous(r.err) {
				// The service may have made it before the failure.
				if serr := s.sweep(ctx, app, createID); serr != nil {
					err = errors.Join(err, serr)
				}
			}
			return nil, err
		}
		if cctx.Err() == nil {
			return s.newMachine(r.sb), nil
		}
	case <-cctx.Done():
		t := time.NewTimer(s.opts.RequestTimeout)
		select {
		case r = <-done:
		case <-t.C:
		}
		t.Stop()
	}
	// Cancelled (or out of time): what was made is terminated.
	cause := context.Cause(cctx)
	if r.sb != nil {
		if err := s.terminate(ctx, r.sb); err != nil {
			return nil, errors.Join(cause, fmt.Errorf("modal: terminating the sandbox %s made after the cancellation: %w", r.sb.SandboxID, err))
		}
		return nil, cause
	}
	if r.err == nil {
		// No answer: the creation is abandoned, and a sandbox it made
		// meanwhile is looked for by its tag.
		dcancel()
		if err := s.sweep(ctx, app, createID); err != nil {
			return nil, errors.Join(cause, err)
		}
	}
	return nil, cause
}

// ambiguous reports whether a failed creation may have made a sandbox
// all the same: the request may have reached the service.
func ambiguous(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false // the SDK's own refusals
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal, codes.Aborted:
		return true
	}
	return false
}

// terminate terminates sb, even when ctx is cancelled.
func (s *Service) terminate(ctx context.Context, sb *sdk.Sandbox) error {
	defer sb.Detach()
	return s.call(context.WithoutCancel(ctx), "terminating the sandbox "+sb.SandboxID, s.opts.RequestTimeout, func(ctx context.Context) error {
		_, err := sb.Terminate(ctx, nil)
		if isNotFound(err) {
			return nil
		}
		return err
	})
}

// sweep terminates the sandboxes of app carrying createID.
func (s *Service) sweep(ctx context.Context, app *sdk.App, createID string) error {
	var found []*sdk.Sandbox
	err := s.call(context.WithoutCancel(ctx), "looking for a sandbox whose creation was abandoned", s.opts.RequestTimeout, func(ctx context.Context) error {
		seq, err := s.client.Sandboxes.List(ctx, &sdk.SandboxListParams{AppID: app.AppID, Tags: map[string]string{CreateTag: createID}})
		if err != nil {
			return err
		}
		for sb, err := range seq {
			if err != nil {
				return err
			}
			found = append(found, sb)
		}
		return nil
	})
	for _, sb := range found {
		err = errors.Join(err, s.terminate(ctx, sb))
	}
	if err != nil {
		return fmt.Errorf("modal: a sandbox tagged %s=%s may remain: %w", CreateTag, createID, err)
	}
	return nil
}

// List implements remote.Service: the running sandboxes of the app that
// carry every label (as tags), with all their tags. No app means no
// sandboxes.
func (s *Service) List(ctx context.Context, labels map[string]string) ([]remote.Found, error) {
	var sbs []*sdk.Sandbox
	err := s.call(ctx, "listing sandboxes", s.opts.RequestTimeout, func(ctx context.Context) error {
		app, err := s.client.Apps.FromName(ctx, s.opts.AppName, nil)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		seq, err := s.client.Sandboxes.List(ctx, &sdk.SandboxListParams{AppID: app.AppID, Tags: labels})
		if err != nil {
			return err
		}
		for sb, err := range seq {
			if err != nil {
				return err
			}
			sbs = append(sbs, sb)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]remote.Found, 0, len(sbs))
	for _, sb := range sbs {
		var tags map[string]string
		gone := false
		err := s.call(ctx, "reading the tags of "+sb.SandboxID, s.opts.RequestTimeout, func(ctx context.Context) error {
			var err error
			tags, err = sb.GetTags(ctx, nil)
			if isNotFound(err) {
				gone, err = true, nil // it ended since the listing
			}
			return err
		})
		_ = sb.Detach()
		if err != nil {
			return nil, err
		}
		if !gone {
			out = append(out, remote.Found{ID: sb.SandboxID, Labels: tags})
		}
	}
	return out, nil
}

// Destroy implements remote.Service: the sandbox is terminated (even when
// ctx is cancelled, within RequestTimeout); one that no longer exists is
// not an error.
func (s *Service) Destroy(ctx context.Context, id string) error {
	sb, err := s.client.Sandboxes.FromID(ctx, id, nil)
	if err != nil {
		return s.explain("finding the sandbox "+id, err)
	}
	return s.terminate(ctx, sb)
}

// envName is what Modal accepts as an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckOptions reports what New refuses in opts before it makes a
// client: malformed strings, an injected client with credentials, half a
// token, an image with white space, a relative create workdir. aml check
// calls it on a call's literal arguments.
func CheckOptions(opts Options) error {
	const factory = "modal sandbox"
	if err := option.CheckAll(factory, map[string]string{"app_name": opts.AppName, "image": opts.Image, "environment": opts.Environment, "token_id": opts.TokenID, "token_secret": opts.TokenSecret}, "token_id", "token_secret"); err != nil {
		return err
	}
	if opts.Client != nil && (opts.TokenID != "" || opts.TokenSecret != "" || opts.Environment != "" || opts.MaxThrottleWait != 0) {
		return errors.New("modal: an injected client is mutually exclusive with token_id, token_secret, environment and max_throttle_wait")
	}
	if (opts.TokenID == "") != (opts.TokenSecret == "") {
		return errors.New("modal: token_id and token_secret go together")
	}
	if strings.ContainsAny(opts.Image, " \t\r\n") {
		return fmt.Errorf("modal: the image %q contains white space", opts.Image)
	}
	if w := opts.Create.Workdir; w != "" && !strings.HasPrefix(w, "/") {
		return fmt.Errorf("modal: create's workdir %q must be absolute", w)
	}
	return nil
}
