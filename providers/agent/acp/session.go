package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
)

// stderrTail is how much of the agent's stderr is kept for errors.
const stderrTail = 16 << 10

// exitGrace bounds how long a failed request waits for the process exit
// that explains it, and how long cleanup waits for stderr to drain.
const exitGrace = time.Second

// errorGrace is how long a failed request looks for a process exit or a
// closed connection before it reports the error as the agent's answer.
const errorGrace = 100 * time.Millisecond

// killGrace bounds how long cleanup waits for the agent to exit after the
// connection closed before it kills the process tree.
const killGrace = 200 * time.Millisecond

// errProcessExited is the cause of a request abandoned because the agent
// process exited.
var errProcessExited = errors.New("ACP agent process exited")

// session is one ACP session: one agent process, one connection, one
// session id. RunTurn is called sequentially; Close exactly once (and is
// repeat-safe). The ACP client callbacks run on connection goroutines and
// take mu.
type session struct {
	p       *Provider
	req     *eval.AgentRequest
	trace   eval.TraceEmitter
	servers []acpsdk.McpServer
	sandbox *eval.SandboxSession
	// evalDir is the evaluation's working directory (AgentExecution).
	evalDir string

	bridgeName string
	bridge     *bridge

	launch      *Launch
	stateDir    string // the invocation-private state directory, or ""
	sessionMeta map[string]any

	life     context.Context // the process's lifetime, cancelled by Close
	stopLife context.CancelFunc

	// host is the Host a host launch runs in, released after the
	// process at cleanup; nil in a sandbox.
	host *hostexec.Host
	// redact removes what AML passed to the process from what it prints.
	redact     redactor
	proc       eval.SandboxProcess
	conn       *acpsdk.ClientSideConnection
	id         acpsdk.SessionId
	stderr     tail
	stderrDone chan struct{}
	exited     chan struct{}
	exitCode   int
	exitErr    error

	mu        sync.Mutex
	turn      *turnState
	problems  []string
	toolCalls map[acpsdk.ToolCallId]toolInfo
	// toolCallsChanged, when not nil, is closed (and cleared) when a
	// tool call's description is recorded: awaitToolCall waits on it.
	toolCallsChanged chan struct{}

	closeOnce sync.Once
	closeErr  error

	// meter accounts the session's model calls when it is metered (see
	// Config.Meter), else nil; routes remove its gateway routes.
	meter  eval.SpendMeter
	routes []func()
	// watch takes the cost an unmetered session's agent reports in its
	// usage_update notifications; nil when metered.
	watch eval.SpendWatch
	// runID is the evaluation's: the session's gateway routes belong to
	// its group (gateway.Gateway.JoinGroup).
	runID string
	// modelRelay carries a metered agent's model calls out of its
	// sandbox; nil on the host.
	modelRelay *modelRelay
	// stopTurn cancels the running turn (with a budget error); set while
	// a turn runs, under mu.
	stopTurn context.CancelCauseFunc
}

// turnState accumulates one prompt turn's assistant text.
type turnState struct {
	text      strings.Builder
	order     []string
	byID      map[string]*strings.Builder
	missingID bool
}

// reset forgets the text so far (before a repair prompt). The caller
// must hold the session's mu or own ts exclusively.
func (ts *turnState) reset() {
	ts.text.Reset()
	ts.order = nil
	ts.byID = map[string]*strings.Builder{}
	ts.missingID = false
}

func (s *session) open(ctx context.Context) error {
	s.life, s.stopLife = context.WithCancel(context.Background())
	var cwd string
	if s.sandbox != nil {
		res, err := s.sandbox.Runtime.Exec(ctx, "pwd", nil, eval.ExecOptions{Cwd: s.sandbox.Cwd})
		if err != nil {
			return fmt.Errorf("resolving the sandbox working directory: %w", err)
		}
		cwd = strings.TrimSpace(string(res.Stdout))
		if res.ExitCode != 0 || cwd == "" {
			return fmt.Errorf("resolving the sandbox working directory: pwd exited with code %d and printed %q", res.ExitCode, cwd)
		}
	} else {
		var err error
		if cwd, err = s.p.localCwd(s.evalDir); err != nil {
			return err
		}
	}

	if len(s.req.Tools) > 0 || s.req.Output != nil {
		b, err := startBridge(s, s.bridgeName)
		if err != nil {
			return err
		}
		s.bridge = b
	}

	if err := s.prepareLaunch(ctx, cwd); err != nil {
		return err
	}
	s.redact = newRedactor(s.launch.Secrets, s.p.cfg.Env)
	if s.req.Model != "" && !s.launch.ModelHandled {
		return fmt.Errorf("provider %q cannot select model %q: a generic ACP agent has no portable model setting; configure the model in the agent's own settings and remove model=", s.p.cfg.Name, s.req.Model)
	}

	var content map[string]any
	if s.trace.CapturesContent() {
		content = map[string]any{"command": s.launch.Command}
	}
	s.trace.Event("sandbox.process", map[string]any{"state": "spawn_requested"}, content)
	if s.sandbox != nil {
		proc, err := s.sandbox.Runtime.Spawn(s.life, s.launch.Command, s.launch.Args, eval.ExecOptions{Cwd: s.sandbox.Cwd, Env: s.launch.Env})
		if err != nil {
			return fmt.Errorf("starting ACP agent %q in the sandbox: %w", s.launch.Command, err)
		}
		s.proc = proc
	} else {
		proc, err := s.startHost(ctx, cwd)
		if err != nil {
			return err
		}
		s.proc = proc
	}
	s.trace.Event("sandbox.process", map[string]any{"state": "started", "execution.id": s.proc.ID()}, nil)

	s.stderrDone = make(chan struct{})
	go func() {
		defer close(s.stderrDone)
		_, _ = io.Copy(&s.stderr, s.proc.Stderr())
	}()
	s.exited = make(chan struct{})
	go func() {
		code, err := s.proc.Wait()
		s.exitCode, s.exitErr = code, err
		if err != nil {
			s.trace.Event("sandbox.process", map[string]any{"state": "wait_failed", "execution.id": s.proc.ID()}, nil)
		} else {
			s.trace.Event("sandbox.process", map[string]any{"state": "exited", "execution.id": s.proc.ID(), "exitCode": int64(code)}, nil)
		}
		close(s.exited)
	}()

	// The connection starts reading at once, but its logger can only be
	// set afterwards: the gate holds the first read until it is set.
	gate := &gatedReader{r: s.proc.Stdout(), ready: make(chan struct{}), over: func() {
		s.problem(fmt.Sprintf("the agent sent an ACP message of more than %d bytes (10 MiB, the limit of one message line); the connection cannot read it", MaxMessageBytes))
	}}
	s.conn = acpsdk.NewClientSideConnection(&client{s: s}, s.proc.Stdin(), gate)
	s.conn.SetLogger(slog.New(&problemHandler{s: s}))
	close(gate.ready)

	var init acpsdk.InitializeResponse
	err := s.handshake(ctx, "initialize", func(c context.Context) (err error) {
		init, err = s.conn.Initialize(c, acpsdk.InitializeRequest{
			ProtocolVersion: acpsdk.ProtocolVersionNumber,
			ClientInfo:      &acpsdk.Implementation{Name: "aml", Title: acpsdk.Ptr("Agent Markup Language"), Version: s.p.cfg.ClientVersion},
		})
		return err
	})
	if err != nil {
		return err
	}
	if init.ProtocolVersion != acpsdk.ProtocolVersionNumber {
		return fmt.Errorf("ACP agent %q answered initialize with protocol version %d; AML speaks version %d", s.launch.Command, init.ProtocolVersion, acpsdk.ProtocolVersionNumber)
	}
	for _, m := range s.servers {
		// A profile that attaches the servers itself (NoSessionMCP) does
		// not pass them over ACP, whatever ACP transports it advertises.
		if m.Http != nil && !init.AgentCapabilities.McpCapabilities.Http && !s.launch.NoSessionMCP {
			return fmt.Errorf("MCP server %q uses streamable-http, but ACP agent %q does not advertise mcpCapabilities.http; use a stdio transport for it", m.Http.Name, s.launch.Command)
		}
	}
	if id := s.launch.AuthMethodID; id != "" {
		if err := s.handshake(ctx, "authenticate", func(c context.Context) error {
			_, err := s.conn.Authenticate(c, acpsdk.AuthenticateRequest{MethodId: id})
			return err
		}); err != nil {
			return err
		}
	}
	servers := append([]acpsdk.McpServer{}, s.servers...)
	if s.launch.NoSessionMCP {
		servers = []acpsdk.McpServer{}
	} else if s.bridge != nil {
		d, err := s.bridgeDescriptor(init.AgentCapabilities.McpCapabilities.Http)
		if err != nil {
			return err
		}
		servers = append(servers, d)
	}
	var created acpsdk.NewSessionResponse
	if err := s.handshake(ctx, "session/new", func(c context.Context) (err error) {
		created, err = s.conn.NewSession(c, acpsdk.NewSessionRequest{Cwd: cwd, McpServers: servers, Meta: s.launch.SessionMeta})
		return err
	}); err != nil {
		return err
	}
	if created.SessionId == "" {
		return fmt.Errorf("ACP agent %q answered session/new without a sessionId", s.launch.Command)
	}
	s.id = created.SessionId
	s.sessionMeta = created.Meta
	s.trace.Event("acp.session.created", map[string]any{"sessionId": string(s.id)}, nil)
	if err := s.configure(ctx, created.ConfigOptions); err != nil {
		return err
	}
	return nil
}

// RunTurn implements eval.AgentSession: one session/prompt.
func (s *session) RunTurn(ctx context.Context, turn eval.AgentTurn) (*eval.AgentResponse, error) {
	text := turn.Text
	if turn.Index == 1 {
		var pre []string
		if s.launch.InitialPromptPrefix != "" {
			pre = append(pre, s.launch.InitialPromptPrefix)
		}
		if s.req.System != "" && !s.launch.SystemHandled {
			pre = append(pre, "<SYSTEM>\n"+s.req.System+"\n</SYSTEM>")
		}
		if len(pre) > 0 {
			text = strings.Join(append(pre, text), "\n\n")
		}
	}
	ts := &turnState{byID: map[string]*strings.Builder{}}
	// A metered call that a budget refuses (or that crosses one), or a
	// reported cost that crosses one, stops the turn at once, as a
	// cancellation whose cause is the budget.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	s.mu.Lock()
	s.turn = ts
	s.stopTurn = stop
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.turn = nil
		s.stopTurn = nil
		s.mu.Unlock()
	}()

	structured := s.req.Output != nil && turn.Final
	if structured {
		text += "\n\n" + s.instruction()
	}
	if s.bridge != nil {
		s.bridge.beginTurn(ctx, turn.Final)
		defer s.bridge.endTurn()
	}
	phase := fmt.Sprintf("turn %d", turn.Index)
	resp, err := s.prompt(ctx, phase, text)
	if err != nil {
		return nil, rateLimited(ctx, err)
	}
	var result any
	if structured {
		var ok bool
		if result, ok = s.bridge.acceptedResult(); !ok && resp.StopReason != acpsdk.StopReasonCancelled {
			// One schema-bearing repair prompt, inside the same turn.
			s.mu.Lock()
			ts.reset()
			s.mu.Unlock()
			if resp, err = s.prompt(ctx, phase+" (structured-result repair)", s.repairPrompt()); err != nil {
				return nil, err
			}
			result, ok = s.bridge.acceptedResult()
		}
		if !ok && resp.StopReason != acpsdk.StopReasonCancelled {
			return nil, fmt.Errorf("ACP agent %q ended the final turn without submitting a valid structured result through %s, also after one repair prompt", s.launch.Command, SubmitToolName)
		}
	}
	usage := usageJSON(resp.Usage)
	if resp.StopReason == acpsdk.StopReasonCancelled {
		return nil, fmt.Errorf("ACP agent %q cancelled turn %d", s.launch.Command, turn.Index)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &eval.AgentResponse{Text: ts.text.String(), Structured: result, SessionID: string(s.id), StopReason: string(resp.StopReason), Usage: usage}
	if s.launch.TransformText != nil {
		out.Text = s.launch.TransformText(out.Text, s.sessionMeta)
	} else if !ts.missingID && len(ts.order) > 0 {
		out.Messages = make([]string, len(ts.order))
		for i, id := range ts.order {
			out.Messages[i] = ts.byID[id].String()
		}
	}
	return out, nil
}

// prompt sends one session/prompt and traces it.
func (s *session) prompt(ctx context.Context, phase, text string) (acpsdk.PromptResponse, error) {
	if size := jsonTextSize(text); size > MaxMessageBytes-messageOverhead {
		return acpsdk.PromptResponse{}, fmt.Errorf("the %s prompt is %d bytes once encoded, over the %d-byte (10 MiB) limit of one ACP message; move large content into a file the agent reads (include(..., max_bytes=...) stages it)", phase, size, MaxMessageBytes-messageOverhead)
	}
	var content map[string]any
	if s.trace.CapturesContent() {
		content = map[string]any{"prompt": text}
	}
	s.trace.Event("acp.session.prompt.submitted", map[string]any{"sessionId": string(s.id)}, content)
	var resp acpsdk.PromptResponse
	err := s.do(ctx, phase, func(c context.Context) (err error) {
		resp, err = s.conn.Prompt(c, acpsdk.PromptRequest{SessionId: s.id, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			s.trace.Event("acp.session.cancel", map[string]any{"sessionId": string(s.id)}, nil)
		}
		return resp, err
	}
	done := map[string]any{"sessionId": string(s.id), "stopReason": string(resp.StopReason)}
	if u := usageJSON(resp.Usage); u != "" {
		done["usage"] = u
	}
	s.trace.Event("acp.session.prompt.completed", done, nil)
	return resp, nil
}

// usageJSON serializes token usage as opaque JSON, or "".
func usageJSON(u *acpsdk.Usage) string {
	if u == nil {
		return ""
	}
	b, err := json.Marshal(u)
	if err != nil {
		return ""
	}
	return string(b)
}

// instruction is the structured-output instruction of the final turn.
func (s *session) instruction() string {
	if s.launch.StructuredInstruction != "" {
		return s.launch.StructuredInstruction
	}
	return submitInstruction
}

// repairPrompt asks once more for the structured result.
func (s *session) repairPrompt() string {
	schema, _ := json.MarshalIndent(s.req.Output.JSONSchema, "", "  ")
	return "The previous turn ended without submitting a valid structured result.\n\n" + s.instruction() +
		"\n\nCall the structured-result Tool now. Do not continue the analysis or answer only with message text.\n\nThe required result must match this JSON Schema:\n" + string(schema)
}

// guest returns the sandbox's runtime when the agent runs apart from the
// host (eval.GuestRuntime), or nil.
func (s *session) guest() eval.GuestRuntime {
	if s.sandbox == nil || s.sandbox.Lease == nil {
		return nil
	}
	g, _ := s.sandbox.Lease.Runtime().(eval.GuestRuntime)
	return g
}

// bridgeDescriptor is the session/new entry that reaches the bridge:
// streamable HTTP with the bearer secret when the agent supports it, else
// the stdio relay.
func (s *session) bridgeDescriptor(http bool) (acpsdk.McpServer, error) {
	b := s.bridge
	if http && s.guest() == nil {
		return acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Type: "http", Name: b.name, Url: b.url,
			Headers: []acpsdk.HttpHeader{{Name: "Authorization", Value: b.header()}}}}, nil
	}
	if guest := s.guest(); guest != nil {
		// An agent in a sandbox apart from the host (a container with no
		// network): the relay in the sandbox, over a socket it shares.
		relay, err := guest.RelayCommand()
		if err != nil || len(relay) == 0 {
			why := "it provides no relay"
			if err != nil {
				why = err.Error()
			}
			return acpsdk.McpServer{}, fmt.Errorf("ACP agent %q runs in a sandbox apart from this host, which cannot reach the tool bridge here (%s), so it cannot receive tools or structured output", s.launch.Command, why)
		}
		host, guestDir := guest.SharedDirectory()
		if err := b.listenShared(host, guestDir); err != nil {
			return acpsdk.McpServer{}, err
		}
		return acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: b.name, Command: relay[0], Args: append([]string{}, relay[1:]...),
			Env: []acpsdk.EnvVariable{{Name: RelayURLEnv, Value: b.guestURL}, {Name: RelayTokenEnv, Value: b.secret}}}}, nil
	}
	relay := s.p.cfg.Relay
	if len(relay) == 0 {
		return acpsdk.McpServer{}, fmt.Errorf("ACP agent %q does not advertise mcpCapabilities.http and no stdio relay is configured, so it cannot receive tools or structured output; run it through the aml CLI (which provides aml mcp-relay) or set acp.Config.Relay", s.launch.Command)
	}
	return acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: b.name, Command: relay[0], Args: append([]string{}, relay[1:]...),
		Env: []acpsdk.EnvVariable{{Name: RelayURLEnv, Value: b.url}, {Name: RelayTokenEnv, Value: b.secret}}}}, nil
}

// errHandshakeTimeout ends a handshake request that took longer than the
// provider's HandshakeTimeout.
var errHandshakeTimeout = errors.New("handshake timeout")

// handshake runs one request of the handshake (initialize, authenticate,
// session/new, set_config_option) under the provider's HandshakeTimeout:
// an agent that never answers, or prints only lines that are not ACP,
// fails the session with the step and what it printed instead of waiting
// forever. Close then kills its process tree.
func (s *session) handshake(ctx context.Context, phase string, f func(context.Context) error) error {
	timeout := s.p.cfg.HandshakeTimeout
	if timeout == 0 {
		timeout = DefaultHandshakeTimeout
	}
	hctx, cancel := context.WithTimeoutCause(ctx, timeout, errHandshakeTimeout)
	defer cancel()
	err := s.do(hctx, phase, f)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(hctx), errHandshakeTimeout) {
		return fmt.Errorf("ACP agent %q did not answer %s within %s; check that it speaks ACP (JSON-RPC) on stdin and stdout%s", s.launch.Command, phase, timeout, s.printed())
	}
	return err
}

// printed describes what the agent printed that was not ACP: its stderr
// tail and the protocol problems, redacted.
func (s *session) printed() string {
	var parts []string
	if tail := strings.TrimSpace(s.stderr.String()); tail != "" {
		parts = append(parts, "stderr: "+s.redact.String(tail))
	}
	s.mu.Lock()
	if len(s.problems) > 0 {
		parts = append(parts, "protocol problems: "+strings.Join(s.problems, "; "))
	}
	s.mu.Unlock()
	if len(parts) == 0 {
		return " (it printed nothing)"
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// do runs one request, abandoning it when the agent process exits, and
// names the cause of a failure: cancellation, the process exit (with its
// status and stderr tail) or the protocol error.
func (s *session) do(ctx context.Context, phase string, f func(context.Context) error) error {
	err := s.request(ctx, phase, f)
	if err != nil && ctx.Err() == nil && s.launch.CredentialHint != "" {
		err = fmt.Errorf("%w; %s", err, s.launch.CredentialHint)
	}
	return s.redact.Error(err)
}

// request is do before redaction.
func (s *session) request(ctx context.Context, phase string, f func(context.Context) error) error {
	c, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-s.exited:
			cancel(errProcessExited)
		case <-c.Done():
		}
	}()
	err := f(c)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("ACP %s interrupted: %w", phase, context.Cause(ctx))
	}
	// A failed write to a dying process, or an agent's error answer: a
	// short look tells them apart.
	quick := time.NewTimer(errorGrace)
	defer quick.Stop()
	select {
	case <-s.exited:
		return s.exitError(phase)
	case <-s.conn.Done():
	case <-ctx.Done():
		return fmt.Errorf("ACP %s interrupted: %w", phase, context.Cause(ctx))
	case <-quick.C:
		return fmt.Errorf("ACP %s failed: %w%s", phase, err, s.problemText())
	}
	// A closed connection usually means the process is exiting: give the
	// exit a moment to be observed so the error can name it.
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-s.exited:
		return s.exitError(phase)
	case <-ctx.Done():
		return fmt.Errorf("ACP %s interrupted: %w", phase, context.Cause(ctx))
	case <-t.C:
	}
	return fmt.Errorf("ACP %s failed: %w%s", phase, err, s.problemText())
}

// exitError describes the process exit during phase, with the stderr
// tail.
func (s *session) exitError(phase string) error {
	t := time.NewTimer(exitGrace)
	select {
	case <-s.stderrDone:
	case <-t.C:
	}
	t.Stop()
	msg := fmt.Sprintf("ACP agent process %q exited with code %d during %s", s.launch.Command, s.exitCode, phase)
	if s.exitErr != nil {
		msg = fmt.Sprintf("waiting for ACP agent process %q failed during %s: %v", s.launch.Command, phase, s.exitErr)
	}
	if tail := strings.TrimSpace(s.stderr.String()); tail != "" {
		msg += ": " + s.redact.String(tail)
	}
	return errors.New(msg)
}

// problem records a protocol problem for the error of a failed request.
func (s *session) problem(msg string) {
	s.mu.Lock()
	if len(s.problems) < 8 {
		s.problems = append(s.problems, s.redact.String(msg))
	}
	s.mu.Unlock()
}

func (s *session) problemText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) == 0 {
		return ""
	}
	return " (protocol problems: " + strings.Join(s.problems, "; ") + ")"
}

// Close implements eval.AgentSession: it closes the agent's stdin, waits
// briefly for it to exit, kills the process tree, reaps it and drains
// stderr. It is repeat-safe.
func (s *session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

func (s *session) close(ctx context.Context) error {
	defer func() {
		if s.stopLife != nil {
			s.stopLife()
		}
		for _, remove := range s.routes {
			remove()
		}
	}()
	if s.proc == nil {
		var errs []error
		errs = append(errs, s.releaseHost(ctx))
		if s.bridge != nil {
			errs = append(errs, s.bridge.close(ctx))
		}
		errs = append(errs, s.removeState(ctx))
		return errors.Join(errs...)
	}
	var errs []error
	if err := s.proc.Stdin().Close(); err != nil && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, os.ErrClosed) {
		errs = append(errs, fmt.Errorf("closing the agent's stdin: %w", err))
	}
	t := time.NewTimer(killGrace)
	select {
	case <-s.exited:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	s.trace.Event("sandbox.process", map[string]any{"state": "kill_requested", "execution.id": s.proc.ID()}, nil)
	if err := s.proc.Kill(); err != nil {
		errs = append(errs, fmt.Errorf("killing the agent process: %w", err))
	}
	s.trace.Event("sandbox.process", map[string]any{"state": "kill_completed", "execution.id": s.proc.ID()}, nil)
	select {
	case <-s.exited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for the agent process to exit: %w", context.Cause(ctx)))
	}
	if s.host != nil {
		// The tree is dead; a descendant that escaped the group may still
		// hold the pipes: releasing the Host closes their ends.
		select {
		case <-s.stderrDone:
		case <-time.After(exitGrace):
		}
		if err := s.releaseHost(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	select {
	case <-s.stderrDone:
	case <-ctx.Done():
	}
	if s.conn != nil {
		select {
		case <-s.conn.Done():
		case <-ctx.Done():
		}
	}
	if s.bridge != nil {
		if err := s.bridge.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.removeState(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("ACP session cleanup failed: %w", errors.Join(errs...))
	}
	return nil
}

// tail keeps the last stderrTail bytes written to it. Safe for concurrent
// use.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= stderrTail {
		t.buf = append(t.buf[:0], p[len(p)-stderrTail:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// problemHandler turns the connection's error logs (unparsable lines,
// undecodable notifications) into reported protocol problems: they are
// traced and named in the error of a failed request, never ignored.
type problemHandler struct {
	s     *session
	attrs []slog.Attr
}

func (h *problemHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *problemHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	var raw string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "raw":
			raw = a.Value.String()
		case "err", "method":
			msg += " (" + a.Key + ": " + a.Value.String() + ")"
		}
		return true
	})
	// Errors name the offending line (redacted, shortened); traces keep it
	// as content only.
	line := raw
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	if line != "" {
		h.s.problem(msg + ": " + strconv.Quote(line))
	} else {
		h.s.problem(msg)
	}
	var content map[string]any
	if raw != "" && h.s.trace.CapturesContent() {
		content = map[string]any{"raw": h.s.redact.String(raw)}
	}
	h.s.trace.Event("acp.protocol.problem", map[string]any{"message": h.s.redact.String(msg)}, content)
	return nil
}

func (h *problemHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &problemHandler{s: h.s, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *problemHandler) WithGroup(string) slog.Handler { return h }

// gatedReader blocks reads until ready is closed.
type gatedReader struct {
	r     io.Reader
	ready chan struct{}
	// line counts the bytes of the current line; over is called once
	// when a line reaches MaxMessageBytes, which the ACP SDK cannot read
	// (its buffer holds at most that much).
	line int
	over func()
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.ready
	n, err := g.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			g.line = 0
			continue
		}
		g.line++
		if g.line == MaxMessageBytes && g.over != nil {
			g.over()
		}
	}
	return n, err
}

// MaxMessageBytes bounds one ACP message (one JSON line) in either
// direction: the ACP SDK reads at most 10 MiB per line. A prompt over it
// is refused before it is sent; a tool result over it is returned to the
// agent as a tool error; an agent message over it ends the session with
// an error that names the limit.
const MaxMessageBytes = 10 << 20

// messageOverhead is the room a message leaves for its envelope (JSON-RPC
// fields and escaping of the text).
const messageOverhead = 64 << 10

// jsonTextSize is the length of text encoded as a JSON string.
func jsonTextSize(text string) int {
	b, err := json.Marshal(text)
	if err != nil {
		return len(text)
	}
	return len(b)
}
