package gateway_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/gateway"
	"github.com/aml-go/aml/internal/fakemodel"
)

// recorder is a Meter that allows every call unless refuse is set, and
// keeps the calls.
type recorder struct {
	mu      sync.Mutex
	calls   []gateway.Call
	charged eval.Usage
	refuse  error
}

func (r *recorder) Allow() error { return r.refuse }

func (r *recorder) Charge(_ string, u eval.Usage) {
	r.mu.Lock()
	r.charged = r.charged.Add(u)
	r.mu.Unlock()
}

func (r *recorder) Record(c gateway.Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) all() []gateway.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// wait returns the calls once n were recorded: a call is recorded when
// the gateway's handler returns, which may be after its client read the
// answer's end.
func (r *recorder) wait(t *testing.T, n int) []gateway.Call {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		calls := r.all()
		if len(calls) >= n || time.Now().After(deadline) {
			return calls
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func start(t *testing.T) *gateway.Gateway {
	t.Helper()
	g, err := gateway.Start(gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func route(t *testing.T, g *gateway.Gateway, upstream string, m gateway.Meter) string {
	t.Helper()
	base, remove, err := g.Route(upstream, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return base
}

func post(t *testing.T, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestOpenAIThroughTheGateway: chat completions and Responses calls,
// streamed and not, reach the fake model unchanged through a route, come
// back as the model sent them, and are metered with the usage the model
// reported.
func TestOpenAIThroughTheGateway(t *testing.T) {
	model := fakemodel.Start(nil)
	defer model.Close()
	g := start(t)
	m := &recorder{}
	base := route(t, g, model.URL, m)
	for _, tc := range []struct{ path, body string }{
		{"/chat/completions", `{"model": "m1", "messages": [{"role": "user", "content": "hello"}]}`},
		{"/chat/completions", `{"model": "m1", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hello"}]}`},
		{"/responses", `{"model": "m2", "input": "hello"}`},
		{"/responses", `{"model": "m2", "stream": true, "input": "hello"}`},
	} {
		resp, body := post(t, base+tc.path, tc.body, "Authorization", "Bearer sk-secret")
		if resp.StatusCode != 200 || !strings.Contains(body, "FAKE-REP") {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
	}
	calls := m.wait(t, 4)
	if len(calls) != 4 || len(model.Requests()) != 4 {
		t.Fatalf("%d calls metered, %d reached the model; want 4 and 4", len(calls), len(model.Requests()))
	}
	for i, c := range calls {
		if c.Usage != (eval.Usage{InputTokens: 10, OutputTokens: 5, ModelCalls: 1}) || c.Status != 200 || c.Err != nil {
			t.Errorf("call %d (%s, stream %v): %+v", i, c.Path, c.Stream, c)
		}
		if want := i%2 == 1; c.Stream != want {
			t.Errorf("call %d: stream %v, want %v", i, c.Stream, want)
		}
		if strings.Contains(fmt.Sprintf("%+v", c), "sk-secret") {
			t.Errorf("call %d records the credential", i)
		}
	}
	if calls[0].Model != "m1" || calls[2].Model != "m2" || calls[0].Path != "/chat/completions" {
		t.Errorf("calls: %+v", calls)
	}
}

// TestStreamsPassThrough: each event reaches the agent while the upstream
// is still streaming, not when it ends.
func TestStreamsPassThrough(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"first\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n")
	}))
	defer upstream.Close()
	g := start(t)
	m := &recorder{}
	base := route(t, g, upstream.URL+"/v1", m)
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(`{"model":"s","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.Contains(line, "first") {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the first event did not come through before the stream ended")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("rest of the stream: %q", rest)
	}
	resp.Body.Close()
	if calls := m.wait(t, 1); len(calls) != 1 || calls[0].Usage != (eval.Usage{InputTokens: 7, OutputTokens: 3, ModelCalls: 1}) {
		t.Fatalf("metered %+v", calls)
	}
}

// TestAnthropicMessages: Anthropic counts cached input apart from
// input_tokens and reports output as a running total; the gateway counts
// every input token once and the last total.
func TestAnthropicMessages(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "sk-ant" || r.URL.Path != "/v1/messages" || r.URL.RawQuery != "beta=true" {
			http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":100,"cache_read_input_tokens":50,"cache_creation_input_tokens":10,"output_tokens":1}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20}}`,
			`{"type":"message_stop"}`,
		} {
			fmt.Fprintf(w, "event: x\ndata: %s\n\n", ev)
		}
	}))
	defer upstream.Close()
	g := start(t)
	m := &recorder{}
	base := route(t, g, upstream.URL+"/v1/", m)
	resp, body := post(t, base+"/messages?beta=true", `{"model":"claude-x","stream":true}`, "X-Api-Key", "sk-ant")
	if resp.StatusCode != 200 || !strings.Contains(body, "message_stop") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// Charged in parts as the stream said it, before the agent read the
	// end: input with message_start, output with message_delta.
	m.mu.Lock()
	charged := m.charged
	m.mu.Unlock()
	if charged != (eval.Usage{InputTokens: 160, CachedInputTokens: 50, OutputTokens: 20}) {
		t.Fatalf("charged %+v before the answer ended", charged)
	}
	calls := m.wait(t, 1)
	want := eval.Usage{InputTokens: 160, CachedInputTokens: 50, OutputTokens: 20, ModelCalls: 1}
	if len(calls) != 1 || calls[0].Usage != want || calls[0].Model != "claude-x" {
		t.Fatalf("metered %+v, want %+v", calls, want)
	}
}

// TestRefusedCallNeverLeaves: a call its meter refuses gets HTTP 429 with
// the reason, and the upstream never sees it.
func TestRefusedCallNeverLeaves(t *testing.T) {
	model := fakemodel.Start(nil)
	defer model.Close()
	g := start(t)
	m := &recorder{refuse: errors.New("the run's tokens budget is used up")}
	base := route(t, g, model.URL, m)
	resp, body := post(t, base+"/chat/completions", `{"model":"m","messages":[]}`)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "AML budget: the run's tokens budget is used up") || len(model.Requests()) != 0 {
		t.Fatalf("%d %s; %d requests reached the model", resp.StatusCode, body, len(model.Requests()))
	}
	if calls := m.wait(t, 1); len(calls) != 1 || calls[0].Err == nil || calls[0].Usage.ModelCalls != 0 {
		t.Fatalf("recorded %+v", calls)
	}
}

// TestRoutesAndFailures: an unknown or removed route is refused, an
// upstream that is not a URL is refused, and an unreachable upstream is a
// 502 that names its host but no header.
func TestRoutesAndFailures(t *testing.T) {
	g := start(t)
	m := &recorder{}
	base, remove, err := g.Route("http://127.0.0.1:1/v1", m)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := post(t, base+"/chat/completions", `{}`, "Authorization", "Bearer sk-secret")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not reach 127.0.0.1:1") || strings.Contains(body, "sk-secret") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	remove()
	if resp, _ := post(t, base+"/chat/completions", `{}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a removed route answered %d", resp.StatusCode)
	}
	if resp, _ := post(t, strings.Replace(base, "/r/", "/x/", 1)+"/chat", `{}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a path outside the routes answered %d", resp.StatusCode)
	}
	for _, bad := range []string{"", "ftp://x/v1", "localhost:8080", "http://"} {
		if _, _, err := g.Route(bad, m); err == nil {
			t.Errorf("upstream %q accepted", bad)
		}
	}
}

// TestAnthropicThroughTheGateway: Messages API calls to the fake model,
// streamed and not, come back as the model sent them and are metered with
// the usage it reported (message_start's input, message_delta's output).
func TestAnthropicThroughTheGateway(t *testing.T) {
	model := fakemodel.Start(nil)
	defer model.Close()
	g := start(t)
	m := &recorder{}
	base := route(t, g, model.AnthropicURL, m)
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model": "claude-x", "max_tokens": 64, "stream": %v, "messages": [{"role": "user", "content": "hello"}]}`, stream)
		resp, out := post(t, base+"/v1/messages", body, "X-Api-Key", "sk-ant")
		if resp.StatusCode != 200 || !strings.Contains(out, "FAKE-REP") {
			t.Fatalf("stream %v: %d %s", stream, resp.StatusCode, out)
		}
	}
	calls := m.wait(t, 2)
	for i, c := range calls {
		if c.Usage != (eval.Usage{InputTokens: 10, OutputTokens: 5, ModelCalls: 1}) || c.Model != "claude-x" || c.Stream != (i == 1) {
			t.Errorf("call %d: %+v", i, c)
		}
	}
}

// TestGeminiThroughTheGateway: Gemini's generateContent and its stream,
// over server-sent events and as a JSON array, are metered from their
// usageMetadata, with the model the path names.
func TestGeminiThroughTheGateway(t *testing.T) {
	model := fakemodel.Start(nil)
	defer model.Close()
	g := start(t)
	m := &recorder{}
	base := route(t, g, model.GeminiURL, m)
	body := `{"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}`
	for _, path := range []string{":generateContent", ":streamGenerateContent?alt=sse", ":streamGenerateContent"} {
		resp, out := post(t, base+"/v1beta/models/gemini-x"+path, body, "X-Goog-Api-Key", "g-key")
		if resp.StatusCode != 200 || !strings.Contains(out, "FAKE-REP") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, out)
		}
	}
	calls := m.wait(t, 3)
	for i, c := range calls {
		if c.Usage != (eval.Usage{InputTokens: 10, OutputTokens: 5, ModelCalls: 1}) || c.Model != "gemini-x" || c.Stream != (i == 1) {
			t.Errorf("call %d: %+v", i, c)
		}
	}
}

// TestGeminiUsageFields: cached tokens are part of the input, and the
// thoughts are output and reasoning.
func TestGeminiUsageFields(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"candidates":[],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":40,"candidatesTokenCount":20,"thoughtsTokenCount":7,"totalTokenCount":127}}`)
	}))
	defer upstream.Close()
	g := start(t)
	m := &recorder{}
	base := route(t, g, upstream.URL, m)
	if resp, out := post(t, base+"/v1beta/models/gemini-y:generateContent", `{}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	calls := m.wait(t, 1)
	want := eval.Usage{InputTokens: 100, CachedInputTokens: 40, OutputTokens: 27, ReasoningTokens: 7, ModelCalls: 1}
	if calls[0].Usage != want || calls[0].Model != "gemini-y" {
		t.Fatalf("metered %+v, want %+v", calls[0], want)
	}
}
