// Package daytonadouble is a local stand-in for Daytona's REST API, for
// the tests of the Daytona sandbox client: an HTTP server implementing the
// control-plane operations (create, get, list and delete sandboxes) and
// the toolbox operations of each sandbox (process sessions, command logs
// over WebSocket, command input, file upload and download) that the
// client uses. Each sandbox is a real container of internal/remotetest,
// whose home is Home.
//
// The double checks the client against the published API: every request
// it receives and every response it sends is validated with kin-openapi
// against Daytona's own OpenAPI documents (openapi/, embedded), and any
// mismatch is recorded and reported as a test error when the test ends.
// Where the documents cannot speak (a WebSocket upgrade's 101 answer, the
// content of a streamed upload or download) the double checks what they
// do describe: the upgrade request's parameters, the multipart upload's
// parts (validated with the file's content left out, so that it streams),
// the download's status and content type.
//
// The behaviour follows Daytona's daemon where it matters to a client:
// output is labelled line by line with the 0x01 0x01 0x01 (stdout) and
// 0x02 0x02 0x02 (stderr) prefixes, a last partial line gains a newline
// and NUL bytes are lost, as the daemon's shell labellers do; an
// asynchronous command's standard input stays open until it exits, and
// input sent to it gains a newline when it has none and is echoed into
// its output unless the command was started with suppressInputEcho;
// deleting a session kills its processes; a log stream closes normally
// once the command's exit code is known, and is cut off abruptly when the
// sandbox is destroyed. Logs are asked for with X-Daytona-Split-Output:
// true, without which the daemon would merge the streams: the double
// records a request without it as an error.
//
// Differences from the service, none of which a client of sandboxes can
// observe through the operations above: a session's commands each run in
// a fresh sh -c rather than in one long-lived shell (no shell state is
// carried from one command to the next); images are not built (a
// sandbox's Dockerfile must be one FROM line and the container runs
// remotetest's image whatever it names, see Sandbox.Image); there are no
// regions, quotas, snapshots' contents or auto-stop.
package daytonadouble

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/remotetest"
)

// Home is the home directory of every sandbox's user, where commands run
// and relative paths resolve.
const Home = "/home/daytona"

// DefaultSnapshot is the one snapshot every double knows.
const DefaultSnapshot = "daytonaio/sandbox:0.4.3"

// Server is the double. Its methods are safe for concurrent use.
type Server struct {
	// URL is the control plane's base URL (the client's API URL),
	// http://127.0.0.1:port/api.
	URL string
	// APIKey is the key the double accepts as a bearer token.
	APIKey string

	t      testing.TB
	hs     *httptest.Server
	docker *remotetest.Docker
	api    *spec
	tool   *spec
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	sandboxes   map[string]*Sandbox
	snapshots   map[string]bool
	authStatus  int
	limited     int
	retryAfter  string
	buildFail   string
	createDelay time.Duration
	answerDelay time.Duration
	stalls      int
	stallAfter  int64
	cutLogs     chan struct{}
	pageSize    int
	errs        []string
	reqs        []Request
}

// Request is one request the double received; Requests returns copies,
// which the caller owns.
type Request struct {
	Method string
	// Path is the URL path, with the /api or /toolbox/{id} prefix.
	Path     string
	RawQuery string
	// Operation is the operationId the request matched ("" when none).
	Operation string
	// Status is the status answered (101 for a WebSocket upgrade).
	Status int
	// Header holds the request's headers, Authorization left out.
	Header http.Header
}

// New starts a double for the test, or skips the test when no Docker
// engine with remotetest's image answers. What the test leaves (servers,
// containers) is removed when it ends, and every request or response that
// did not match the OpenAPI documents is reported with t.Errorf.
func New(t testing.TB) *Server {
	t.Helper()
	docker := remotetest.New(t, Home)
	api, tool, err := specs()
	if err != nil {
		t.Fatalf("daytona double: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		APIKey:     "dtn_double_" + strconv.FormatInt(time.Now().UnixNano(), 36),
		t:          t,
		docker:     docker,
		api:        api,
		tool:       tool,
		ctx:        ctx,
		cancel:     cancel,
		sandboxes:  map[string]*Sandbox{},
		snapshots:  map[string]bool{DefaultSnapshot: true},
		pageSize:   100,
		cutLogs:    make(chan struct{}),
		stallAfter: -1,
	}
	s.hs = httptest.NewServer(s)
	s.URL = s.hs.URL + "/api"
	t.Cleanup(func() {
		s.cancel()
		s.hs.CloseClientConnections()
		s.hs.Close()
		s.wg.Wait()
		s.mu.Lock()
		boxes := make([]*Sandbox, 0, len(s.sandboxes))
		for _, b := range s.sandboxes {
			boxes = append(boxes, b)
		}
		s.mu.Unlock()
		for _, b := range boxes {
			s.destroy(b, false)
		}
		for _, e := range s.Errors() {
			t.Errorf("daytona double: %s", e)
		}
	})
	return s
}

// Docker is the container service behind the sandboxes.
func (s *Server) Docker() *remotetest.Docker { return s.docker }

// ToolboxURL is the toolboxProxyUrl the double gives its sandboxes.
func (s *Server) ToolboxURL() string { return s.hs.URL + "/toolbox" }

// FailAuth makes every request answer status (401 or 403) from now on,
// with a message naming the token presented, as a careless service might;
// 0 ends it.
func (s *Server) FailAuth(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authStatus = status
}

// RateLimit makes the next n requests answer 429 Too Many Requests with
// the header Retry-After: retryAfter ("" sends none).
func (s *Server) RateLimit(n int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited, s.retryAfter = n, retryAfter
}

// FailBuilds makes every sandbox created from a Dockerfile from now on
// end in the state build_failed with reason as its errorReason; ""
// ends it.
func (s *Server) FailBuilds(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buildFail = reason
}

// AddSnapshot makes a snapshot name known (DefaultSnapshot always is); a
// sandbox created from an unknown one answers 404.
func (s *Server) AddSnapshot(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshots[name] = true
}

// CreateDelay keeps new sandboxes in their first state (creating or
// pending_build) for d before they start.
func (s *Server) CreateDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createDelay = d
}

// CreateAnswerDelay makes the answer to a create request wait d after
// the sandbox is made, as a slow network would.
func (s *Server) CreateAnswerDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answerDelay = d
}

// Stall makes the next n requests get no answer at all (until the client
// gives up), as a dead network would.
func (s *Server) Stall(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = n
}

// StallDownloads makes every download from now on send n bytes, then
// nothing more (until the client gives up); a negative n ends it.
func (s *Server) StallDownloads(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stallAfter = n
}

// CutLogStreams breaks the log streams open now, as a network failure
// would (the commands and the sandboxes go on).
func (s *Server) CutLogStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.cutLogs)
	s.cutLogs = make(chan struct{})
}

// logsCut returns the channel CutLogStreams closes next.
func (s *Server) logsCut() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cutLogs
}

// PageSize bounds the items of one page of the sandbox list (at most the
// request's limit).
func (s *Server) PageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Errors returns the mismatches with the OpenAPI documents (and other
// protocol errors) recorded so far.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// TakeErrors returns the errors recorded so far and forgets them, for a
// test that provokes them on purpose.
func (s *Server) TakeErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.errs
	s.errs = nil
	return errs
}

// fail records a protocol error.
func (s *Server) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

// Sandboxes returns the sandboxes that exist (not destroyed), by creation
// time.
func (s *Server) Sandboxes() []*Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Sandbox, 0, len(s.sandboxes))
	for _, b := range s.sandboxes {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
	return out
}

// Sandbox returns the sandbox id, or nil.
func (s *Server) Sandbox(id string) *Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[id]
}

// DestroyFromOutside destroys the sandbox id as someone else would (the
// dashboard, another client): its container goes, and its toolbox
// connections are cut off.
func (s *Server) DestroyFromOutside(id string) {
	if b := s.Sandbox(id); b != nil {
		s.destroy(b, true)
	}
}

// ServeHTTP implements http.Handler: the control plane under /api, the
// toolboxes under /toolbox/{sandboxId}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cw := &captureWriter{ResponseWriter: w}
	rec := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
	rec.Header.Del("Authorization")
	defer func() {
		rec.Status = cw.status
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
	}()
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		s.serve(cw, r, s.api, strings.TrimPrefix(r.URL.Path, "/api"), "", &rec)
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/toolbox/"), "/")
		s.serve(cw, r, s.tool, "/"+rest, id, &rec)
	default:
		s.fail("%s %s: outside the API (/api) and the toolboxes (/toolbox/{sandboxId})", r.Method, r.URL.Path)
		writeJSON(cw, http.StatusNotFound, apiError(http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path))
	}
}

// exchange is one validated request on its way to a handler.
type exchange struct {
	w      *captureWriter
	r      *http.Request
	op     string
	params map[string]string
	body   []byte
	box    string // the toolbox's sandbox id
}

// maxBody bounds a request body the double reads whole (all but
// multipart uploads, which stream).
const maxBody = 8 << 20

func (s *Server) serve(w *captureWriter, r *http.Request, sp *spec, p, box string, rec *Request) {
	route, params, err := sp.route(r, p)
	if err != nil {
		s.fail("%s %s: no operation of the %s OpenAPI document matches: %v", r.Method, r.URL.Path, sp.name, err)
		writeJSON(w, http.StatusNotFound, apiError(http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path))
		return
	}
	op := route.Operation.OperationID
	rec.Operation = op
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	multipart := strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/")
	var body []byte
	if !upgrade && !multipart {
		body, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError(http.StatusBadRequest, "reading the body: "+err.Error()))
			return
		}
		if len(body) > maxBody {
			s.fail("%s %s: a body of more than %d bytes that is not a multipart upload", r.Method, r.URL.Path, maxBody)
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError(http.StatusRequestEntityTooLarge, "body too large"))
			return
		}
		if len(body) == 0 {
			body = nil
		}
	}
	if err := validateRequest(s.ctx, r, p, route, params, body, multipart || upgrade); err != nil {
		s.fail("request %s %s (%s) does not match the %s OpenAPI document: %v", r.Method, r.URL.Path, op, sp.name, err)
		writeJSON(w, http.StatusBadRequest, apiError(http.StatusBadRequest, err.Error()))
		return
	}
	if upgrade && r.Method != http.MethodGet {
		s.fail("%s %s: a WebSocket upgrade must be a GET", r.Method, r.URL.Path)
	}
	s.mu.Lock()
	authStatus := s.authStatus
	limited := s.limited > 0
	retryAfter := s.retryAfter
	if limited {
		s.limited--
	}
	stall := s.stalls > 0
	if stall {
		s.stalls--
	}
	s.mu.Unlock()
	if stall {
		select {
		case <-r.Context().Done():
		case <-s.ctx.Done():
		}
		w.status = 0
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case authStatus != 0:
		writeJSON(w, authStatus, apiError(authStatus, "invalid credentials: API key "+token+" is not valid for this organization"))
	case token != s.APIKey:
		writeJSON(w, http.StatusUnauthorized, apiError(http.StatusUnauthorized, "Unauthorized"))
	case limited:
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeJSON(w, http.StatusTooManyRequests, apiError(http.StatusTooManyRequests, "ThrottlerException: Too Many Requests"))
	default:
		ex := &exchange{w: w, r: r, op: op, params: params, body: body, box: box}
		if sp == s.api {
			s.serveAPI(ex)
		} else {
			s.serveToolbox(ex)
		}
		if w.status == http.StatusSwitchingProtocols {
			return
		}
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.overflow && !strings.Contains(w.Header().Get("Content-Type"), "octet-stream") {
		s.fail("%s %s (%s): a %s response of more than %d bytes", r.Method, r.URL.Path, op, w.Header().Get("Content-Type"), maxCapture)
		return
	}
	if err := validateResponse(s.ctx, r, p, route, params, w.status, w.Header(), w.body); err != nil {
		s.fail("response %d to %s %s (%s) does not match the %s OpenAPI document: %v", w.status, r.Method, r.URL.Path, op, sp.name, err)
	}
}

// maxCapture bounds the response body kept for validation.
const maxCapture = 1 << 20

// captureWriter keeps the status and (a bounded prefix of) the body of a
// response for its validation.
type captureWriter struct {
	http.ResponseWriter
	status   int
	body     []byte
	overflow bool
	// nocapture keeps nothing of the body (a streamed download).
	nocapture bool
}

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.nocapture {
		return w.ResponseWriter.Write(b)
	}
	if room := maxCapture - len(w.body); room > 0 {
		w.body = append(w.body, b[:min(room, len(b))]...)
	}
	if len(w.body)+len(b) > maxCapture {
		w.overflow = true
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and WebSocket upgrades reach the
// connection.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher.
func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack implements http.Hijacker.
func (w *captureWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// apiError is the control plane's error body (NestJS's); the toolbox
// reads its "message" too.
func apiError(status int, msg string) map[string]any {
	return map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)}
}

// toolboxError is the daemon's error body.
func toolboxError(status int, msg string) map[string]any {
	return map[string]any{"statusCode": status, "message": msg, "code": strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
