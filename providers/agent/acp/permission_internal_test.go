package acp

import (
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
)

// TestPermissionByIDWaitsForTheDescription: a request that names a call
// by id only (as Qwen Code's do for MCP calls) is granted once the
// call's tool_call update is handled, even when that handling lags by
// far more than a moment, as on a loaded machine; a call never described
// is not granted once the bound passes.
func TestPermissionByIDWaitsForTheDescription(t *testing.T) {
	old := toolCallGrace
	toolCallGrace = 3 * time.Second
	t.Cleanup(func() { toolCallGrace = old })
	s := &session{req: &eval.AgentRequest{MCPServers: []eval.AgentMCPServer{{Name: "files"}}}}
	c := &client{s: s}
	title := "write_file (files MCP Server): {\"path\": \"a\"}"
	go func() {
		time.Sleep(800 * time.Millisecond)
		s.trackToolCall(acpsdk.SessionUpdate{ToolCall: &acpsdk.SessionUpdateToolCall{ToolCallId: "call-1", Title: title}})
	}()
	args := "{\"path\": \"a\"}"
	allowOnce := acpsdk.PermissionOption{OptionId: "yes", Kind: acpsdk.PermissionOptionKindAllowOnce, Name: "Allow"}
	rejectOnce := acpsdk.PermissionOption{OptionId: "no", Kind: acpsdk.PermissionOptionKindRejectOnce, Name: "Reject"}
	req := acpsdk.RequestPermissionRequest{SessionId: "s", Options: []acpsdk.PermissionOption{allowOnce, rejectOnce},
		ToolCall: acpsdk.ToolCallUpdate{ToolCallId: "call-1", Title: &args}}
	s.trace = noTrace{}
	start := time.Now()
	res, err := c.RequestPermission(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Selected == nil || res.Outcome.Selected.OptionId != "yes" {
		t.Errorf("a granted MCP call described late: %+v, want allowed", res.Outcome)
	}
	if d := time.Since(start); d >= toolCallGrace {
		t.Errorf("answered after %v: the description's arrival did not wake the wait", d)
	}

	req.ToolCall.ToolCallId = "call-2"
	res, err = c.RequestPermission(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Selected == nil || res.Outcome.Selected.OptionId != "no" {
		t.Errorf("a call never described: %+v, want rejected", res.Outcome)
	}
}

// noTrace records nothing.
type noTrace struct{}

func (noTrace) Event(string, map[string]any, map[string]any) {}
func (noTrace) CapturesContent() bool                        { return false }
