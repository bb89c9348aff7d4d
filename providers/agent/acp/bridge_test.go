package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tracetest"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

func lookupTool(t *testing.T, calls *atomic.Int64) *eval.Tool {
	t.Helper()
	in, err := eval.NewSchema(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"id": map[string]any{"type": "integer"}},
		"required":             []any{"id"},
		"additionalProperties": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	tool, err := eval.NewTool(eval.ToolOptions{Name: "lookup", Description: "Look up a record by id.", Input: in,
		Execute: func(_ context.Context, input any) (any, error) {
			calls.Add(1)
			id := input.(map[string]any)["id"]
			if fmt.Sprint(id) == "13" {
				return nil, errors.New("record 13 is unlucky")
			}
			return map[string]any{"id": id, "name": fmt.Sprintf("record %v", id)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestBridgeTools(t *testing.T) {
	var calls atomic.Int64
	tool := lookupTool(t, &calls)
	rec := &tracetest.Recorder{}
	out, err := run(t, fake(t, nil), &eval.Agent{Children: []any{
		&eval.ToolGrant{Tool: tool},
		"tools\ncall lookup {\"id\":7}\ncall lookup {\"id\":\"x\"}\ncall lookup {\"id\":13}",
	}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("out = %q", out)
	}
	if lines[0] != "lookup" {
		t.Errorf("tools = %q, want only the granted tool (no submission tool without schema=)", lines[0])
	}
	if lines[1] != `result: {"id":7,"name":"record 7"}` {
		t.Errorf("call = %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "error: ") || !strings.Contains(lines[2], "id") {
		t.Errorf("invalid input = %q, want a validation error", lines[2])
	}
	if !strings.HasPrefix(lines[3], "error: ") || !strings.Contains(lines[3], "record 13 is unlucky") {
		t.Errorf("failing tool = %q", lines[3])
	}
	if calls.Load() != 2 {
		t.Errorf("tool ran %d times, want 2 (invalid input never runs it)", calls.Load())
	}
}

func TestBridgeThroughStdioRelay(t *testing.T) {
	var calls atomic.Int64
	tool := lookupTool(t, &calls)
	cmd, env := acptest.Command()
	env["AML_FAKE_ACP_MODE"] = "no-http"
	relay := acptest.RelayCommand()
	p, err := acp.New(acp.Config{Command: cmd, Env: env, Relay: relay})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, p, &eval.Agent{Children: []any{&eval.ToolGrant{Tool: tool}, `call lookup {"id":5}`}})
	if err != nil {
		t.Fatal(err)
	}
	if out != `result: {"id":5,"name":"record 5"}`+"\n" {
		t.Fatalf("out = %q", out)
	}
	// Without a relay, an agent without HTTP MCP cannot get tools.
	p, _ = acp.New(acp.Config{Command: cmd, Env: env, Relay: []string{}})
	_, err = run(t, p, &eval.Agent{Children: []any{&eval.ToolGrant{Tool: tool}, "say x"}})
	if err == nil || !strings.Contains(err.Error(), "no stdio relay is configured") {
		t.Fatalf("error = %v", err)
	}
}

func TestBridgeRejectsStrangers(t *testing.T) {
	ctx := context.Background()
	req := &eval.AgentRequest{Prompt: "mcp", Output: &eval.OutputRequest{JSONSchema: map[string]any{"type": "string"}}}
	sess, err := fake(t, nil).OpenSession(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sess.RunTurn(ctx, eval.AgentTurn{Index: 1, Kind: "initial", Text: "mcp"})
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct {
		Name    string `json:"name"`
		URL     string `json:"url"`
		Headers []struct{ Name, Value string }
	}
	if err := json.Unmarshal([]byte(r.Text), &servers); err != nil || len(servers) != 1 || servers[0].Name != "aml" {
		t.Fatalf("servers = %s (%v)", r.Text, err)
	}
	url, auth := servers[0].URL, servers[0].Headers[0].Value
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasPrefix(auth, "Bearer ") {
		t.Fatalf("bridge at %q with %q: want loopback and a bearer secret", url, auth)
	}
	do := func(method, authorization string) int {
		hr, _ := http.NewRequest(method, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Accept", "application/json, text/event-stream")
		if authorization != "" {
			hr.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := do("POST", ""); c != http.StatusNotFound {
		t.Errorf("no secret: %d, want 404", c)
	}
	if c := do("POST", "Bearer wrong"); c != http.StatusNotFound {
		t.Errorf("wrong secret: %d, want 404", c)
	}
	if c := do("GET", auth); c != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", c)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := do("POST", auth); c != -1 {
		t.Errorf("after Close the bridge still answers: %d", c)
	}
}

func schemaAgent(script ...string) *eval.Agent {
	s, _ := eval.NewSchema(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"verdict": map[string]any{"enum": []any{"pass", "fail"}}},
		"required":             []any{"verdict"},
		"additionalProperties": false,
	})
	children := []any{script[0]}
	for _, f := range script[1:] {
		children = append(children, &eval.FollowUp{Children: []any{f}})
	}
	return &eval.Agent{Schema: s, Children: children}
}

func TestStructuredSubmission(t *testing.T) {
	cases := []struct {
		name    string
		script  []string
		want    string
		wantErr string
		outputs []string
	}{
		{name: "valid", script: []string{`submit {"verdict":"pass"}`}, want: `{"verdict":"pass"}`, outputs: []string{"accepted"}},
		{name: "invalid then valid", script: []string{`submit {"verdict":"maybe"}` + "\n" + `submit {"verdict":"fail"}`}, want: `{"verdict":"fail"}`, outputs: []string{"invalid", "accepted"}},
		{name: "duplicate is ignored", script: []string{`submit {"verdict":"pass"}` + "\n" + `submit {"verdict":"fail"}`}, want: `{"verdict":"pass"}`, outputs: []string{"accepted", "ignored"}},
		{name: "premature", script: []string{`submit {"verdict":"fail"}`, `submit {"verdict":"pass"}`}, want: `{"verdict":"pass"}`, outputs: []string{"invalid", "accepted"}},
		{name: "missing twice fails", script: []string{"say no tool for me"}, wantErr: "without submitting a valid structured result", outputs: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &tracetest.Recorder{}
			out, err := run(t, fake(t, nil), schemaAgent(c.script...), rec)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want %q", err, c.wantErr)
				}
				// The repair prompt was sent: two prompts in the final turn.
				if n := len(rec.Named("acp.session.prompt.submitted")); n != 2 {
					t.Fatalf("prompts = %d, want the turn and one repair", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out != c.want {
				t.Fatalf("out = %q, want %q", out, c.want)
			}
			var got []string
			for _, e := range rec.Named("agent.output") {
				got = append(got, e.Attributes["status"].(string))
			}
			if strings.Join(got, ",") != strings.Join(c.outputs, ",") {
				t.Fatalf("agent.output statuses = %v, want %v", got, c.outputs)
			}
		})
	}
}

func TestStructuredRepair(t *testing.T) {
	rec := &tracetest.Recorder{}
	out, err := run(t, fake(t, nil), schemaAgent(`on-repair {"verdict":"pass"}`), rec)
	if err != nil {
		t.Fatal(err)
	}
	if out != `{"verdict":"pass"}` {
		t.Fatalf("out = %q", out)
	}
	if n := len(rec.Named("acp.session.prompt.submitted")); n != 2 {
		t.Fatalf("prompts = %d, want the final turn and one repair", n)
	}
	if n := len(rec.Named("acp.session.prompt.completed")); n != 2 {
		t.Fatalf("completed prompts = %d, want 2", n)
	}
	if n := len(rec.Named("agent.turn")); n != 2 {
		t.Fatalf("agent.turn events = %d, want one span (start and end): the repair is inside the turn", n)
	}
}

// TestBridgeClosesIdleConnections: a connection that sends nothing, or
// stays idle after a request, is closed by the bridge instead of being
// kept open for the whole session.
func TestBridgeClosesIdleConnections(t *testing.T) {
	defer acp.SetBridgeTimeoutsForTest(200*time.Millisecond, 200*time.Millisecond)()
	ctx := context.Background()
	req := &eval.AgentRequest{Prompt: "mcp", Output: &eval.OutputRequest{JSONSchema: map[string]any{"type": "string"}}}
	sess, err := fake(t, nil).OpenSession(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	r, err := sess.RunTurn(ctx, eval.AgentTurn{Index: 1, Kind: "initial", Text: "mcp"})
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct {
		URL     string
		Headers []struct{ Name, Value string }
	}
	if err := json.Unmarshal([]byte(r.Text), &servers); err != nil || len(servers) != 1 {
		t.Fatalf("servers = %s (%v)", r.Text, err)
	}
	u, err := url.Parse(servers[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, keepAlive := range []bool{false, true} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(conn)
		if keepAlive {
			// One authorized request, answered; then the connection idles.
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
				u.Path, u.Host, servers[0].Headers[0].Value, len(body), body)
			resp, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		// The server closes the connection (a read sees EOF) once its
		// timeout passes; the deadline only catches a hang.
		_ = conn.SetReadDeadline(time.Now().Add(hangBound))
		if _, err := rd.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("keep-alive %v: the connection was kept open: %v", keepAlive, err)
		}
		conn.Close()
	}
}
