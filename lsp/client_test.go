package lsp

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis/buildlint"
)

// client is an in-process LSP client connected to a server over
// net.Pipe, speaking the real protocol through jsonrpc2.
type client struct {
	t    testing.TB
	conn jsonrpc2.Conn
	done chan error

	mu    sync.Mutex
	diags map[protocol.DocumentURI]*protocol.PublishDiagnosticsParams
	// published are the versions of every publication, in order.
	published map[protocol.DocumentURI][]int32
	// registrations are the params of client/registerCapability.
	registrations []json.RawMessage
	// wake is closed and replaced whenever diagnostics arrive.
	wake chan struct{}
}

// startClient starts a server and connects a client to it; the test's
// cleanup checks that the server ends.
func startClient(t testing.TB, opts Options) *client {
	t.Helper()
	if opts.Lint == nil {
		opts.Lint = buildlint.Findings // as aml serves it
	}
	a, b := net.Pipe()
	c := &client{t: t, done: make(chan error, 1), diags: map[protocol.DocumentURI]*protocol.PublishDiagnosticsParams{}, wake: make(chan struct{})}
	go func() { c.done <- Serve(context.Background(), a, opts) }()
	c.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(b))
	c.conn.Go(context.Background(), c.handleServer)
	t.Cleanup(func() {
		_ = c.conn.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Errorf("the server did not end after its connection closed")
		}
	})
	return c
}

// handleServer handles the server's messages to the client: it keeps
// the diagnostics.
func (c *client) handleServer(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	if req.Method() == protocol.MethodClientRegisterCapability {
		c.mu.Lock()
		c.registrations = append(c.registrations, req.Params())
		close(c.wake)
		c.wake = make(chan struct{})
		c.mu.Unlock()
	}
	if req.Method() == protocol.MethodTextDocumentPublishDiagnostics {
		var p protocol.PublishDiagnosticsParams
		if err := json.Unmarshal(req.Params(), &p); err != nil {
			c.t.Errorf("publishDiagnostics: %v", err)
		}
		c.mu.Lock()
		c.diags[p.URI] = &p
		if c.published == nil {
			c.published = map[protocol.DocumentURI][]int32{}
		}
		c.published[p.URI] = append(c.published[p.URI], int32(p.Version))
		close(c.wake)
		c.wake = make(chan struct{})
		c.mu.Unlock()
	}
	return reply(ctx, nil, nil)
}

// call sends a request and decodes its result; it returns the error
// reply, if any.
func (c *client) call(method string, params, result any) error {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

func (c *client) mustCall(method string, params, result any) {
	c.t.Helper()
	if err := c.call(method, params, result); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	if err := c.conn.Notify(context.Background(), method, params); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// initialize runs the handshake with a workspace root; utf8 offers
// UTF-8 positions.
func (c *client) initialize(root string, utf8 bool) map[string]any {
	c.t.Helper()
	params := map[string]any{
		"processId":    os.Getpid(),
		"rootUri":      fileURI(root),
		"capabilities": map[string]any{},
	}
	if utf8 {
		params["capabilities"] = map[string]any{"general": map[string]any{"positionEncodings": []string{"utf-8", "utf-16"}}}
	}
	var res map[string]any
	c.mustCall(protocol.MethodInitialize, params, &res)
	c.notify(protocol.MethodInitialized, map[string]any{})
	return res
}

func (c *client) open(path, text string) protocol.DocumentURI {
	c.t.Helper()
	u := fileURI(path)
	c.notify(protocol.MethodTextDocumentDidOpen, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{URI: u, LanguageID: "starlark", Version: 1, Text: text}})
	return u
}

// diagnostics waits for the diagnostics of a document's version.
func (c *client) diagnostics(u protocol.DocumentURI, version int32) []protocol.Diagnostic {
	c.t.Helper()
	return c.diagnosticsWithin(u, version, 20*time.Second)
}

// diagnosticsWithin waits up to d for the diagnostics of a version.
func (c *client) diagnosticsWithin(u protocol.DocumentURI, version int32, d time.Duration) []protocol.Diagnostic {
	c.t.Helper()
	deadline := time.After(d)
	for {
		c.mu.Lock()
		p, wake := c.diags[u], c.wake
		c.mu.Unlock()
		if p != nil && int32(p.Version) == version {
			return p.Diagnostics
		}
		select {
		case <-wake:
		case <-deadline:
			c.t.Fatalf("no diagnostics for %s version %d", u, version)
		}
	}
}

// publishedAfter waits for a publication of a document's diagnostics
// beyond the first n and returns them.
func (c *client) publishedAfter(u protocol.DocumentURI, n int) []protocol.Diagnostic {
	c.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		got, p, wake := len(c.published[u]), c.diags[u], c.wake
		c.mu.Unlock()
		if got > n {
			return p.Diagnostics
		}
		select {
		case <-wake:
		case <-deadline:
			c.t.Fatalf("no new diagnostics for %s", u)
		}
	}
}

// publications is how many times a document's diagnostics were published.
func (c *client) publications(u protocol.DocumentURI) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.published[u])
}

func (c *client) shutdown() {
	c.t.Helper()
	c.mustCall(protocol.MethodShutdown, nil, nil)
	c.notify(protocol.MethodExit, nil)
	select {
	case err := <-c.done:
		if err != nil {
			c.t.Errorf("the server ended with %v after shutdown and exit", err)
		}
		c.done <- nil
	case <-time.After(10 * time.Second):
		c.t.Fatalf("the server did not end after exit")
	}
}

// writeFiles writes files (name -> content) below a new directory.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
