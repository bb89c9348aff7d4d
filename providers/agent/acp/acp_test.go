package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

func TestMain(m *testing.M) {
	acptest.MaybeServe()
	os.Exit(m.Run())
}

// fake returns a provider launching the fake agent with extra env.
func fake(t testing.TB, env map[string]string) *acp.Provider {
	t.Helper()
	cmd, base := acptest.Command()
	for k, v := range env {
		base[k] = v
	}
	p, err := acp.New(acp.Config{Name: "fake", Command: cmd, Env: base})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, p eval.AgentProvider, node *eval.Agent, sinks ...eval.TraceSink) (string, error) {
	t.Helper()
	node.Provider = p
	rt, err := eval.New(eval.Options{Trace: sinks})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rt.Evaluate(ctx, node)
}

func TestTurnsSystemAndMessages(t *testing.T) {
	rec := &tracetest.Recorder{}
	out, err := run(t, fake(t, nil), &eval.Agent{
		System: "Be brief.",
		Children: []any{
			"echo",
			&eval.FollowUp{Children: []any{"msg m1 first\nmsg m2 second\nmsg m1  again\nusage"}},
		},
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	// The final turn's text is every chunk in order.
	if out != "firstsecond again" {
		t.Fatalf("result = %q", out)
	}
	turns := rec.Named("agent.turn")
	var ends []eval.Event
	for _, e := range turns {
		if e.Type == eval.SpanEnd {
			ends = append(ends, e)
		}
	}
	if len(ends) != 2 {
		t.Fatalf("agent.turn ends = %d, want 2", len(ends))
	}
	last := ends[1].Attributes
	if last["sessionId"] != "fake-session-1" || last["stopReason"] != "end_turn" {
		t.Fatalf("turn attributes = %v", last)
	}
	var usage map[string]any
	if err := json.Unmarshal([]byte(last["usage"].(string)), &usage); err != nil || usage["totalTokens"] != float64(12) {
		t.Fatalf("usage = %v (%v)", last["usage"], err)
	}
	if n := len(rec.Named("acp.session.created")); n != 1 {
		t.Fatalf("acp.session.created events = %d", n)
	}
	if n := len(rec.Named("acp.session.prompt.completed")); n != 2 {
		t.Fatalf("acp.session.prompt.completed events = %d", n)
	}
	// Without content capture no prompt text or update payload is traced.
	for _, e := range rec.Events() {
		if _, ok := e.Attributes["prompt"]; ok {
			t.Fatalf("prompt traced without capture: %v", e)
		}
	}
}

func TestMessagesGroupedByID(t *testing.T) {
	p := fake(t, nil)
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "msg a one\nmsg b two\nmsg a three"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "onetwothree" {
		t.Fatalf("text = %q", resp.Text)
	}
	if got := strings.Join(resp.Messages, "|"); got != "onethree|two" {
		t.Fatalf("messages = %q", got)
	}
	// One chunk without an id: messages are omitted rather than guessed.
	resp, err = p.Run(context.Background(), &eval.AgentRequest{Prompt: "msg a one\nsay two"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Messages != nil || resp.Text != "onetwo" {
		t.Fatalf("mixed chunks: text %q messages %q", resp.Text, resp.Messages)
	}
}

func TestSystemPrelude(t *testing.T) {
	resp, err := fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: "echo", System: "Rules.", FollowUps: []string{"echo"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The follow-up carries no prelude; the first turn did (checked below).
	if resp.Text != "echo" {
		t.Fatalf("follow-up text = %q", resp.Text)
	}
	resp, err = fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: "echo", System: "Rules."}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<SYSTEM>\nRules.\n</SYSTEM>\n\necho"; resp.Text != want {
		t.Fatalf("first turn = %q, want %q", resp.Text, want)
	}
}

func TestPermissions(t *testing.T) {
	kinds := []string{"read", "search", "edit", "delete", "move", "execute", "fetch", "switch_mode", "other"}
	var script []string
	for _, k := range kinds {
		script = append(script, "tool "+k)
	}
	cases := []struct {
		name  string
		perms eval.Permissions
		allow map[string]bool
	}{
		{"default", eval.DefaultPermissions(), map[string]bool{"read": true, "search": true, "edit": true, "delete": true, "move": true, "execute": true, "fetch": true}},
		{"read-only", eval.Permissions{Filesystem: "read-only"}, map[string]bool{"read": true, "search": true}},
		{"shell", eval.Permissions{Filesystem: "read-only", Shell: true}, map[string]bool{"read": true, "search": true, "execute": true}},
		{"network", eval.Permissions{Filesystem: "read-only", Network: true}, map[string]bool{"read": true, "search": true, "fetch": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: strings.Join(script, "\n"), Permissions: c.perms}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range kinds {
				want := "reject-once"
				if c.allow[k] {
					want = "allow-once"
				}
				if line := "permission " + k + ": " + want; !strings.Contains(resp.Text, line) {
					t.Errorf("missing %q in %q", line, resp.Text)
				}
			}
		})
	}
}

// TestGrantedCallsAreAllowed: a permission request for a call to a
// granted MCP server (or the AML bridge) is allowed even when the agent's
// permissions would reject its kind; other servers' calls are not.
func TestGrantedCallsAreAllowed(t *testing.T) {
	req := &eval.AgentRequest{
		Prompt:      "mcp-tool files read\nmcp-tool aml lookup\nmcp-tool stranger run",
		Permissions: eval.Permissions{Filesystem: "read-only"},
		MCPServers:  []eval.AgentMCPServer{{Name: "files", Server: &eval.MCPServer{Name: "files", Transport: eval.MCPTransport{Type: "stdio", Command: "srv"}}}},
		Output:      &eval.OutputRequest{JSONSchema: map[string]any{"type": "string"}},
		ToolServer:  "aml",
	}
	s, err := fake(t, nil).OpenSession(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	r, err := s.RunTurn(context.Background(), eval.AgentTurn{Index: 1, Kind: "initial", Text: req.Prompt})
	if err != nil {
		t.Fatal(err)
	}
	want := "permission files.read: allow-once\npermission aml.lookup: allow-once\npermission stranger.run: reject-once\n"
	if r.Text != want {
		t.Fatalf("text = %q, want %q", r.Text, want)
	}
}

// TestGrantedCallMatchedByID: a permission request that names a call
// differently from the agent's tool_call update (Copilot announces
// "aml-lookup" or "files-write" and asks for "lookup", "write" or the
// tool's title) is matched to the call by its id, for the bridge and for
// granted servers; calls announced under other names, or with a free-text
// title after a server's name, stay rejected.
func TestGrantedCallMatchedByID(t *testing.T) {
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up.", Execute: func(context.Context, any) (any, error) { return "x", nil }})
	req := &eval.AgentRequest{
		Prompt:      "renamed-tool aml-lookup lookup\nrenamed-tool aml_aml_submit_result aml_submit_result\nrenamed-tool files-write write\nrenamed-tool stranger-lookup lookup\nrenamed-tool stranger-write write\nrenamed-tool bash shell\nrenamed-tool files-x Write File\nrenamed-tool files-(free:text) run",
		Permissions: eval.Permissions{Filesystem: "read-only"},
		MCPServers:  []eval.AgentMCPServer{{Name: "files", Server: &eval.MCPServer{Name: "files", Transport: eval.MCPTransport{Type: "stdio", Command: "srv"}}}},
		Tools:       []*eval.AgentTool{eval.NewAgentTool(tool)},
		Output:      &eval.OutputRequest{JSONSchema: map[string]any{"type": "string"}},
		ToolServer:  "aml",
	}
	s, err := fake(t, nil).OpenSession(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	r, err := s.RunTurn(context.Background(), eval.AgentTurn{Index: 1, Kind: "initial", Text: req.Prompt})
	if err != nil {
		t.Fatal(err)
	}
	want := "permission lookup: allow-once\npermission aml_submit_result: allow-once\npermission write: allow-once\npermission lookup: reject-once\npermission write: reject-once\npermission shell: reject-once\npermission Write File: allow-once\npermission run: reject-once\n"
	if r.Text != want {
		t.Fatalf("text = %q, want %q", r.Text, want)
	}
}

func TestMCPDescriptors(t *testing.T) {
	req := &eval.AgentRequest{Prompt: "mcp", MCPServers: []eval.AgentMCPServer{
		{Name: "files", Server: &eval.MCPServer{Name: "files", Transport: eval.MCPTransport{Type: "stdio", Command: "srv", Args: []string{"-v"}, Env: map[string]string{"B": "2", "A": "1"}}}},
		{Name: "web", Server: &eval.MCPServer{Name: "web", Transport: eval.MCPTransport{Type: "streamable-http", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"X-Key": "k"}}}},
	}}
	resp, err := fake(t, nil).Run(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"args":["-v"],"command":"srv","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"name":"files"},{"headers":[{"name":"X-Key","value":"k"}],"name":"web","type":"http","url":"http://127.0.0.1:9/mcp"}]`
	if resp.Text != want {
		t.Fatalf("mcp servers =\n%s\nwant\n%s", resp.Text, want)
	}
	// An agent without HTTP MCP support fails closed.
	_, err = fake(t, map[string]string{"AML_FAKE_ACP_MODE": "no-http"}).Run(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "mcpCapabilities.http") {
		t.Fatalf("no-http error = %v", err)
	}
	// Named grants and stdio cwd are rejected before launch.
	_, err = fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: "x", MCPServers: []eval.AgentMCPServer{{Name: "native"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), `cannot verify named MCP server "native"`) {
		t.Fatalf("named grant error = %v", err)
	}
	_, err = fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: "x", MCPServers: []eval.AgentMCPServer{
		{Name: "s", Server: &eval.MCPServer{Name: "s", Transport: eval.MCPTransport{Type: "stdio", Command: "x", Cwd: "/tmp"}}}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "stdio cwd") {
		t.Fatalf("stdio cwd error = %v", err)
	}
}

func TestCwdAndEnv(t *testing.T) {
	dir := t.TempDir()
	cmd, env := acptest.Command()
	env["AML_TEST_SECRET"] = "s3cret"
	p, err := acp.New(acp.Config{Command: cmd, Env: env, WorkingDirectory: dir})
	if err != nil {
		t.Fatal(err)
	}
	rec := &tracetest.Recorder{}
	out, err := run(t, p, &eval.Agent{Children: []any{"cwd\nenv AML_TEST_SECRET"}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if out != real+"s3cret" {
		t.Fatalf("out = %q, want cwd %q and the env value", out, real)
	}
	// Env values never reach traces, not even with content capture.
	for _, e := range rec.Events() {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "s3cret") {
			t.Fatalf("secret in trace event %s: %s", e.Name, b)
		}
	}
}

func TestProcessExitMidTurn(t *testing.T) {
	_, err := fake(t, nil).Run(context.Background(), &eval.AgentRequest{Prompt: "say partial\nstderr boom: disk on fire\nexit 7"}, nil)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"exited with code 7 during turn 1", "boom: disk on fire"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = fake(t, map[string]string{"AML_FAKE_ACP_MODE": "exit-init"}).Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "exited with code 3 during initialize: fake agent: refusing to initialize") {
		t.Fatalf("init exit error = %v", err)
	}
}

func TestProtocolFaults(t *testing.T) {
	_, err := fake(t, map[string]string{"AML_FAKE_ACP_MODE": "version2"}).Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "protocol version 2") {
		t.Fatalf("version error = %v", err)
	}
	rec := &tracetest.Recorder{}
	out, err := run(t, fake(t, nil), &eval.Agent{Children: []any{"nonjson hello from a banner\nunknown\nsay ok"}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out != "ok" {
		t.Fatalf("out = %q", out)
	}
	probs := rec.Named("acp.protocol.problem")
	if len(probs) < 2 {
		t.Fatalf("protocol problems reported = %d, want the plain line and the unknown update: %v", len(probs), probs)
	}
}

func TestMissingExecutable(t *testing.T) {
	p, err := acp.New(acp.Config{Command: "aml-no-such-agent"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"aml-no-such-agent" not found: install it or put it on PATH`) {
		t.Fatalf("error = %v", err)
	}
}

func TestAuthenticate(t *testing.T) {
	cmd, env := acptest.Command()
	env["AML_FAKE_ACP_MODE"] = "auth"
	p, _ := acp.New(acp.Config{Command: cmd, Env: env})
	if _, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "x"}, nil); err == nil {
		t.Fatal("session/new without authenticate should fail")
	}
	p, _ = acp.New(acp.Config{Command: cmd, Env: env, AuthMethodID: "fake-key"})
	resp, err := p.Run(context.Background(), &eval.AgentRequest{Prompt: "say in"}, nil)
	if err != nil || resp.Text != "in" {
		t.Fatalf("authenticated run = %v, %v", resp, err)
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// hangBound bounds waits that only a real hang exceeds.
const hangBound = time.Minute

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(hangBound)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after cleanup", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCancelKillsProcessTree: cancelling a turn while the agent hangs in
// it (honouring session/cancel or not) returns the cause, and Close kills
// the agent's whole tree, the child it started included. The cancellation
// comes from the trace sink on the agent's first session/update of the
// hanging turn, so the agent is inside the prompt whatever the machine's
// load.
func TestCancelKillsProcessTree(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to observe processes (Linux)")
	}
	for _, script := range []string{"hang", "hang-hard"} {
		t.Run(script, func(t *testing.T) {
			p := fake(t, nil)
			var onUpdate atomic.Pointer[func()]
			trace := emitterFunc(func(name string) {
				if f := onUpdate.Load(); f != nil && name == "acp.session.update" {
					(*f)()
				}
			})
			s, err := p.OpenSession(context.Background(), &eval.AgentRequest{Prompt: "child"}, &eval.AgentExecution{Trace: trace})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.RunTurn(context.Background(), eval.AgentTurn{Index: 1, Kind: "initial", Text: "child"})
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(r.Text)
			if !alive(pid) {
				t.Fatalf("child %d not running", pid)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			stop := errors.New("operator stop")
			var once sync.Once
			cancelOnce := func() { once.Do(func() { cancel(stop) }) }
			onUpdate.Store(&cancelOnce)
			start := time.Now()
			turn := make(chan error, 1)
			go func() {
				_, err := s.RunTurn(ctx, eval.AgentTurn{Index: 2, Kind: "follow-up", Text: "say hanging\n" + script})
				turn <- err
			}()
			select {
			case err = <-turn:
			case <-time.After(hangBound):
				t.Fatalf("the turn did not end within %s of its cancellation", hangBound)
			}
			if !errors.Is(err, stop) {
				t.Fatalf("turn error = %v, want the cancellation cause", err)
			}
			cctx, ccancel := context.WithTimeout(context.Background(), hangBound)
			defer ccancel()
			if err := s.Close(cctx); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > hangBound {
				t.Fatalf("cancellation took %s", d)
			}
			waitGone(t, pid)
		})
	}
}

// emitterFunc is an eval.TraceEmitter that hands each event name to f.
type emitterFunc func(name string)

func (f emitterFunc) Event(name string, _, _ map[string]any) { f(name) }
func (emitterFunc) CapturesContent() bool                    { return false }

func TestLingeringAgentIsKilled(t *testing.T) {
	resp, err := fake(t, map[string]string{"AML_FAKE_ACP_MODE": "linger"}).Run(context.Background(), &eval.AgentRequest{Prompt: "say done"}, nil)
	if err != nil || resp.Text != "done" {
		t.Fatalf("run = %v, %v", resp, err)
	}
}

// TestTimeout: timeout_ms ends a hanging session with an
// AgentTimeoutError and one cancellation_requested event, whichever phase
// (launch, handshake or prompt) the deadline reaches; an ACP
// session/cancel is sent exactly when a prompt was in flight. The
// assertions hold on a loaded machine too: nothing depends on how far the
// session got in 200 ms.
func TestTimeout(t *testing.T) {
	rec := &tracetest.Recorder{}
	_, err := run(t, fake(t, nil), &eval.Agent{TimeoutMS: 200, Children: []any{"hang-hard"}}, rec)
	var te *eval.AgentTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v, want an AgentTimeoutError", err)
	}
	if states := sessionStates(rec); len(states) != 1 || states[0] != "cancellation_requested" {
		t.Fatalf("agent.session events = %v", states)
	}
	submitted, cancels := len(rec.Named("acp.session.prompt.submitted")), len(rec.Named("acp.session.cancel"))
	if cancels != submitted {
		t.Fatalf("acp.session.cancel events = %d for %d submitted prompts", cancels, submitted)
	}
}

// TestCancelDuringPrompt: a cancellation that arrives while a prompt is in
// flight (triggered by the prompt.submitted event itself, not by a timer)
// sends session/cancel, records cancellation_requested and keeps the
// cause.
func TestCancelDuringPrompt(t *testing.T) {
	rec := &tracetest.Recorder{}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := errors.New("operator stop")
	trigger := cancelOn{name: "acp.session.prompt.submitted", cancel: func() { cancel(stop) }}
	rt, err := eval.New(eval.Options{Trace: []eval.TraceSink{rec, &trigger}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Evaluate(ctx, &eval.Agent{Provider: fake(t, nil), Children: []any{"hang-hard"}})
	if !errors.Is(err, stop) {
		t.Fatalf("error = %v, want the cancellation cause", err)
	}
	if states := sessionStates(rec); len(states) != 1 || states[0] != "cancellation_requested" {
		t.Fatalf("agent.session events = %v", states)
	}
	if n := len(rec.Named("acp.session.cancel")); n != 1 {
		t.Fatalf("acp.session.cancel events = %d, want 1", n)
	}
}

// cancelOn is a trace sink that calls cancel once, on the first event
// named name.
type cancelOn struct {
	name   string
	cancel func()
	once   sync.Once
}

func (c *cancelOn) HandleTrace(e eval.Event) error {
	if e.Name == c.name {
		c.once.Do(c.cancel)
	}
	return nil
}

func sessionStates(rec *tracetest.Recorder) []string {
	var states []string
	for _, e := range rec.Named("agent.session") {
		if e.Type == eval.PointEvent {
			states = append(states, fmt.Sprint(e.Attributes["state"]))
		}
	}
	return states
}

func TestNewValidates(t *testing.T) {
	for _, c := range []acp.Config{{}, {Command: " "}, {Command: "a\x00b"}, {Command: "x", Args: []string{"\x00"}}, {Command: "x", Env: map[string]string{"A=B": "1"}}} {
		if _, err := acp.New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}
