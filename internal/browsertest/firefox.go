package browsertest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Firefox is one tab of a fresh headless Firefox, driven over WebDriver
// BiDi (the protocol Firefox speaks natively). Its profile sends every
// HTTP and HTTPS request to a closed local port, so the network is off;
// it records every request the page makes and every error it logs. Its
// methods are safe for concurrent use.
type Firefox struct {
	conn    *websocket.Conn
	ctx     context.Context
	context string // the tab's browsing context

	recorder // mu also guards next and pending
	next     int
	pending  map[int]chan bidiReply
}

type bidiReply struct {
	Type    string          `json:"type"`
	ID      int             `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// FirefoxPath returns the Firefox to test with ($AML_FIREFOX, else
// firefox-esr or firefox on PATH), or skips the test saying how to
// install it.
func FirefoxPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AML_FIREFOX"); p != "" {
		return p
	}
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("firefox not found: install it with `apt-get install firefox-esr` (or set AML_FIREFOX)")
	return ""
}

// firefoxPrefs keep a test profile quiet and offline.
const firefoxPrefs = `user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("app.update.enabled", false);
user_pref("app.update.auto", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("toolkit.telemetry.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("browser.safebrowsing.downloads.enabled", false);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
user_pref("extensions.update.enabled", false);
user_pref("browser.newtabpage.enabled", false);
user_pref("network.dns.disablePrefetch", true);
user_pref("network.prefetch-next", false);
user_pref("network.proxy.type", 1);
user_pref("network.proxy.http", "127.0.0.1");
user_pref("network.proxy.http_port", 9);
user_pref("network.proxy.ssl", "127.0.0.1");
user_pref("network.proxy.ssl_port", 9);
user_pref("network.proxy.no_proxies_on", "");
user_pref("network.proxy.allow_hijacking_localhost", true);
`

var bidiListening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// NewFirefox starts Firefox with a fresh profile and returns its tab; the
// browser ends with the test.
func NewFirefox(t testing.TB) *Firefox {
	t.Helper()
	path := FirefoxPath(t)
	profile := t.TempDir()
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(firefoxPrefs), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, path, "--headless", "--no-remote", "--profile", profile, "--remote-debugging-port=0", "about:blank")
	cmd.Env = append(os.Environ(), "MOZ_CRASHREPORTER_DISABLE=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := bidiListening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
	}()
	var ws string
	select {
	case ws = <-addr:
	case <-ctx.Done():
		t.Fatalf("%s did not start its WebDriver BiDi server: %v", path, ctx.Err())
	}
	conn, _, err := websocket.Dial(ctx, ws+"/session", nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", ws, err)
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	f := &Firefox{conn: conn, ctx: ctx, pending: map[int]chan bidiReply{}}
	go f.read()
	f.call(t, "session.new", map[string]any{"capabilities": map[string]any{}})
	f.call(t, "session.subscribe", map[string]any{"events": []string{"log.entryAdded", "network.beforeRequestSent"}})
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := json.Unmarshal(f.call(t, "browsingContext.getTree", map[string]any{}), &tree); err != nil || len(tree.Contexts) == 0 {
		t.Fatalf("no browsing context: %v", err)
	}
	f.context = tree.Contexts[0].Context
	return f
}

// read dispatches replies to their callers and records events.
func (f *Firefox) read() {
	for {
		_, b, err := f.conn.Read(f.ctx)
		if err != nil {
			f.mu.Lock()
			for id, ch := range f.pending {
				ch <- bidiReply{Type: "error", Error: "connection", Message: err.Error()}
				delete(f.pending, id)
			}
			f.mu.Unlock()
			return
		}
		var r bidiReply
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		f.mu.Lock()
		switch {
		case r.Type == "event":
			f.event(r.Method, r.Params)
		case f.pending[r.ID] != nil:
			f.pending[r.ID] <- r
			delete(f.pending, r.ID)
		}
		f.mu.Unlock()
	}
}

// event records a BiDi event. f.mu is held.
func (f *Firefox) event(method string, params json.RawMessage) {
	switch method {
	case "network.beforeRequestSent":
		var p struct {
			Request struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		if json.Unmarshal(params, &p) == nil {
			f.requests = append(f.requests, p.Request.URL)
		}
	case "log.entryAdded":
		var p struct {
			Level      string `json:"level"`
			Type       string `json:"type"`
			Text       string `json:"text"`
			StackTrace *struct {
				CallFrames []struct {
					URL        string `json:"url"`
					LineNumber int    `json:"lineNumber"`
				} `json:"callFrames"`
			} `json:"stackTrace"`
		}
		if json.Unmarshal(params, &p) == nil && p.Level == "error" {
			where := ""
			if p.StackTrace != nil && len(p.StackTrace.CallFrames) > 0 {
				c := p.StackTrace.CallFrames[0]
				where = fmt.Sprintf(" at %s:%d", c.URL, c.LineNumber+1)
			}
			f.problems = append(f.problems, fmt.Sprintf("%s error%s: %s", p.Type, where, p.Text))
		}
	}
}

// call sends a BiDi command and returns its result; an error fails t.
func (f *Firefox) call(t testing.TB, method string, params any) json.RawMessage {
	t.Helper()
	f.mu.Lock()
	f.next++
	id := f.next
	ch := make(chan bidiReply, 1)
	f.pending[id] = ch
	f.mu.Unlock()
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.conn.Write(f.ctx, websocket.MessageText, msg); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r.Type == "error" || r.Error != "" {
			t.Fatalf("%s: %s: %s", method, r.Error, r.Message)
		}
		return r.Result
	case <-f.ctx.Done():
		t.Fatalf("%s: %v", method, f.ctx.Err())
	}
	return nil
}

// FirefoxEval evaluates expr in the page and returns its value, passed
// through JSON.
func FirefoxEval[T any](t testing.TB, f *Firefox, expr string) T {
	t.Helper()
	res := f.call(t, "script.evaluate", map[string]any{
		"expression":   "JSON.stringify(" + expr + ")",
		"target":       map[string]any{"context": f.context},
		"awaitPromise": true,
	})
	var r struct {
		Type             string `json:"type"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
		Result struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"result"`
	}
	var v T
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	if r.Type == "exception" {
		text := ""
		if r.ExceptionDetails != nil {
			text = r.ExceptionDetails.Text
		}
		t.Fatalf("evaluating %s: %s", expr, text)
	}
	if err := json.Unmarshal([]byte(r.Result.Value), &v); err != nil {
		t.Fatalf("evaluating %s: %v (%q)", expr, err, r.Result.Value)
	}
	return v
}

// Open loads file and waits until the page has rendered (it sets
// document.body.dataset.ready to "1"); it returns the time from the
// start of the navigation to the rendered page. Any error the page
// logged, and any request other than the file, fails the test.
func (f *Firefox) Open(t testing.TB, file string) time.Duration {
	t.Helper()
	u := (&url.URL{Scheme: "file", Path: file}).String()
	start := time.Now()
	f.call(t, "browsingContext.navigate", map[string]any{"context": f.context, "url": u, "wait": "complete"})
	for !FirefoxEval[bool](t, f, `!!(document.body && document.body.dataset.ready === "1")`) {
		if len(f.Errors()) > 0 || f.ctx.Err() != nil {
			t.Fatalf("the page did not render: %q", f.Errors())
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	f.Check(t, u)
	return took
}

// Screenshot saves a PNG of the tab as a test artifact (see
// Page.Screenshot).
func (f *Firefox) Screenshot(t testing.TB, name string) {
	t.Helper()
	res := f.call(t, "browsingContext.captureScreenshot", map[string]any{"context": f.context, "origin": "document"})
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	saveArtifact(t, name, png)
}
