package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// DefaultAPIURL is the control plane of Daytona's cloud.
const DefaultAPIURL = "https://app.daytona.io/api"

// DefaultImage is the image of a sandbox when neither Image nor Snapshot
// is given.
const DefaultImage = "wearesingular/aml-agent-sandbox:latest"

// Options configures a Service. The zero value of a field means its
// default; credentials not given are read from the environment. New
// copies the options (Create too): the caller may change or reuse them.
type Options struct {
	// APIKey authenticates every request (Authorization: Bearer); default
	// $DAYTONA_API_KEY. It is never printed, in errors either.
	APIKey string
	// APIURL is the control plane's base URL; default $DAYTONA_API_URL,
	// else DefaultAPIURL.
	APIURL string
	// OrganizationID, when set, is sent as X-Daytona-Organization-ID;
	// default $DAYTONA_ORGANIZATION_ID.
	OrganizationID string
	// Target is the region sandboxes are created in; default
	// $DAYTONA_TARGET, else the organization's default.
	Target string
	// Image is the image of new sandboxes, built by Daytona from the
	// one-line Dockerfile "FROM <Image>" (the API has no image field).
	// Mutually exclusive with Snapshot; default DefaultImage.
	Image string
	// Snapshot is the name of a snapshot new sandboxes are created from.
	Snapshot string
	// Create holds further fields of the API's CreateSandbox body (cpu,
	// memory, disk, env, autoStopInterval, networkAllowList, ...), sent as
	// given. It cannot hold image, snapshot or buildInfo (use Image and
	// Snapshot); its labels are added to the provider's.
	Create map[string]any
	// CreateTimeout bounds a sandbox's creation, from the request until it
	// runs commands (a build included); default 5 minutes.
	CreateTimeout time.Duration
	// RequestTimeout bounds each request until its answer (a JSON
	// answer's body included); default 60 seconds.
	RequestTimeout time.Duration
	// IdleTimeout bounds how long an upload or a download may make no
	// progress, and how long a command's output stream may go without
	// answering a ping; default 60 seconds.
	IdleTimeout time.Duration
	// MaxRetries is how many times a request answered 429 Too Many
	// Requests is retried (idempotent ones also after network failures
	// and 502, 503 or 504); default 5, negative for none.
	MaxRetries int
	// MaxRetryWait bounds one wait before a retry, whatever Retry-After
	// asks; default 30 seconds.
	MaxRetryWait time.Duration
	// PollInterval is the interval between polls of a starting sandbox
	// for its first five seconds (then it grows to ten times that);
	// default 100 milliseconds.
	PollInterval time.Duration
	// HTTPClient makes the requests; default a client of its own.
	HTTPClient *http.Client
}

// Service is the Daytona client: it implements remote.Service over the
// control plane (sandboxes) and each sandbox's toolbox (processes and
// files). It is safe for concurrent use.
type Service struct {
	opts   Options
	client *http.Client
}

var _ remote.Service = (*Service)(nil)

// New returns a Service, with credentials from the environment where opts
// gives none. It makes no request.
func New(opts Options) (*Service, error) {
	env := func(v *string, name string) {
		if *v == "" {
			*v = strings.TrimSpace(os.Getenv(name))
		}
	}
	env(&opts.APIKey, "DAYTONA_API_KEY")
	env(&opts.APIURL, "DAYTONA_API_URL")
	env(&opts.OrganizationID, "DAYTONA_ORGANIZATION_ID")
	env(&opts.Target, "DAYTONA_TARGET")
	if opts.APIKey == "" {
		return nil, errors.New("daytona: no API key: set DAYTONA_API_KEY (or the provider's api_key)")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if err := CheckOptions(opts); err != nil {
		return nil, err
	}
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	if opts.Image == "" && opts.Snapshot == "" {
		opts.Image = DefaultImage
	}
	opts.Create = maps.Clone(opts.Create)
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.CreateTimeout, 5*time.Minute)
	def(&opts.RequestTimeout, 60*time.Second)
	def(&opts.IdleTimeout, 60*time.Second)
	def(&opts.MaxRetryWait, 30*time.Second)
	def(&opts.PollInterval, 100*time.Millisecond)
	switch {
	case opts.MaxRetries == 0:
		opts.MaxRetries = 5
	case opts.MaxRetries < 0:
		opts.MaxRetries = 0
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Service{opts: opts, client: client}, nil
}

// stringMap reads a JSON object of strings.
func stringMap(v any) (map[string]string, error) {
	switch m := v.(type) {
	case map[string]string:
		return maps.Clone(m), nil
	case map[string]any:
		out := make(map[string]string, len(m))
		for k, x := range m {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("the value of %q is not a string", k)
			}
			out[k] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is not a map of strings", v)
}

// Name returns "daytona".
func (s *Service) Name() string { return "daytona" }

// sandboxJSON is what the client reads of a Sandbox (or a
// SandboxListItem).
type sandboxJSON struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	State           string            `json:"state"`
	ErrorReason     string            `json:"errorReason"`
	Labels          map[string]string `json:"labels"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
}

func (s *Service) sandboxURL(idOrName string) string {
	return s.opts.APIURL + "/sandbox/" + url.PathEscape(idOrName)
}

// createBody is the CreateSandbox body of a request.
func (s *Service) createBody(req remote.CreateRequest) map[string]any {
	body := maps.Clone(s.opts.Create)
	if body == nil {
		body = map[string]any{}
	}
	labels := map[string]string{}
	if l, ok := body["labels"]; ok {
		labels, _ = stringMap(l)
	}
	maps.Copy(labels, req.Labels)
	body["labels"] = labels
	if _, ok := body["name"]; !ok {
		body["name"] = "aml-" + uuid.NewString()
	}
	if _, ok := body["target"]; !ok && s.opts.Target != "" {
		body["target"] = s.opts.Target
	}
	if s.opts.Snapshot != "" {
		body["snapshot"] = s.opts.Snapshot
	} else {
		body["buildInfo"] = map[string]any{"dockerfileContent": "FROM " + s.opts.Image + "\n"}
	}
	return body
}

// Create implements remote.Service: POST /sandbox, then GET
// /sandbox/{id} until the sandbox is started (within CreateTimeout). A
// sandbox that fails to build or start, or whose creation is cancelled,
// is destroyed before Create returns; a request under way when ctx is
// cancelled is let finish, so that a sandbox it made is known and
// destroyed.
func (s *Service) Create(ctx context.Context, req remote.CreateRequest) (remote.Machine, error) {
	body := s.createBody(req)
	name, _ := body["name"].(string)
	var sb sandboxJSON
	err := s.call(ctx, request{op: "creating a sandbox", method: http.MethodPost, url: s.opts.APIURL + "/sandbox", body: body, detach: true}, &sb)
	if err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && s.opts.Snapshot != "" {
			return nil, fmt.Errorf("daytona: the snapshot %q was not found: %w", s.opts.Snapshot, err)
		}
		if apiErr == nil && name != "" {
			// The request may have reached the service: a sandbox of
			// that name is destroyed if it exists.
			_ = s.destroyDetached(ctx, name)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	if sb.ID == "" {
		_ = s.destroyDetached(ctx, name)
		return nil, errors.New("daytona: creating a sandbox: the answer has no sandbox id")
	}
	if err := ctx.Err(); err != nil {
		_ = s.destroyDetached(ctx, sb.ID)
		return nil, context.Cause(ctx)
	}
	started, err := s.waitStarted(ctx, sb)
	if err != nil {
		if derr := s.destroyDetached(ctx, sb.ID); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	return s.machine(started), nil
}

// waitStarted polls a new sandbox until it is started.
func (s *Service) waitStarted(ctx context.Context, sb sandboxJSON) (sandboxJSON, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.opts.CreateTimeout, fmt.Errorf("daytona: sandbox %s did not start within %v", sb.ID, s.opts.CreateTimeout))
	defer cancel()
	interval := s.opts.PollInterval
	begun := time.Now()
	for {
		switch sb.State {
		case "started":
			return sb, nil
		case "build_failed", "error":
			reason := sb.ErrorReason
			if reason == "" {
				reason = "no reason given"
			}
			return sb, fmt.Errorf("daytona: sandbox %s ended in the state %s: %s: %w", sb.ID, sb.State, reason, ErrBuildFailed)
		case "destroyed", "destroying":
			return sb, fmt.Errorf("daytona: sandbox %s was destroyed while it started: %w", sb.ID, ErrSandboxGone)
		}
		t := time.NewTimer(interval)
		select {
		case <-cctx.Done():
			t.Stop()
			err := context.Cause(cctx)
			if ctx.Err() == nil {
				err = fmt.Errorf("%w (last state %s)", err, sb.State)
			}
			return sb, err
		case <-t.C:
		}
		if time.Since(begun) > 5*time.Second {
			// Most sandboxes start within seconds; slower starts (a
			// build) are polled less and less often.
			interval = min(interval*3/2, 10*s.opts.PollInterval)
		}
		var next sandboxJSON
		err := s.call(cctx, request{op: "getting sandbox " + sb.ID, method: http.MethodGet, url: s.sandboxURL(sb.ID), idempotent: true}, &next)
		if err != nil {
			if cctx.Err() != nil {
				continue
			}
			if errors.Is(err, ErrNotFound) {
				return sb, fmt.Errorf("daytona: sandbox %s was destroyed while it started: %w", sb.ID, ErrSandboxGone)
			}
			return sb, err
		}
		sb = next
	}
}

// destroyDetached destroys a sandbox even when ctx is cancelled.
func (s *Service) destroyDetached(ctx context.Context, idOrName string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.RequestTimeout)
	defer cancel()
	return s.Destroy(dctx, idOrName)
}

// List implements remote.Service: GET /sandbox with the labels as a JSON
// filter, page by page.
func (s *Service) List(ctx context.Context, labels map[string]string) ([]remote.Found, error) {
	filter, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	if labels == nil {
		filter = []byte("{}")
	}
	var out []remote.Found
	cursor := ""
	for {
		q := url.Values{"labels": {string(filter)}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []sandboxJSON `json:"items"`
			NextCursor *string       `json:"nextCursor"`
		}
		if err := s.call(ctx, request{op: "listing sandboxes", method: http.MethodGet, url: s.opts.APIURL + "/sandbox?" + q.Encode(), idempotent: true}, &page); err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			// The filter is the service's; it is checked again here.
			ok := true
			for k, v := range labels {
				if it.Labels[k] != v {
					ok = false
				}
			}
			if ok && it.State != "destroyed" && it.State != "destroying" {
				out = append(out, remote.Found{ID: it.ID, Labels: it.Labels})
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" || *page.NextCursor == cursor {
			return out, nil
		}
		cursor = *page.NextCursor
	}
}

// Destroy implements remote.Service: DELETE /sandbox/{id}; a sandbox that
// does not exist is not an error.
func (s *Service) Destroy(ctx context.Context, id string) error {
	err := s.call(ctx, request{op: "destroying sandbox " + id, method: http.MethodDelete, url: s.sandboxURL(id), idempotent: true}, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// sandbox reads a sandbox's state; a sandbox that is gone is reported as
// ErrSandboxGone.
func (s *Service) sandbox(ctx context.Context, id string) (sandboxJSON, error) {
	var sb sandboxJSON
	err := s.call(ctx, request{op: "getting sandbox " + id, method: http.MethodGet, url: s.sandboxURL(id), idempotent: true}, &sb)
	if errors.Is(err, ErrNotFound) {
		return sb, fmt.Errorf("daytona: sandbox %s: %w", id, ErrSandboxGone)
	}
	if err == nil && (sb.State == "destroyed" || sb.State == "destroying") {
		return sb, fmt.Errorf("daytona: sandbox %s is %s: %w", id, sb.State, ErrSandboxGone)
	}
	return sb, err
}

// CheckOptions reports what New refuses in opts once it has an API key
// (it reads no environment variable): an API URL that is not http(s),
// both an image and a snapshot, an image with white space, create fields
// the provider owns, create labels that are not strings, two targets.
// aml check calls it on a call's literal arguments.
func CheckOptions(opts Options) error {
	if opts.APIURL != "" {
		u, err := url.Parse(opts.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("daytona: the API URL %q is not an http(s) URL", opts.APIURL)
		}
	}
	if opts.Image != "" && opts.Snapshot != "" {
		return errors.New("daytona: image and snapshot are mutually exclusive")
	}
	if strings.ContainsAny(opts.Image, " \t\r\n") {
		return fmt.Errorf("daytona: the image %q contains white space", opts.Image)
	}
	for _, k := range []string{"image", "snapshot", "buildInfo"} {
		if _, ok := opts.Create[k]; ok {
			return fmt.Errorf("daytona: create cannot hold %q: use the provider's image or snapshot", k)
		}
	}
	if l, ok := opts.Create["labels"]; ok {
		if _, err := stringMap(l); err != nil {
			return fmt.Errorf("daytona: create's labels: %w", err)
		}
	}
	if t, ok := opts.Create["target"]; ok && opts.Target != "" && t != opts.Target {
		return fmt.Errorf("daytona: the target %q and create's target %v differ", opts.Target, t)
	}
	return nil
}
