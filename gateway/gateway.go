// Package gateway is AML's metering model gateway: a local HTTP reverse
// proxy between the agents AML launches and the model endpoints their
// users configured. It forwards each model call to its upstream as it is
// (the agent's own credentials included, which the gateway neither logs
// nor records), streams server-sent events through chunk by chunk, and
// reads from each response what the call spent: the input, cached,
// output and reasoning tokens of the OpenAI Chat Completions and
// Responses APIs and of Anthropic Messages, streamed or not.
//
// A route ties a base URL the gateway serves to one upstream base URL and
// one agent session: Route returns
// "http://127.0.0.1:PORT/r/TOKEN", and a request to that URL plus a path
// goes to the upstream plus the same path. TOKEN is random, so that one
// session cannot spend under another's route. Before a call is forwarded
// the route's Allow is asked (a budget with nothing left refuses it, and
// the agent gets HTTP 429 with the reason); after it, Record receives
// what it spent.
package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/eval"
)

// Call is one model call the gateway forwarded.
type Call struct {
	// Path is the request path below the route ("/chat/completions").
	Path string
	// Model is the request's "model" field, when it has one.
	Model string
	// Stream reports a server-sent event response.
	Stream bool
	// Status is the upstream's HTTP status, or 0 when it was not reached.
	Status int
	// Usage is what the response says the call spent (ModelCalls is 1).
	Usage eval.Usage
	// Latency is the time from the request to the response's end.
	Latency time.Duration
	// Attempts is how many times the call was sent (retries after 429
	// and 503 included); Waited is the time spent waiting between them.
	Attempts int
	Waited   time.Duration
	// Err is why the call failed, or nil.
	Err error
}

// Meter is what a route reports to: its session's budgets. Its methods
// may be called concurrently (calls of one session may overlap).
type Meter interface {
	// Allow is asked before a call is forwarded; an error refuses the
	// call, and its text is the HTTP 429 answer the agent gets.
	Allow() error
	// Charge receives what a call spent as the answer says it (a stream
	// may say it in parts: each Charge is the increase), before those
	// bytes are passed to the agent.
	Charge(model string, u eval.Usage)
	// Record receives each call once it has ended, with all it spent
	// (already charged).
	Record(Call)
}

// Options configure a gateway.
type Options struct {
	// Client forwards the calls; nil is a client without a timeout
	// (streams may last long) that does not follow redirects.
	Client *http.Client
	// Retry is how rate limits are handled; the zero value is
	// DefaultRetry.
	Retry Retry
}

// Retry is how the gateway handles an upstream's rate limit
// (eval.RateLimitRetry): a call answered 429 or 503 is sent again after
// Retry-After (seconds or an HTTP date) or, without one, an exponential
// backoff with full jitter, at most Attempts times in all and while the
// waits add up to no more than MaxWait; then the last answer reaches the
// agent. Retrying here, once, replaces the retries of each agent's own
// client, which would otherwise multiply (see the profiles'
// documentation).
type Retry = eval.RateLimitRetry

// DefaultRetry is the retry policy of a zero Retry: 5 tries, waits of
// at most 2 minutes in all, backoff from 1 s up to 30 s.
var DefaultRetry = eval.DefaultRateLimitRetry

// Gateway is a running gateway. It is safe for concurrent use.
type Gateway struct {
	ln     net.Listener
	srv    *http.Server
	client *http.Client
	retry  Retry
	base   string

	mu     sync.Mutex
	routes map[string]*route
	limits map[string]*limiter
	// groups are the limits of groups of routes (JoinGroup).
	groups map[string]*group
}

type route struct {
	upstream *url.URL
	meter    Meter
	// group names the route's group (RouteIn), or is "".
	group string
}

// Start starts a gateway on a loopback port.
func Start(o Options) (*Gateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	client := o.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	retry := o.Retry
	if retry == (Retry{}) {
		retry = DefaultRetry
	}
	retry.Attempts = max(retry.Attempts, 1)
	retry.MaxBackoff = max(retry.MaxBackoff, retry.Backoff)
	g := &Gateway{ln: ln, client: client, retry: retry, base: "http://" + ln.Addr().String(), routes: map[string]*route{}}
	g.srv = &http.Server{Handler: http.HandlerFunc(g.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// ServeSocket also serves the gateway on a unix socket named name in
// the directory dir (which a sandbox's processes see, read-only), for
// agents that cannot reach the host's loopback; the socket is
// world-writable (routes' tokens guard it) and removed by the returned
// function. The socket's mode is set through a handle on the directory,
// so a link planted in its place never makes the host chmod anything
// outside it.
func (g *Gateway) ServeSocket(dir, name string) (func(), error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	defer root.Close()
	path := filepath.Join(dir, name)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	if err := root.Chmod(name, 0o777); err != nil {
		ln.Close()
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	go func() { _ = g.srv.Serve(ln) }()
	return func() {
		ln.Close()
		_ = os.Remove(path)
	}, nil
}

// Close stops the gateway and the calls in flight.
func (g *Gateway) Close() error { return g.srv.Close() }

// Route registers a route to upstream (an absolute http or https base
// URL, such as "https://api.openai.com/v1") metered by m, and returns the
// base URL to give the agent instead, and the function that removes the
// route.
func (g *Gateway) Route(upstream string, m Meter) (string, func(), error) {
	return g.RouteIn("", upstream, m)
}

// RouteIn is Route for a route of group (see JoinGroup): while the group
// has members its calls are held by the group's rate limits instead of
// the gateway's own (SetLimits).
func (g *Gateway) RouteIn(group, upstream string, m Meter) (string, func(), error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, fmt.Errorf("model gateway: the upstream %q is not an http or https URL", upstream)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	token := hex.EncodeToString(b[:])
	g.mu.Lock()
	g.routes[token] = &route{upstream: u, meter: m, group: group}
	g.mu.Unlock()
	return g.base + "/r/" + token, func() {
		g.mu.Lock()
		delete(g.routes, token)
		g.mu.Unlock()
	}, nil
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/r/")
	if !ok {
		http.Error(w, "not a model gateway route", http.StatusNotFound)
		return
	}
	token, path, _ := strings.Cut(rest, "/")
	g.mu.Lock()
	rt := g.routes[token]
	g.mu.Unlock()
	if rt == nil {
		http.Error(w, "unknown or closed model gateway route", http.StatusNotFound)
		return
	}
	call := Call{Path: "/" + path}
	start := time.Now()
	defer func() {
		call.Latency = time.Since(start)
		rt.meter.Record(call)
	}()
	if err := rt.meter.Allow(); err != nil {
		call.Err = err
		writeRefusal(w, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		call.Err = err
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var head struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &head) == nil {
		call.Model = head.Model
	}
	if call.Model == "" {
		call.Model = pathModel(path)
	}
	target := *rt.upstream
	target.Path = rt.upstream.Path + "/" + path
	target.RawQuery = r.URL.RawQuery
	header := r.Header.Clone()
	for _, h := range hopHeaders {
		header.Del(h)
	}
	var m meter
	if lim := g.limiterFor(rt.upstream, rt.group); lim != nil {
		done, err := lim.acquire(r.Context())
		if err != nil {
			call.Err = err
			http.Error(w, "the call was cancelled while waiting for the upstream's rate limit", http.StatusServiceUnavailable)
			return
		}
		defer func() { done(m.usage().Tokens()) }()
	}
	resp, err := g.send(r.Context(), r.Method, target.String(), header, body, &call)
	if err != nil {
		call.Err = err
		// The upstream's address, never the headers: no credential.
		http.Error(w, fmt.Sprintf("the model gateway could not reach %s: %v", rt.upstream.Host, errors.Unwrap(err)), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	call.Status = resp.StatusCode
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	// What a call spent is charged as soon as the answer says it, before
	// those bytes reach the agent, so that the agent's next step never
	// runs ahead of its spend.
	m.charge = func(u eval.Usage) { rt.meter.Charge(call.Model, u) }
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		w.WriteHeader(resp.StatusCode)
		call.Stream = true
		call.Err = m.stream(w, resp.Body)
	} else {
		// A JSON answer is read whole (it is small) and metered first.
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode < 300 {
			m.event(b)
		}
		w.WriteHeader(resp.StatusCode)
		_, werr := w.Write(b)
		call.Err = errors.Join(err, werr)
	}
	call.Usage = m.usage()
	call.Usage.ModelCalls = 1
}

// send makes the call, and makes it again while the upstream answers 429
// or 503 and the retry policy allows: the answer it returns is the last.
func (g *Gateway) send(ctx context.Context, method, target string, header http.Header, body []byte, call *Call) (*http.Response, error) {
	var waited time.Duration
	g.mu.Lock()
	policy := g.retry
	g.mu.Unlock()
	backoff := policy.Backoff
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = header.Clone()
		call.Attempts = attempt
		resp, err := g.client.Do(req)
		if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) || attempt >= policy.Attempts {
			return resp, err
		}
		delay, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			delay = time.Duration(mrand.Int64N(int64(backoff) + 1)) // full jitter
			backoff = min(2*backoff, policy.MaxBackoff)
		}
		if waited+delay > policy.MaxWait {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		waited += delay
		call.Waited = waited
	}
}

// SetRetry sets how rate limits are retried (the zero fields of r are
// DefaultRetry's); calls in flight keep the policy they started under.
func (g *Gateway) SetRetry(r Retry) error {
	if err := r.Validate(); err != nil {
		return err
	}
	r = r.WithDefaults()
	g.mu.Lock()
	g.retry = r
	g.mu.Unlock()
	return nil
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 1<<31)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// writeRefusal answers a refused call as OpenAI and Anthropic clients
// read an error: HTTP 429 with {"error": {"message", "type"}}. No
// Retry-After: waiting does not refill a budget.
func writeRefusal(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"message": "AML budget: " + err.Error(), "type": "budget_exceeded", "code": "budget_exceeded"}})
	_, _ = w.Write(b)
}

// meter reads usage from a response: the largest value seen of each
// field, since a stream may report running totals (Anthropic's
// message_delta) or the total once (OpenAI's last chunk).
type meter struct {
	input, cacheRead, cacheWrite, output, reasoning int64
	// anthropic says the input count leaves the cached tokens out.
	anthropic bool
	// charge receives each increase of the usage; charged is what it
	// received so far.
	charge  func(eval.Usage)
	charged eval.Usage
}

// flush charges what the usage grew by since the last charge.
func (m *meter) flush() {
	if m.charge == nil {
		return
	}
	u := m.usage()
	d := eval.Usage{InputTokens: u.InputTokens - m.charged.InputTokens, OutputTokens: u.OutputTokens - m.charged.OutputTokens,
		CachedInputTokens: u.CachedInputTokens - m.charged.CachedInputTokens, ReasoningTokens: u.ReasoningTokens - m.charged.ReasoningTokens}
	if d.IsZero() && d.CachedInputTokens == 0 && d.ReasoningTokens == 0 {
		return
	}
	m.charged = u
	m.charge(d)
}

// stream copies server-sent events to w as they come, flushing after
// each line, and reads every data line's usage.
func (m *meter) stream(w http.ResponseWriter, body io.Reader) error {
	flusher, _ := w.(http.Flusher)
	br := bufio.NewReaderSize(body, 16<<10)
	long := false // inside a line longer than the buffer, passed on in pieces
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			complete := line[len(line)-1] == '\n'
			if complete && !long {
				if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
					m.event(bytes.TrimSpace(data))
				}
			}
			if _, werr := w.Write(line); werr != nil {
				return werr
			}
			if complete {
				long = false
				if flusher != nil {
					flusher.Flush()
				}
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			long = true
		case errors.Is(err, io.EOF):
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		case err != nil:
			return err
		}
	}
}

// usageFields are the usage objects' fields the gateway reads, in the
// wire APIs' names.
type usageFields struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadInput      int64 `json:"cache_read_input_tokens"`
	CacheCreationInput  int64 `json:"cache_creation_input_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// pathModel is the model a Gemini API path names
// (".../models/MODEL:generateContent"), "" for another path.
func pathModel(path string) string {
	i := strings.LastIndex(path, "models/")
	if i < 0 {
		return ""
	}
	model, _, ok := strings.Cut(path[i+len("models/"):], ":")
	if !ok || strings.Contains(model, "/") {
		return ""
	}
	return model
}

// geminiUsage is the usageMetadata of Gemini's GenerateContentResponse.
type geminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
}

// event reads the usage of one JSON body or event: a top-level "usage"
// (Chat Completions, Responses, Anthropic message_delta), or one inside
// "response" (the Responses API's response.completed) or "message"
// (Anthropic's message_start), or Gemini's "usageMetadata" (whose
// streams without alt=sse are one JSON array of responses).
func (m *meter) event(b []byte) {
	if len(b) > 0 && b[0] == '[' && bytes.Contains(b, []byte(`"usageMetadata"`)) {
		var list []json.RawMessage
		if json.Unmarshal(b, &list) == nil {
			for _, item := range list {
				m.event(item)
			}
		}
		return
	}
	if len(b) > 0 && b[0] == '{' && bytes.Contains(b, []byte(`"usageMetadata"`)) {
		var ev struct {
			UsageMetadata *geminiUsage `json:"usageMetadata"`
		}
		if json.Unmarshal(b, &ev) == nil && ev.UsageMetadata != nil {
			u := ev.UsageMetadata
			// Gemini counts cached tokens inside the prompt's, and the
			// thoughts apart from the candidates'.
			m.input = max(m.input, u.PromptTokenCount+u.ToolUsePromptTokenCount)
			m.cacheRead = max(m.cacheRead, u.CachedContentTokenCount)
			m.output = max(m.output, u.CandidatesTokenCount+u.ThoughtsTokenCount)
			m.reasoning = max(m.reasoning, u.ThoughtsTokenCount)
			m.flush()
		}
		return
	}
	if len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(`"usage"`)) {
		return
	}
	var ev struct {
		Type     string       `json:"type"`
		Usage    *usageFields `json:"usage"`
		Response *struct {
			Usage *usageFields `json:"usage"`
		} `json:"response"`
		Message *struct {
			Usage *usageFields `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(b, &ev) != nil {
		return
	}
	if strings.HasPrefix(ev.Type, "message") || ev.Type == "content_block_delta" {
		m.anthropic = true
	}
	for _, u := range []*usageFields{ev.Usage, responseUsage(ev.Response), messageUsage(ev.Message)} {
		if u == nil {
			continue
		}
		if u.CacheReadInput > 0 || u.CacheCreationInput > 0 {
			m.anthropic = true
		}
		m.input = max(m.input, u.PromptTokens, u.InputTokens)
		m.output = max(m.output, u.CompletionTokens, u.OutputTokens)
		m.cacheRead = max(m.cacheRead, u.PromptTokensDetails.CachedTokens, u.InputTokensDetails.CachedTokens, u.CacheReadInput)
		m.cacheWrite = max(m.cacheWrite, u.CacheCreationInput)
		m.reasoning = max(m.reasoning, u.CompletionTokensDetails.ReasoningTokens, u.OutputTokensDetails.ReasoningTokens)
	}
	m.flush()
}

func responseUsage(r *struct {
	Usage *usageFields `json:"usage"`
}) *usageFields {
	if r == nil {
		return nil
	}
	return r.Usage
}

func messageUsage(r *struct {
	Usage *usageFields `json:"usage"`
}) *usageFields {
	if r == nil {
		return nil
	}
	return r.Usage
}

// usage is what the response said, in AML's terms: input includes cached
// tokens (Anthropic counts them apart), output includes reasoning.
func (m *meter) usage() eval.Usage {
	u := eval.Usage{InputTokens: m.input, OutputTokens: m.output, CachedInputTokens: m.cacheRead, ReasoningTokens: m.reasoning}
	if m.anthropic {
		u.InputTokens += m.cacheRead + m.cacheWrite
	}
	return u
}

// shared is the process's gateway, started on first use.
var shared struct {
	once sync.Once
	g    *Gateway
	err  error
}

// Shared returns the process's gateway, starting it on first use; it
// lives as long as the process. Runs share it: each session has routes
// of its own.
func Shared() (*Gateway, error) {
	shared.once.Do(func() { shared.g, shared.err = Start(Options{}) })
	return shared.g, shared.err
}
