package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/aml-go/aml/eval"
)

// client answers the agent's requests for one session. AML advertises no
// fs or terminal capability, so those methods are refused; permission
// requests are answered from the agent's AML permissions.
type client struct {
	s *session
}

var _ acpsdk.Client = (*client)(nil)

// SessionUpdate consumes one session/update notification in order.
func (c *client) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	s := c.s
	u := n.Update
	kind, toolName := updateKind(u)
	if got := discriminator(u); kind == "" || got != kind {
		msg := fmt.Sprintf("unknown session update %q", got)
		s.problem(msg)
		s.trace.Event("acp.protocol.problem", map[string]any{"message": msg}, nil)
		return errors.New(msg)
	}
	s.trackToolCall(u)
	attrs := map[string]any{"sessionId": string(n.SessionId), "sessionUpdate": kind}
	if toolName != "" {
		attrs["toolName"] = toolName
	}
	var content map[string]any
	if s.trace.CapturesContent() {
		if b, err := json.Marshal(u); err == nil {
			content = map[string]any{"update": string(b)}
		}
	}
	s.trace.Event("acp.session.update", attrs, content)
	if uu := u.UsageUpdate; uu != nil && uu.Cost != nil && s.watch != nil && n.SessionId == s.id &&
		(uu.Cost.Currency == "" || strings.EqualFold(uu.Cost.Currency, "USD")) {
		// An unmetered session's agent reports its cumulative cost: a
		// budget it crosses stops the turn now, not at its end.
		if err := s.watch.ReportCost(uu.Cost.Amount); err != nil {
			s.stop(err)
		}
	}
	if m := u.AgentMessageChunk; m != nil && m.Content.Text != nil && !s.dropChunk(m.Content.Text.Text) {
		s.mu.Lock()
		if t := s.turn; t != nil && n.SessionId == s.id {
			t.text.WriteString(m.Content.Text.Text)
			if m.MessageId == nil || *m.MessageId == "" {
				t.missingID = true
			} else {
				b := t.byID[*m.MessageId]
				if b == nil {
					b = new(strings.Builder)
					t.byID[*m.MessageId] = b
					t.order = append(t.order, *m.MessageId)
				}
				b.WriteString(m.Content.Text.Text)
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// dropChunk reports whether the launch leaves a message chunk out of the
// text (Launch.DropMessageChunk).
func (s *session) dropChunk(text string) bool {
	return s.launch != nil && s.launch.DropMessageChunk != nil && s.launch.DropMessageChunk(text)
}

// discriminator is the sessionUpdate field the agent sent. The SDK decodes
// an unknown kind into whichever variant its fields fit, so the decoded
// variant alone does not prove the kind is known.
func discriminator(u acpsdk.SessionUpdate) string {
	v := reflect.ValueOf(u)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if d := f.Elem().FieldByName("SessionUpdate"); d.IsValid() && d.Kind() == reflect.String {
			return d.String()
		}
	}
	return ""
}

// updateKind names a session update as ACP does, and the tool of an
// initial tool_call.
func updateKind(u acpsdk.SessionUpdate) (kind, toolName string) {
	switch {
	case u.AgentMessageChunk != nil:
		return "agent_message_chunk", ""
	case u.AgentThoughtChunk != nil:
		return "agent_thought_chunk", ""
	case u.UserMessageChunk != nil:
		return "user_message_chunk", ""
	case u.ToolCall != nil:
		return "tool_call", u.ToolCall.Title
	case u.ToolCallUpdate != nil:
		return "tool_call_update", ""
	case u.Plan != nil:
		return "plan", ""
	case u.AvailableCommandsUpdate != nil:
		return "available_commands_update", ""
	case u.CurrentModeUpdate != nil:
		return "current_mode_update", ""
	case u.ConfigOptionUpdate != nil:
		return "config_option_update", ""
	case u.SessionInfoUpdate != nil:
		return "session_info_update", ""
	case u.UsageUpdate != nil:
		return "usage_update", ""
	}
	return "", ""
}

// RequestPermission answers non-interactively from the AML permissions:
// calls to granted tools and MCP servers are allowed; otherwise reads
// (and searches, thinking) are allowed; edit, delete and move only with
// filesystem "read-write"; execute only with shell; fetch only with
// network; anything else is rejected. An allowed request picks an
// allow_once option, a rejected one a reject_once option; a reject never
// falls back to an allow.
func (c *client) RequestPermission(_ context.Context, r acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	kind := acpsdk.ToolKindOther
	if r.ToolCall.Kind != nil {
		kind = *r.ToolCall.Kind
	}
	allow := Allows(c.s.req.Permissions, kind)
	granted := false
	if !allow && c.s.grantedCall(r.ToolCall) {
		// A call to a tool or MCP server the author granted to this agent
		// (the AML bridge included) is allowed whatever its kind.
		allow, granted = true, true
	}
	want := []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways}
	if allow {
		want = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways}
	}
	outcome := acpsdk.NewRequestPermissionOutcomeCancelled()
	decision := "cancelled"
	for _, w := range want {
		if id, ok := findOption(r.Options, w); ok {
			outcome = acpsdk.NewRequestPermissionOutcomeSelected(id)
			decision = string(w)
			break
		}
	}
	c.s.trace.Event("acp.session.permission", map[string]any{"sessionId": string(r.SessionId), "toolKind": string(kind), "decision": decision, "granted": granted}, nil)
	return acpsdk.RequestPermissionResponse{Outcome: outcome}, nil
}

func findOption(opts []acpsdk.PermissionOption, kind acpsdk.PermissionOptionKind) (acpsdk.PermissionOptionId, bool) {
	for _, o := range opts {
		if o.Kind == kind {
			return o.OptionId, true
		}
	}
	return "", false
}

// Allows reports whether AML permissions p allow an ACP tool call of the
// given kind.
func Allows(p eval.Permissions, kind acpsdk.ToolKind) bool {
	switch kind {
	case acpsdk.ToolKindRead, acpsdk.ToolKindSearch, acpsdk.ToolKindThink:
		return true
	case acpsdk.ToolKindEdit, acpsdk.ToolKindDelete, acpsdk.ToolKindMove:
		return p.Filesystem == eval.ReadWrite
	case acpsdk.ToolKindExecute:
		return p.Shell
	case acpsdk.ToolKindFetch:
		return p.Network
	}
	return false
}

func refuse(method string) error { return acpsdk.NewMethodNotFound(method) }

// ReadTextFile is refused: AML does not advertise fs capabilities.
func (c *client) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, refuse(acpsdk.ClientMethodFsReadTextFile)
}

// WriteTextFile is refused: AML does not advertise fs capabilities.
func (c *client) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, refuse(acpsdk.ClientMethodFsWriteTextFile)
}

// CreateTerminal is refused: AML does not advertise terminal capabilities.
func (c *client) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, refuse(acpsdk.ClientMethodTerminalCreate)
}

// KillTerminal is refused.
func (c *client) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, refuse(acpsdk.ClientMethodTerminalKill)
}

// TerminalOutput is refused.
func (c *client) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, refuse(acpsdk.ClientMethodTerminalOutput)
}

// ReleaseTerminal is refused.
func (c *client) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, refuse(acpsdk.ClientMethodTerminalRelease)
}

// WaitForTerminalExit is refused.
func (c *client) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, refuse(acpsdk.ClientMethodTerminalWaitForExit)
}

// toolInfo is what the session knows of one tool call.
type toolInfo struct {
	title    string
	rawInput any
}

// trackToolCall remembers the title and raw input of tool calls, which a
// later permission request may refer to by id only.
func (s *session) trackToolCall(u acpsdk.SessionUpdate) {
	var id acpsdk.ToolCallId
	var info toolInfo
	switch {
	case u.ToolCall != nil:
		id, info = u.ToolCall.ToolCallId, toolInfo{title: u.ToolCall.Title, rawInput: u.ToolCall.RawInput}
	case u.ToolCallUpdate != nil:
		id = u.ToolCallUpdate.ToolCallId
		if u.ToolCallUpdate.Title != nil {
			info.title = *u.ToolCallUpdate.Title
		}
		info.rawInput = u.ToolCallUpdate.RawInput
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.toolCalls == nil {
		s.toolCalls = map[acpsdk.ToolCallId]toolInfo{}
	}
	old := s.toolCalls[id]
	if info.title == "" {
		info.title = old.title
	}
	if info.rawInput == nil {
		info.rawInput = old.rawInput
	}
	s.toolCalls[id] = info
	if s.toolCallsChanged != nil {
		close(s.toolCallsChanged)
		s.toolCallsChanged = nil
	}
}

// grantedCall reports whether a permission request is for a call to the
// AML tool bridge or to an MCP server granted with mcp(). The request is
// matched by what it says of the call and, failing that, by its
// toolCallId to what the agent's tool_call updates said: agents may name
// one call differently in each. Copilot announces "<server>-<tool>"
// ("aml-lookup", "files-write") and asks permission under the tool's name
// or title ("lookup", "Write File"); Codex asks by id only.
func (s *session) grantedCall(tc acpsdk.ToolCallUpdate) bool {
	info := toolInfo{rawInput: tc.RawInput}
	if tc.Title != nil {
		info.title = *tc.Title
	}
	if s.grantedInfo(info) {
		return true
	}
	if tc.ToolCallId == "" {
		return false
	}
	// Requests are handled concurrently with the ordered notifications,
	// so the tool_call update that describes the call may still be in
	// flight.
	known, ok := s.awaitToolCall(tc.ToolCallId)
	return ok && s.grantedInfo(known)
}

// grantedInfo reports whether a tool call names a granted server or
// bridge tool: by the server named in the raw input, or by the title
// agents give MCP calls: "mcp.<server>.<tool>", "mcp__<server>__<tool>",
// "<server>-<tool>" or "<tool> (<server> MCP Server): …" where <tool> is
// a name (no spaces), or for the bridge's own tools "<server>_<tool>".
func (s *session) grantedInfo(info toolInfo) bool {
	servers := make([]string, 0, len(s.req.MCPServers)+1)
	for _, m := range s.req.MCPServers {
		servers = append(servers, m.Name)
	}
	if s.bridge != nil {
		servers = append(servers, s.bridgeName)
	}
	if m, ok := info.rawInput.(map[string]any); ok {
		if name, ok := m["server"].(string); ok && slices.Contains(servers, name) {
			return true
		}
	}
	if info.title == "" {
		return false
	}
	for _, name := range servers {
		if strings.HasPrefix(info.title, "mcp."+name+".") || strings.HasPrefix(info.title, "mcp__"+name+"__") {
			return true
		}
		if tool, ok := strings.CutPrefix(info.title, name+"-"); ok && isToolName(tool) {
			return true
		}
		// Gemini CLI and Qwen Code: "<tool> (<server> MCP Server): <args>".
		if tool, rest, ok := strings.Cut(info.title, " ("+name+" MCP Server)"); ok && isToolName(tool) && (rest == "" || strings.HasPrefix(rest, ":")) {
			return true
		}
	}
	if s.bridge != nil {
		names := []string{}
		for _, t := range s.req.Tools {
			names = append(names, t.Name)
		}
		if s.req.Output != nil {
			names = append(names, SubmitToolName)
		}
		for _, t := range names {
			if info.title == s.bridgeName+"_"+t {
				return true
			}
		}
	}
	return false
}

// isToolName reports whether s looks like an MCP tool name rather than
// free text: non-empty, of letters, digits, "_", "-" and ".".
func isToolName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// awaitToolCall returns what is known of a tool call, waiting up to
// toolCallGrace for its tool_call update to be processed: it is woken by
// each update as it is recorded, so that a described call is answered at
// once and only a call never described waits the whole bound.
func (s *session) awaitToolCall(id acpsdk.ToolCallId) (toolInfo, bool) {
	t := time.NewTimer(toolCallGrace)
	defer t.Stop()
	for {
		s.mu.Lock()
		info, ok := s.toolCalls[id]
		if s.toolCallsChanged == nil {
			s.toolCallsChanged = make(chan struct{})
		}
		changed := s.toolCallsChanged
		s.mu.Unlock()
		if ok {
			return info, true
		}
		select {
		case <-changed:
		case <-t.C:
			return toolInfo{}, false
		}
	}
}

// toolCallGrace bounds the wait for a tool call's description. The
// agent sends the description before the request, but the two are
// handled apart, and on a loaded machine the description's handling can
// lag by more than a fraction of a second (Qwen Code's requests name MCP
// calls only by id, so a short bound rejected granted calls there).
var toolCallGrace = 5 * time.Second
