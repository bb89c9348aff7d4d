// Package modaldouble is a local double of Modal's API for tests: one
// gRPC server on loopback that serves the ModalClient service (the
// control plane) and the TaskCommandRouter service (a task's command
// router) by implementing the server interfaces of the official Go SDK's
// own generated packages (github.com/modal-labs/modal-client/go/proto).
// Each Modal sandbox is a real container run by remotetest.Docker, so
// processes, their streams, exit codes and files are real.
//
// Tests drive it only through the official SDK. The SDK dials a
// control plane whose URL starts with http:// without TLS, and, when
// that URL is on localhost, dials the command router URL it is handed
// (https://127.0.0.1:PORT, the same server) without TLS too; Env returns
// the variables that point the SDK at the double (MODAL_SERVER_URL), and
// WithEnv sets them while a client is made.
//
// What the double models, as far as the SDK's sandbox calls go:
// credentials (the token pair on every call, and the short-lived auth
// token and the router's JWT the SDK fetches), environments, apps,
// registry images (built through ImageJoinStreaming), secrets made from
// maps, sandboxes of both backends (SandboxCreate and the V2
// SandboxCreateV2 the SDK uses by default) with tags, listing,
// termination, waiting and their lifetime limit, and execs (start,
// stdout and stderr read from any offset, stdin written unary or
// streamed, status, wait, the exec timeout). The SDK's filesystem API
// runs a tool inside the sandbox (/__modal/.bin/modal-sandbox-fs-tools
// with a JSON command); the double runs its WriteFile, ReadFile and
// MakeDirectory commands itself against the container. A sandbox's
// entrypoint command is not run (the container waits), and entrypoint
// stdio, tunnels, volumes, snapshots and the rest of Modal's API are not
// served.
//
// Knobs for tests: Throttle (rate limiting with a retry hint), FailImage
// (an image that fails to build), Terminate (a sandbox terminated from
// outside), Stall (a call that never answers), RefuseExec (execs the
// router refuses), CreateDelay and BuildDelay (slow provisioning). Bad credentials need no knob: a client
// with another token pair is refused.
package modaldouble

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	modal "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aml-go/aml/internal/remotetest"
)

// Method names as the knobs take them: the bare gRPC method name of the
// ModalClient service, for example "SandboxCreateV2" or "AppGetOrCreate".
const (
	controlPrefix = "/modal.client.ModalClient/"
	routerPrefix  = "/modal.task_command_router.TaskCommandRouter/"
)

// Home is the directory the double's containers make at start (the
// workdir the AML Modal provider transfers workspaces to).
const Home = "/workspace"

// Double is a running double of Modal's API. Its methods are safe for
// concurrent use.
type Double struct {
	// TokenID and TokenSecret are the only credentials it accepts.
	TokenID, TokenSecret string

	docker    *remotetest.Docker
	srv       *grpc.Server
	addr      string
	outDir    string
	workers   sync.WaitGroup
	closeOnce sync.Once

	mu         sync.Mutex
	authTokens map[string]bool
	// routerTokens maps the router JWTs issued to their task.
	routerTokens map[string]string
	envs         map[string]string // name → id
	apps         map[string]*app   // env + "/" + name → app
	images       map[string]*image
	imageByTag   map[string]string
	secrets      map[string]map[string]string
	sandboxes    map[string]*sandbox
	tasks        map[string]*sandbox
	lastCreated  float64
	throttles    []*throttle
	failImages   map[string]string
	stalls       map[string]bool
	refusals     []string
	createDelay  time.Duration
	buildDelay   time.Duration
	calls        map[string]int
	closed       bool
}

type app struct {
	id, name, env string
}

type image struct {
	id, tag string
	// result is nil while the image builds.
	result *pb.GenericResult
	built  chan struct{}
}

type throttle struct {
	method     string
	times      int
	retryAfter time.Duration
}

// New starts a double on 127.0.0.1 whose sandboxes are containers of
// remotetest (the test is skipped, saying why, when no Docker engine with
// the test image answers). It stops, and every sandbox is destroyed, when
// the test ends.
func New(t testing.TB) *Double {
	t.Helper()
	docker := remotetest.New(t, Home)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("modaldouble: listening: %v", err)
	}
	d := &Double{
		TokenID:      "ak-" + randomID(16),
		TokenSecret:  "as-" + randomID(24),
		docker:       docker,
		addr:         lis.Addr().String(),
		outDir:       t.TempDir(),
		authTokens:   map[string]bool{},
		routerTokens: map[string]string{},
		envs:         map[string]string{"main": "en-" + randomID(20)},
		apps:         map[string]*app{},
		images:       map[string]*image{},
		imageByTag:   map[string]string{},
		secrets:      map[string]map[string]string{},
		sandboxes:    map[string]*sandbox{},
		tasks:        map[string]*sandbox{},
		failImages:   map[string]string{},
		stalls:       map[string]bool{},
		calls:        map[string]int{},
	}
	d.srv = grpc.NewServer(
		grpc.MaxRecvMsgSize(128<<20), grpc.MaxSendMsgSize(128<<20),
		// Fixed windows (no BDP growth): what is in flight to the double
		// stays small, so that tests measure what a client holds.
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20),
		grpc.ChainUnaryInterceptor(d.unaryInterceptor),
		grpc.ChainStreamInterceptor(d.streamInterceptor),
	)
	pb.RegisterModalClientServer(d.srv, &control{d: d})
	pb.RegisterTaskCommandRouterServer(d.srv, &router{d: d})
	go func() { _ = d.srv.Serve(lis) }()
	t.Cleanup(d.Close)
	return d
}

// URL is the control plane's URL (MODAL_SERVER_URL).
func (d *Double) URL() string { return "http://" + d.addr }

// routerURL is the command router's URL the SDK is handed.
func (d *Double) routerURL() string { return "https://" + d.addr }

// Docker is the service whose containers are the sandboxes.
func (d *Double) Docker() *remotetest.Docker { return d.docker }

// Close stops the server and destroys every sandbox; repeat-safe. New
// registers it with the test's cleanup.
func (d *Double) Close() {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		all := slices.Collect(maps.Values(d.sandboxes))
		d.mu.Unlock()
		d.srv.Stop()
		for _, sb := range all {
			d.finish(sb, terminated("the double was closed"))
		}
		done := make(chan struct{})
		go func() { d.workers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
		}
	})
}

// Env returns the environment that points the SDK at d: MODAL_SERVER_URL,
// a MODAL_CONFIG_PATH that names no file (so that no ~/.modal.toml is
// read), MODAL_LOGLEVEL=ERROR (the SDK warns on stderr that it dials the
// router without TLS) and the other MODAL_ variables the SDK reads set
// empty (which it takes as unset).
func (d *Double) Env() map[string]string {
	env := map[string]string{
		"MODAL_SERVER_URL":  d.URL(),
		"MODAL_CONFIG_PATH": filepath.Join(d.outDir, "no-modal.toml"),
		"MODAL_LOGLEVEL":    "ERROR",
	}
	for _, k := range []string{"MODAL_PROFILE", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_ENVIRONMENT",
		"MODAL_OAUTH_REFRESH_TOKEN", "MODAL_OAUTH_CLIENT_ID", "MODAL_OAUTH_CLIENT_SECRET", "MODAL_OAUTH_JWT_KEY",
		"MODAL_IMAGE_BUILDER_VERSION", "MODAL_MAX_THROTTLE_WAIT", "MODAL_SANDBOX_V2"} {
		env[k] = ""
	}
	return env
}

// envMu serializes WithEnv.
var envMu sync.Mutex

// WithEnv runs fn with the process environment changed by vars, then
// restores it. The SDK reads its environment only while a client is
// made, so parallel tests each make theirs inside WithEnv; calls are
// serialized. Nothing else in the test binary may read the environment
// meanwhile.
func WithEnv(vars map[string]string, fn func()) {
	envMu.Lock()
	defer envMu.Unlock()
	type old struct {
		v  string
		ok bool
	}
	saved := map[string]old{}
	for k, v := range vars {
		ov, ok := os.LookupEnv(k)
		saved[k] = old{ov, ok}
		os.Setenv(k, v)
	}
	defer func() {
		for k, o := range saved {
			if o.ok {
				os.Setenv(k, o.v)
			} else {
				os.Unsetenv(k)
			}
		}
	}()
	fn()
}

// Client returns an SDK client of d with its credentials (params may
// give others, or options), closed when the test ends. extra adds to the
// environment the client is made in (MODAL_SANDBOX_V2=false selects the
// first sandbox backend).
func (d *Double) Client(t testing.TB, params *modal.ClientParams, extra map[string]string) *modal.Client {
	t.Helper()
	p := modal.ClientParams{TokenID: d.TokenID, TokenSecret: d.TokenSecret}
	if params != nil {
		p = *params
	}
	env := d.Env()
	maps.Copy(env, extra)
	var c *modal.Client
	var err error
	WithEnv(env, func() { c, err = modal.NewClientWithOptions(&p) })
	if err != nil {
		t.Fatalf("modaldouble: making a client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Throttle makes the next times calls of method (every method when "")
// fail with RESOURCE_EXHAUSTED and a retry hint of retryAfter, as Modal's
// rate limiter does; times < 0 means every call from now on.
func (d *Double) Throttle(method string, times int, retryAfter time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.throttles = append(d.throttles, &throttle{method: method, times: times, retryAfter: retryAfter})
}

// FailImage makes every build of the registry image tag fail with
// message.
func (d *Double) FailImage(tag, message string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failImages[tag] = message
}

// Stall makes every call of method from now on go unanswered until the
// caller gives up (a network that drops requests).
func (d *Double) Stall(method string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stalls[method] = true
}

// RefuseExec makes the router refuse (FAILED_PRECONDITION) every exec
// one of whose arguments contains substr.
func (d *Double) RefuseExec(substr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refusals = append(d.refusals, substr)
}

// refused reports whether RefuseExec refuses args.
func (d *Double) refused(args []string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.refusals {
		for _, a := range args {
			if strings.Contains(a, r) {
				return true
			}
		}
	}
	return false
}

// CreateDelay makes each sandbox take at least delay to be provisioned
// (its container starts after it).
func (d *Double) CreateDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.createDelay = delay
}

// BuildDelay makes each image build take at least delay.
func (d *Double) BuildDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buildDelay = delay
}

// Calls returns how many calls of method the double received (refused
// ones included).
func (d *Double) Calls(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[method]
}

// Sandbox is what Sandboxes reports of one sandbox.
type Sandbox struct {
	ID    string
	Tags  map[string]string
	AppID string
	// Running is false once the sandbox finished (terminated, timed out).
	Running bool
}

// Sandboxes returns every sandbox the double made, in creation order.
func (d *Double) Sandboxes() []Sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := slices.SortedFunc(maps.Values(d.sandboxes), func(a, b *sandbox) int {
		switch {
		case a.createdAt < b.createdAt:
			return -1
		case a.createdAt > b.createdAt:
			return 1
		}
		return 0
	})
	out := make([]Sandbox, 0, len(all))
	for _, sb := range all {
		out = append(out, Sandbox{ID: sb.id, Tags: maps.Clone(sb.tags), AppID: sb.appID, Running: sb.result == nil})
	}
	return out
}

// Running returns the ids of the sandboxes that have not finished.
func (d *Double) Running() []string {
	var ids []string
	for _, s := range d.Sandboxes() {
		if s.Running {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Terminate terminates the sandbox id from outside (as the dashboard or
// another client would); its running commands are killed.
func (d *Double) Terminate(id string) error {
	d.mu.Lock()
	sb := d.sandboxes[id]
	d.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("modaldouble: no sandbox %s", id)
	}
	d.finish(sb, terminated("terminated from outside"))
	return nil
}

// unaryInterceptor checks credentials and applies the knobs.
func (d *Double) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := d.admit(ctx, info.FullMethod, true); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (d *Double) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := d.admit(ss.Context(), info.FullMethod, false); err != nil {
		return err
	}
	return handler(srv, ss)
}

// admit counts the call, checks its credentials and applies Stall and
// Throttle. The SDK sends the auth token with unary calls only.
func (d *Double) admit(ctx context.Context, full string, unary bool) error {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if method, ok := strings.CutPrefix(full, routerPrefix); ok {
		d.mu.Lock()
		d.calls[method]++
		d.mu.Unlock()
		// The router trusts only a JWT the control plane handed out.
		_, err := d.bearerTask(ctx)
		return err
	}
	method, _ := strings.CutPrefix(full, controlPrefix)
	d.mu.Lock()
	d.calls[method]++
	stalled := d.stalls[method]
	var hint *throttle
	for _, th := range d.throttles {
		if (th.method == "" || th.method == method) && th.times != 0 {
			hint = th
			if th.times > 0 {
				th.times--
			}
			break
		}
	}
	validToken := d.authTokens[first("x-modal-auth-token")]
	d.mu.Unlock()
	if stalled {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if first("x-modal-token-id") != d.TokenID || first("x-modal-token-secret") != d.TokenSecret {
		return status.Error(codes.Unauthenticated, "Token ID or token secret is invalid: check the token pair, or create one with `modal token new`")
	}
	if unary && method != "AuthTokenGet" && !validToken {
		return status.Error(codes.Unauthenticated, "missing or expired x-modal-auth-token")
	}
	if hint != nil {
		st := status.New(codes.ResourceExhausted, "Too many requests: rate limit exceeded")
		if ds, err := st.WithDetails(pb.RPCRetryPolicy_builder{RetryAfterSecs: float32(hint.retryAfter.Seconds())}.Build()); err == nil {
			st = ds
		}
		return st.Err()
	}
	return nil
}

// jwt returns a token the SDK can read the expiry of (it checks no
// signature): "x.<base64url claims>.x".
func jwt(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	return "x." + base64.RawURLEncoding.EncodeToString(b) + ".x"
}

// routerToken issues a JWT for the command router of taskID, valid for
// an hour.
func (d *Double) routerToken(taskID string) string {
	tok := jwt(map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "task_id": taskID, "jti": randomID(12)})
	d.mu.Lock()
	d.routerTokens[tok] = taskID
	d.mu.Unlock()
	return tok
}

// bearerTask returns the task the call's router JWT was issued for.
func (d *Double) bearerTask(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var bearer string
	if v := md.Get("authorization"); len(v) > 0 {
		bearer, _ = strings.CutPrefix(v[0], "Bearer ")
	}
	d.mu.Lock()
	task, ok := d.routerTokens[bearer]
	d.mu.Unlock()
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no valid bearer token for the command router")
	}
	return task, nil
}

// taskFromContext returns the running or finished sandbox of taskID,
// checking that the call's JWT was issued for it.
func (d *Double) taskFromContext(ctx context.Context, taskID string) (*sandbox, error) {
	task, err := d.bearerTask(ctx)
	if err != nil {
		return nil, err
	}
	if task != taskID {
		return nil, status.Errorf(codes.PermissionDenied, "the bearer token is not for task %s", taskID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.tasks[taskID]
	if sb == nil {
		return nil, status.Errorf(codes.NotFound, "task %s not found", taskID)
	}
	return sb, nil
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomID(n int) string {
	b := make([]byte, n)
	for i := range b {
		x, _ := rand.Int(rand.Reader, big.NewInt(int64(len(base62))))
		b[i] = base62[x.Int64()]
	}
	return string(b)
}

func terminated(msg string) *pb.GenericResult {
	return pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_TERMINATED, Exception: msg}.Build()
}
