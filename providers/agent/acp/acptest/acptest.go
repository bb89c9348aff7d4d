// Package acptest is a scriptable fake ACP agent for tests of the session
// engine and of anything built on it. It speaks the real protocol
// (github.com/coder/acp-go-sdk, agent side) over stdin and stdout.
//
// A test binary becomes the fake agent when it calls MaybeServe from
// TestMain; Command then returns the executable, arguments and
// environment that launch it. Each prompt is a script, one directive per
// line:
//
//	say TEXT          an agent_message_chunk without messageId
//	msg ID TEXT       an agent_message_chunk with messageId ID
//	thought TEXT      an agent_thought_chunk
//	echo              (as the last line) the turn is one chunk repeating
//	                  the whole prompt, and no other line runs
//	tool KIND         a tool_call of KIND, then session/request_permission
//	                  offering allow_once, allow_always, reject_once and
//	                  reject_always; the chosen option is said back as
//	                  "permission KIND: OPTION"
//	mcp-tool SRV TOOL a tool_call of kind execute with raw input
//	                  {"server": SRV, "tool": TOOL} and title mcp.SRV.TOOL
//	                  (as Codex reports MCP calls), then a permission
//	                  request naming only the call id; the choice is said
//	                  back as "permission SRV.TOOL: OPTION"
//	renamed-tool LABEL NAME
//	                  a tool_call of kind other titled LABEL, then a
//	                  permission request for the same call id titled NAME
//	                  (as Copilot names its MCP calls "aml-lookup" and
//	                  "lookup"); the choice is said back as
//	                  "permission NAME: OPTION"
//	huge N            says N bytes of "x" in one message chunk
//	stderr TEXT       a line on stderr
//	stderr-env NAME   the line NAME=<its value> on stderr
//	exit CODE         the process exits with CODE mid-turn
//	hang              waits for session/cancel, then stops as cancelled
//	hang-hard         waits forever, ignoring session/cancel
//	nonjson TEXT      a line of plain text on stdout
//	nonjson-env NAME  the plain line NAME=<its value> on stdout
//	unknown           a session/update of an unknown kind
//	usage             the prompt response carries token usage
//	ratelimit PATH N  appends a line to file PATH (which may start with
//	                  $NAME/); while it then has at most N lines the turn
//	                  fails as a rate-limited agent's does: a JSON-RPC
//	                  internal error whose data says "429 Too Many
//	                  Requests ... retry after 0.05s"
//	model N           makes N chat completions requests of
//	                  $OPENAI_BASE_URL/chat/completions, one after the
//	                  other, and says the last answer's content
//	cost USD          a usage_update whose cumulative session cost is USD
//	                  dollars
//	mcp               says the MCP servers session/new received (JSON)
//	cwd               says the session cwd
//	meta              says the _meta session/new received (JSON)
//	argv              says the process arguments, one per line
//	config            says the session configuration set through
//	                  session/set_config_option, as "id=value" pairs
//	env NAME          says the value of environment variable NAME
//	cat PATH          says the content of file PATH (PATH may start with
//	                  $NAME/, naming an environment variable)
//	append PATH TEXT  appends the line "TEXT <Unix time in ns>" to file
//	                  PATH (which may start with $NAME/), saying nothing
//	sleep MS          waits MS milliseconds (or for session/cancel)
//	child             starts a long-lived child process and says its PID
//	tools             says the tools of the MCP server named "aml" (the
//	                  tool bridge), comma-separated, and a newline
//	call TOOL JSON    calls TOOL on that server with JSON arguments and
//	                  says "result: TEXT" or "error: TEXT"
//	submit JSON       calls aml_submit_result with {"result": JSON} and
//	                  says "submitted: TEXT" or "rejected: TEXT"
//	on-repair JSON    submits JSON only when a later prompt is AML's
//	                  structured-result repair prompt
//
// A line that is none of these is said back unchanged. The environment
// variable AML_FAKE_ACP_MODE changes the handshake: "no-http" advertises
// no HTTP MCP support, "version2" answers initialize with version 2,
// "exit-init" exits with status 3 during initialize, "mute" never answers
// initialize (printing "fake agent: thinking..." on stderr) and "babble"
// answers it only with plain lines that are not JSON, "auth" requires
// authenticate (with method AML_FAKE_ACP_AUTH_METHOD, default "fake-key")
// before session/new, and "linger" keeps running after
// stdin closes (until killed).
package acptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aml-go/aml/providers/agent/acp"
)

// envServe marks a process as the fake agent, envRelay as the stdio
// relay.
const (
	envServe = "AML_FAKE_ACP_SERVE"
	envRelay = "AML_FAKE_ACP_RELAY"
)

// MaybeServe turns the current process into the fake agent when it was
// launched by Command (or into the tool bridge's stdio relay when
// launched by RelayCommand), and exits when the connection ends. Call it
// first in TestMain.
func MaybeServe() {
	if os.Getenv(envRelay) == "1" {
		if err := acp.RunRelay(context.Background(), os.Stdin, os.Stdout, acp.RelayOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envServe) != "1" {
		return
	}
	os.Exit(Serve())
}

// Command returns the executable and environment that launch the fake
// agent: the running test binary with the serve marker.
func Command() (string, map[string]string) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exe, map[string]string{envServe: "1"}
}

// RelayCommand returns the stdio relay command for acp.Config.Relay when
// the test binary serves it through MaybeServe: the running test binary
// with the relay marker in its environment.
func RelayCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{"env", envRelay + "=1", exe}
}

// client returns the connection to the client, once it is made.
func (a *agent) client() *acpsdk.AgentSideConnection {
	<-a.ready
	return a.conn
}

// Serve runs the fake agent on stdin and stdout until the client closes
// the connection, and returns the exit status.
func Serve() int {
	a := &agent{mode: os.Getenv("AML_FAKE_ACP_MODE"), out: os.Stdout, ready: make(chan struct{})}
	// The connection serves requests as soon as it is made, possibly
	// before the assignment below: handlers reach it through client(),
	// which waits for it.
	a.conn = acpsdk.NewAgentSideConnection(a, a, os.Stdin)
	close(a.ready)
	<-a.conn.Done()
	if a.mode == "linger" {
		select {}
	}
	return 0
}

type agent struct {
	mode string
	// conn is set once ready is closed.
	conn  *acpsdk.AgentSideConnection
	ready chan struct{}

	outMu sync.Mutex
	out   *os.File

	mu       sync.Mutex
	mcp      *mcp.ClientSession
	onRepair string
	config   map[string]string
	authed   bool
	cwd      string
	servers  []acpsdk.McpServer
	meta     map[string]any
	cancel   context.CancelFunc
}

// Write serializes the connection's writes with raw lines.
func (a *agent) Write(p []byte) (int, error) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	return a.out.Write(p)
}

func (a *agent) raw(line string) {
	_, _ = a.Write([]byte(line + "\n"))
}

func (a *agent) Initialize(_ context.Context, _ acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	switch a.mode {
	case "exit-init":
		fmt.Fprintln(os.Stderr, "fake agent: refusing to initialize")
		os.Exit(3)
	case "mute":
		fmt.Fprintln(os.Stderr, "fake agent: thinking...")
		select {}
	case "babble":
		a.raw("Welcome to the fake agent!")
		a.raw("Type /help for help.")
		select {}
	case "version2":
		return acpsdk.InitializeResponse{ProtocolVersion: 2}, nil
	}
	caps := acpsdk.AgentCapabilities{McpCapabilities: acpsdk.McpCapabilities{Http: a.mode != "no-http"}}
	resp := acpsdk.InitializeResponse{ProtocolVersion: acpsdk.ProtocolVersionNumber, AgentCapabilities: caps, AuthMethods: []acpsdk.AuthMethod{}}
	return resp, nil
}

func (a *agent) Authenticate(_ context.Context, r acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	want := os.Getenv("AML_FAKE_ACP_AUTH_METHOD")
	if want == "" {
		want = "fake-key"
	}
	if r.MethodId != want {
		return acpsdk.AuthenticateResponse{}, acpsdk.NewInvalidParams(map[string]any{"methodId": r.MethodId})
	}
	a.mu.Lock()
	a.authed = true
	a.mu.Unlock()
	return acpsdk.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(_ context.Context, r acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mode == "auth" && !a.authed {
		return acpsdk.NewSessionResponse{}, acpsdk.NewAuthRequired(nil)
	}
	a.cwd = r.Cwd
	a.servers = r.McpServers
	a.meta = r.Meta
	model := acpsdk.SessionConfigOptionCategoryModel
	thought := acpsdk.SessionConfigOptionCategoryThoughtLevel
	mode := acpsdk.SessionConfigOptionCategoryMode
	values := func(vs ...string) acpsdk.SessionConfigSelectOptions {
		u := acpsdk.SessionConfigSelectOptionsUngrouped{}
		for _, v := range vs {
			u = append(u, acpsdk.SessionConfigSelectOption{Name: v, Value: acpsdk.SessionConfigValueId(v)})
		}
		return acpsdk.SessionConfigSelectOptions{Ungrouped: &u}
	}
	opts := []acpsdk.SessionConfigOption{
		{Select: &acpsdk.SessionConfigOptionSelect{Id: "model", Name: "Model", Category: &model, Type: "select", CurrentValue: "fake-small", Options: values("fake-small", "fake-large")}},
		{Select: &acpsdk.SessionConfigOptionSelect{Id: "thinking", Name: "Thinking", Category: &thought, Type: "select", CurrentValue: "off", Options: values("off", "high")}},
		{Select: &acpsdk.SessionConfigOptionSelect{Id: "mode", Name: "Mode", Category: &mode, Type: "select", CurrentValue: "default", Options: values("default", "plan")}},
		{Boolean: &acpsdk.SessionConfigOptionBoolean{Id: "fast", Name: "Fast", Type: "boolean"}},
	}
	return acpsdk.NewSessionResponse{SessionId: "fake-session-1", ConfigOptions: opts}, nil
}

func (a *agent) Cancel(_ context.Context, _ acpsdk.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel != nil {
		a.cancel()
	}
	return nil
}

func (a *agent) Prompt(ctx context.Context, r acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	a.cancel = cancel
	a.mu.Unlock()

	var text strings.Builder
	for _, b := range r.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	resp := acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}
	say := func(u acpsdk.SessionUpdate) error {
		return a.client().SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: r.SessionId, Update: u})
	}
	chunk := func(s string) error { return say(acpsdk.UpdateAgentMessageText(s)) }
	if strings.HasPrefix(text.String(), "The previous turn ended without submitting") {
		a.mu.Lock()
		pending := a.onRepair
		a.mu.Unlock()
		if pending != "" {
			return resp, a.callTool(ctx, "aml_submit_result", `{"result":`+pending+`}`, "submitted: ", "rejected: ", chunk)
		}
	}
	if full := text.String(); full == "echo" || strings.HasSuffix(full, "\necho") {
		return resp, chunk(full)
	}
	sc := bufio.NewScanner(strings.NewReader(text.String()))
	for sc.Scan() {
		line := sc.Text()
		verb, arg, _ := strings.Cut(line, " ")
		var err error
		switch verb {
		case "say":
			err = chunk(arg)
		case "huge":
			n, _ := strconv.Atoi(arg)
			err = chunk(strings.Repeat("x", n))
		case "msg":
			id, body, _ := strings.Cut(arg, " ")
			u := acpsdk.UpdateAgentMessageText(body)
			u.AgentMessageChunk.MessageId = &id
			err = say(u)
		case "thought":
			err = say(acpsdk.UpdateAgentThoughtText(arg))
		case "tool":
			err = a.permission(ctx, r.SessionId, acpsdk.ToolKind(arg), chunk)
		case "mcp-tool":
			srv, tool, _ := strings.Cut(arg, " ")
			err = a.mcpPermission(ctx, r.SessionId, srv, tool, chunk)
		case "renamed-tool":
			label, name, _ := strings.Cut(arg, " ")
			err = a.renamedPermission(ctx, r.SessionId, label, name, chunk)
		case "stderr":
			fmt.Fprintln(os.Stderr, arg)
		case "stderr-env":
			fmt.Fprintln(os.Stderr, arg+"="+os.Getenv(arg))
		case "exit":
			code, _ := strconv.Atoi(arg)
			os.Exit(code)
		case "hang":
			<-ctx.Done()
			return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
		case "hang-hard":
			select {}
		case "nonjson":
			a.raw(arg)
		case "nonjson-env":
			a.raw(arg + "=" + os.Getenv(arg))
		case "unknown":
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
				"sessionId": r.SessionId, "update": map[string]any{"sessionUpdate": "mystery_update"}}})
			a.raw(string(b))
		case "model":
			n, _ := strconv.Atoi(arg)
			var text string
			for range n {
				if text, err = chatCompletion(ctx, os.Getenv("OPENAI_BASE_URL")); err != nil {
					break
				}
			}
			if err == nil {
				err = chunk(text)
			}
		case "ratelimit":
			file, limit, _ := strings.Cut(arg, " ")
			n, _ := strconv.Atoi(limit)
			name := os.ExpandEnv(file)
			var f *os.File
			if f, err = os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				_, err = fmt.Fprintln(f, "try")
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err == nil {
				b, _ := os.ReadFile(name)
				if strings.Count(string(b), "\n") <= n {
					return acpsdk.PromptResponse{}, acpsdk.NewInternalError(map[string]any{"details": "429 Too Many Requests: rate limit reached for requests, retry after 0.05s"})
				}
			}
		case "cost":
			usd, _ := strconv.ParseFloat(arg, 64)
			err = say(acpsdk.SessionUpdate{UsageUpdate: &acpsdk.SessionUsageUpdate{SessionUpdate: "usage_update",
				Cost: &acpsdk.Cost{Amount: usd, Currency: "USD"}, Size: 200000, Used: 1000}})
		case "usage":
			resp.Usage = &acpsdk.Usage{InputTokens: 7, OutputTokens: 5, TotalTokens: 12}
		case "mcp":
			a.mu.Lock()
			b, _ := json.Marshal(a.servers)
			a.mu.Unlock()
			err = chunk(string(b))
		case "cwd":
			a.mu.Lock()
			cwd := a.cwd
			a.mu.Unlock()
			err = chunk(cwd)
		case "meta":
			a.mu.Lock()
			b, _ := json.Marshal(a.meta)
			a.mu.Unlock()
			err = chunk(string(b))
		case "config":
			a.mu.Lock()
			keys := make([]string, 0, len(a.config))
			for k := range a.config {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, k+"="+a.config[k])
			}
			a.mu.Unlock()
			err = chunk(strings.Join(parts, ",") + "\n")
		case "argv":
			err = chunk(strings.Join(os.Args[1:], "\n") + "\n")
		case "env":
			err = chunk(os.Getenv(arg))
		case "append":
			file, text, _ := strings.Cut(arg, " ")
			var f *os.File
			if f, err = os.OpenFile(os.ExpandEnv(file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				_, err = fmt.Fprintf(f, "%s %d\n", text, time.Now().UnixNano())
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		case "sleep":
			ms, _ := strconv.Atoi(arg)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
				return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
			}
		case "cat":
			var b []byte
			if b, err = os.ReadFile(os.ExpandEnv(arg)); err == nil {
				err = chunk(string(b))
			}
		case "tools":
			var names []string
			if names, err = a.toolNames(ctx); err == nil {
				err = chunk(strings.Join(names, ",") + "\n")
			}
		case "call":
			name, args, _ := strings.Cut(arg, " ")
			err = a.callTool(ctx, name, args, "result: ", "error: ", chunk)
		case "on-repair":
			a.mu.Lock()
			a.onRepair = arg
			a.mu.Unlock()
		case "submit":
			err = a.callTool(ctx, "aml_submit_result", `{"result":`+arg+`}`, "submitted: ", "rejected: ", chunk)
		case "child":
			cmd := exec.Command("sleep", "1000")
			if err = cmd.Start(); err == nil {
				err = chunk(strconv.Itoa(cmd.Process.Pid))
			}
		default:
			err = chunk(line)
		}
		if err != nil {
			return acpsdk.PromptResponse{}, err
		}
	}
	return resp, nil
}

func (a *agent) permission(ctx context.Context, sid acpsdk.SessionId, kind acpsdk.ToolKind, chunk func(string) error) error {
	id := acpsdk.ToolCallId("call-" + string(kind))
	if err := a.client().SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: sid,
		Update: acpsdk.StartToolCall(id, "fake "+string(kind), acpsdk.WithStartKind(kind))}); err != nil {
		return err
	}
	resp, err := a.client().RequestPermission(ctx, acpsdk.RequestPermissionRequest{
		SessionId: sid,
		ToolCall:  acpsdk.ToolCallUpdate{ToolCallId: id, Kind: &kind},
		Options: []acpsdk.PermissionOption{
			{Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: "allow-once"},
			{Kind: acpsdk.PermissionOptionKindAllowAlways, Name: "Allow always", OptionId: "allow-always"},
			{Kind: acpsdk.PermissionOptionKindRejectOnce, Name: "Reject once", OptionId: "reject-once"},
			{Kind: acpsdk.PermissionOptionKindRejectAlways, Name: "Reject always", OptionId: "reject-always"},
		},
	})
	if err != nil {
		return err
	}
	choice := "cancelled"
	if resp.Outcome.Selected != nil {
		choice = string(resp.Outcome.Selected.OptionId)
	}
	return chunk(fmt.Sprintf("permission %s: %s\n", kind, choice))
}

func (a *agent) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionList)
}

func (a *agent) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(_ context.Context, r acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.config == nil {
		a.config = map[string]string{}
	}
	switch {
	case r.ValueId != nil:
		a.config[string(r.ValueId.ConfigId)] = string(r.ValueId.Value)
	case r.Boolean != nil:
		a.config[string(r.Boolean.ConfigId)] = strconv.FormatBool(r.Boolean.Value)
	default:
		return acpsdk.SetSessionConfigOptionResponse{}, acpsdk.NewInvalidParams(nil)
	}
	return acpsdk.SetSessionConfigOptionResponse{}, nil
}

func (a *agent) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, acpsdk.NewMethodNotFound(acpsdk.AgentMethodSessionSetMode)
}

// bridge connects (once) to the MCP server named "aml" from session/new.
func (a *agent) bridge(ctx context.Context) (*mcp.ClientSession, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mcp != nil {
		return a.mcp, nil
	}
	var t mcp.Transport
	for _, s := range a.servers {
		switch {
		case s.Http != nil && s.Http.Name == "aml":
			hs := map[string]string{}
			for _, h := range s.Http.Headers {
				hs[h.Name] = h.Value
			}
			t = &mcp.StreamableClientTransport{Endpoint: s.Http.Url, DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: headers{hs}}}
		case s.Stdio != nil && s.Stdio.Name == "aml":
			cmd := exec.Command(s.Stdio.Command, s.Stdio.Args...)
			cmd.Env = os.Environ()
			for _, e := range s.Stdio.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			t = &mcp.CommandTransport{Command: cmd}
		}
	}
	if t == nil {
		return nil, fmt.Errorf("no MCP server named aml in session/new")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fake-acp-agent", Version: "1"}, nil).Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	a.mcp = cs
	return cs, nil
}

func (a *agent) toolNames(ctx context.Context) ([]string, error) {
	cs, err := a.bridge(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

func (a *agent) callTool(ctx context.Context, name, args, ok, bad string, chunk func(string) error) error {
	cs, err := a.bridge(ctx)
	if err != nil {
		return err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		return chunk(bad + err.Error() + "\n")
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, isText := c.(*mcp.TextContent); isText {
			text.WriteString(t.Text)
		}
	}
	prefix := ok
	if res.IsError {
		prefix = bad
	}
	return chunk(prefix + text.String() + "\n")
}

// headers adds fixed headers to every request.
type headers struct{ h map[string]string }

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (a *agent) mcpPermission(ctx context.Context, sid acpsdk.SessionId, srv, tool string, chunk func(string) error) error {
	id := acpsdk.ToolCallId("mcp-" + srv + "-" + tool)
	start := acpsdk.StartToolCall(id, "mcp."+srv+"."+tool, acpsdk.WithStartKind(acpsdk.ToolKindExecute),
		acpsdk.WithStartRawInput(map[string]any{"server": srv, "tool": tool, "arguments": map[string]any{}}))
	if err := a.client().SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: sid, Update: start}); err != nil {
		return err
	}
	kind := acpsdk.ToolKindExecute
	resp, err := a.client().RequestPermission(ctx, acpsdk.RequestPermissionRequest{
		SessionId: sid,
		ToolCall:  acpsdk.ToolCallUpdate{ToolCallId: id, Kind: &kind},
		Options: []acpsdk.PermissionOption{
			{Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow-once"},
			{Kind: acpsdk.PermissionOptionKindRejectOnce, Name: "Cancel", OptionId: "reject-once"},
		},
	})
	if err != nil {
		return err
	}
	choice := "cancelled"
	if resp.Outcome.Selected != nil {
		choice = string(resp.Outcome.Selected.OptionId)
	}
	return chunk(fmt.Sprintf("permission %s.%s: %s\n", srv, tool, choice))
}

func (a *agent) renamedPermission(ctx context.Context, sid acpsdk.SessionId, label, name string, chunk func(string) error) error {
	id := acpsdk.ToolCallId("renamed-" + label)
	kind := acpsdk.ToolKindOther
	if err := a.client().SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: sid,
		Update: acpsdk.StartToolCall(id, label, acpsdk.WithStartKind(kind))}); err != nil {
		return err
	}
	resp, err := a.client().RequestPermission(ctx, acpsdk.RequestPermissionRequest{
		SessionId: sid,
		ToolCall:  acpsdk.ToolCallUpdate{ToolCallId: id, Title: &name, Kind: &kind, RawInput: map[string]any{"id": 9}},
		Options: []acpsdk.PermissionOption{
			{Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: "allow-once"},
			{Kind: acpsdk.PermissionOptionKindRejectOnce, Name: "Deny", OptionId: "reject-once"},
		},
	})
	if err != nil {
		return err
	}
	choice := "cancelled"
	if resp.Outcome.Selected != nil {
		choice = string(resp.Outcome.Selected.OptionId)
	}
	return chunk(fmt.Sprintf("permission %s: %s\n", name, choice))
}

// chatCompletion makes one chat completions request of the endpoint at
// base and returns the answer's content.
func chatCompletion(ctx context.Context, base string) (string, error) {
	body := `{"model":"fake-model","messages":[{"role":"user","content":"hello"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("model answered %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if len(out.Choices) == 0 {
		return "", errors.New("model answered no choices")
	}
	return out.Choices[0].Message.Content, nil
}
