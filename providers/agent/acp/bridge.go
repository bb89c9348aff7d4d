package acp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aml-go/aml/eval"
)

// SubmitToolName is the bridge tool through which an agent submits its
// structured result. A Starlark tool may not use it.
const SubmitToolName = "aml_submit_result"

// submitInstruction is appended to a schema-bearing final turn.
const submitInstruction = "Call " + SubmitToolName + " once with the final value in its result field. If the Tool returns an error, correct the result and retry the call. After the Tool accepts a result, do not call it again. Do not return a substitute JSON value only as message text."

// maxBridgeBody bounds one request to the bridge.
const maxBridgeBody = 4 << 20

// bridge is the invocation-scoped MCP server that carries an agent's
// Starlark tools and the structured-result submission tool. It listens on
// a loopback port and accepts only requests to /mcp that carry its
// per-invocation bearer secret. Its methods are safe for concurrent use.
type bridge struct {
	name   string
	secret string
	url    string
	ln     net.Listener
	srv    *http.Server
	served chan struct{}
	// guestURL is the unix socket address of the bridge as a sandbox's
	// processes see it (listenShared), or "".
	guestURL   string
	socket     string // its host path
	guestServe chan struct{}

	s      *session
	output *eval.OutputRequest

	mu       sync.Mutex
	turnCtx  context.Context // the running turn, or nil between turns
	final    bool            // the running turn is the final authored one
	calls    int
	accepted bool
	result   any
}

// startBridge starts the bridge for s, named name.
func startBridge(s *session, name string) (_ *bridge, err error) {
	b := &bridge{name: name, s: s, served: make(chan struct{})}
	b.output = s.req.Output
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("creating the bridge secret: %w", err)
	}
	b.secret = hex.EncodeToString(raw[:])

	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: s.p.cfg.ClientVersion}, nil)
	for _, t := range s.req.Tools {
		schema := maps.Clone(t.InputSchema)
		if schema == nil {
			schema = map[string]any{}
		}
		if _, ok := schema["type"]; !ok {
			schema["type"] = "object"
		}
		server.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: schema}, b.toolHandler(t))
	}
	if b.output != nil {
		server.AddTool(&mcp.Tool{
			Name:        SubmitToolName,
			Description: "Submit the final structured result of this task in the result field.",
			InputSchema: map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"result": s.req.Output.JSONSchema},
				"required":             []any{"result"},
				"additionalProperties": false,
			},
		}, b.submit)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: maxBridgeBody})

	b.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the tool bridge on loopback: %w", err)
	}
	b.url = "http://" + b.ln.Addr().String() + "/mcp"
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		want := []byte("Bearer " + b.secret)
		if subtle.ConstantTimeCompare(got, want) != 1 {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		handler.ServeHTTP(w, r)
	})
	// A connection may not idle or dawdle over its request: an agent's
	// client sends one request at a time, and a tool call's handler time
	// is not bounded here (no write timeout).
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: bridgeHeaderTimeout, ReadTimeout: bridgeReadTimeout, IdleTimeout: bridgeIdleTimeout}
	go func() {
		defer close(b.served)
		_ = b.srv.Serve(b.ln)
	}()
	return b, nil
}

// listenShared also serves the bridge on a unix socket in host, a
// directory a sandbox's processes see at guest, for agents in sandboxes
// that cannot reach the host's loopback (eval.GuestRuntime). The socket
// is removed when the bridge closes.
func (b *bridge) listenShared(host, guest string) error {
	if b.guestURL != "" {
		return nil
	}
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	name := "bridge-" + hex.EncodeToString(raw[:]) + ".sock"
	path := filepath.Join(host, name)
	// The sandbox's processes can write in host: the socket's mode is set
	// through a handle on the directory, so a link planted in its place
	// never makes the host chmod anything outside it.
	dir, err := os.OpenRoot(host)
	if err != nil {
		return fmt.Errorf("starting the tool bridge on a socket the sandbox shares: %w", err)
	}
	defer dir.Close()
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("starting the tool bridge on a socket the sandbox shares: %w", err)
	}
	// The sandbox's user may not be this one; the bearer secret guards it.
	if err := dir.Chmod(name, 0o777); err != nil {
		ln.Close()
		return fmt.Errorf("starting the tool bridge on a socket the sandbox shares: %w", err)
	}
	b.socket, b.guestURL = path, "unix://"+strings.TrimSuffix(guest, "/")+"/"+name
	b.guestServe = make(chan struct{})
	go func() {
		defer close(b.guestServe)
		_ = b.srv.Serve(ln)
	}()
	return nil
}

// The bridge's connection timeouts: the headers of a request, the whole
// request, and an idle keep-alive connection.
var (
	bridgeHeaderTimeout = 10 * time.Second
	bridgeReadTimeout   = time.Minute
	bridgeIdleTimeout   = 30 * time.Second
)

// header is the Authorization header value the bridge accepts.
func (b *bridge) header() string { return "Bearer " + b.secret }

// beginTurn makes tools callable under ctx for one turn.
func (b *bridge) beginTurn(ctx context.Context, final bool) {
	b.mu.Lock()
	b.turnCtx, b.final = ctx, final
	b.mu.Unlock()
}

// endTurn makes tool calls fail until the next turn.
func (b *bridge) endTurn() {
	b.mu.Lock()
	b.turnCtx = nil
	b.mu.Unlock()
}

// callContext is the request context that also ends with the turn.
func (b *bridge) callContext(req context.Context) (context.Context, func(), error) {
	b.mu.Lock()
	turn := b.turnCtx
	b.mu.Unlock()
	if turn == nil {
		return nil, nil, errors.New("no turn is running: tools can only be called while the agent answers a prompt")
	}
	ctx, cancel := context.WithCancelCause(req)
	stop := context.AfterFunc(turn, func() { cancel(context.Cause(turn)) })
	return ctx, func() { stop(); cancel(nil) }, nil
}

func (b *bridge) toolHandler(t *eval.AgentTool) mcp.ToolHandler {
	return func(reqCtx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, done, err := b.callContext(reqCtx)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		defer done()
		var input any = eval.NoInput
		if args := bytes.TrimSpace(req.Params.Arguments); len(args) > 0 && !bytes.Equal(args, []byte("null")) {
			if err := json.Unmarshal(args, &input); err != nil {
				return errorResult("the tool arguments are not valid JSON: " + err.Error()), nil
			}
		}
		out, err := t.Call(ctx, input)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		text, ok := out.(string)
		if !ok {
			data, err := json.Marshal(out)
			if err != nil {
				return errorResult("the tool result is not JSON data: " + err.Error()), nil
			}
			text = string(data)
		}
		if size := jsonTextSize(text); size > MaxMessageBytes-messageOverhead {
			return errorResult(fmt.Sprintf("the result of tool %s is %d bytes once encoded, over the %d-byte (10 MiB) limit of one message; ask for less (a smaller page, a summary), or have the tool write the data to a file and return its path", t.Name, size, MaxMessageBytes-messageOverhead)), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// submit classifies one structured-result submission: invalid (before the
// final authored turn, without result, or failing the schema; retriable),
// accepted (the first valid one) or ignored (any later one).
func (b *bridge) submit(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw := bytes.TrimSpace(req.Params.Arguments)
	b.mu.Lock()
	b.calls++
	call := b.calls
	status, msg := "invalid", ""
	switch {
	case b.turnCtx == nil || !b.final:
		msg = SubmitToolName + " was called before the final authored turn; submit the result only when answering the final prompt"
	case b.accepted:
		status, msg = "ignored", "A result was already accepted; this submission is ignored."
	default:
		var args map[string]any
		if err := json.Unmarshal(raw, &args); err != nil {
			msg = "the arguments must be a JSON object with a result field"
			break
		}
		result, ok := args["result"]
		if !ok {
			msg = "the arguments have no result field; call " + SubmitToolName + ` with {"result": <value>}`
			break
		}
		if err := b.output.Validate(result); err != nil {
			cause, _ := json.Marshal(err.Error())
			msg = "the result does not match the required JSON Schema: " + string(cause) + "; correct it and call " + SubmitToolName + " again"
			break
		}
		status, msg = "accepted", "Result accepted."
		b.accepted, b.result = true, result
	}
	b.mu.Unlock()

	var content map[string]any
	if b.s.trace.CapturesContent() {
		content = map[string]any{"payload": string(raw)}
	}
	b.s.trace.Event("agent.output", map[string]any{"call": int64(call), "status": status}, content)
	if status == "invalid" {
		return errorResult(msg), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
}

// acceptedResult returns the accepted structured result, if any.
func (b *bridge) acceptedResult() (any, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.result, b.accepted
}

// close stops the bridge and waits for its server goroutine.
func (b *bridge) close(ctx context.Context) error {
	err := b.srv.Shutdown(ctx)
	if err != nil {
		_ = b.srv.Close()
	}
	select {
	case <-b.served:
	case <-ctx.Done():
	}
	if b.guestServe != nil {
		select {
		case <-b.guestServe:
		case <-ctx.Done():
		}
		_ = os.Remove(b.socket)
	}
	if err != nil {
		return fmt.Errorf("closing the tool bridge: %w", err)
	}
	return nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
