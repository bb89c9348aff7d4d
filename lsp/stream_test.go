package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// rawSession runs a server over net.Pipe and gives the test the raw
// client end: what it writes is sent as is.
type rawSession struct {
	t    *testing.T
	conn net.Conn
	in   *stream
	done chan error
}

func startRaw(t *testing.T) *rawSession {
	t.Helper()
	a, b := net.Pipe()
	r := &rawSession{t: t, conn: b, in: newStream(b), done: make(chan error, 1)}
	go func() { r.done <- Serve(context.Background(), a, Options{}) }()
	t.Cleanup(func() {
		_ = b.Close()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Errorf("the server did not end")
		}
	})
	return r
}

// send writes bytes in the background (net.Pipe blocks until read).
func (r *rawSession) send(s string) {
	go func() { _, _ = r.conn.Write([]byte(s)) }()
}

func frame(body string) string {
	return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

// next reads the server's next message.
func (r *rawSession) next() map[string]any {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	data, _, err := r.in.readFrame()
	if err != nil {
		r.t.Fatalf("reading the server's reply: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		r.t.Fatalf("the server's reply %q: %v", data, err)
	}
	return m
}

// wait returns Serve's result.
func (r *rawSession) wait() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		r.t.Fatal("the server hangs")
		return nil
	}
}

// TestFramingMalformedJSON: a body that is not JSON gets a parse error
// with id null, and the next request is still answered.
func TestFramingMalformedJSON(t *testing.T) {
	r := startRaw(t)
	r.send(frame(`{"jsonrpc":"2.0","id":1,"method":`))
	m := r.next()
	e, _ := m["error"].(map[string]any)
	if id, ok := m["id"]; !ok || id != nil || e == nil || e["code"] != float64(-32700) {
		t.Fatalf("reply to malformed JSON = %v, want a parse error (-32700) with id null", m)
	}
	r.send(frame(`{"jsonrpc":"2.0"}`))
	if m := r.next(); m["error"].(map[string]any)["code"] != float64(-32600) {
		t.Fatalf("reply to a message that is neither request nor response = %v, want -32600", m)
	}
	r.send(frame(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"capabilities":{}}}`))
	m = r.next()
	if m["id"] != float64(2) || m["result"] == nil {
		t.Fatalf("initialize after malformed JSON = %v", m)
	}
}

// TestFramingFatal: a header the server cannot use, a Content-Length
// over the limit and a body cut short by EOF each end Serve with an
// error that says what was wrong, instead of a hang.
func TestFramingFatal(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
		eof               bool
	}{
		{"bad header", "Content-Lenght 12\r\n\r\n{}", `bad header line "Content-Lenght 12"`, false},
		{"bad length", "Content-Length: twelve\r\n\r\n{}", `bad Content-Length "twelve"`, false},
		{"no length", "Content-Type: application/json\r\n\r\n{}", "no Content-Length", false},
		{"oversized", "Content-Length: 999999999999\r\n\r\n{}", "over the limit of 67108864 bytes", false},
		{"short body", "Content-Length: 100\r\n\r\n{\"jsonrpc\":\"2.0\"}", "the stream ended after 17 of the 100 bytes", true},
		{"long header", "X-Junk: " + strings.Repeat("j", 10000), "header line longer than 4096 bytes", false},
		{"cut header", "Content-Length: 10\r\n", "the stream ended inside a message header", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRaw(t)
			if _, err := r.conn.Write([]byte(tc.input)); err != nil && !tc.eof {
				t.Logf("write: %v", err)
			}
			if tc.eof {
				_ = r.conn.Close()
			}
			err := r.wait()
			var ferr *FramingError
			if err == nil || !errors.As(err, &ferr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve = %v, want a framing error containing %q", err, tc.want)
			}
		})
	}
}
