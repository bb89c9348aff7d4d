// Package fakemodel is a scriptable model server for end-to-end tests of
// real agents offline. It speaks OpenAI's chat completions API (streamed
// and not, with tool calls) and Responses API (server-sent events, with
// function calls), Anthropic's Messages API (streamed and not, with
// tool use) and Google's Gemini API (generateContent and
// streamGenerateContent, with function calls), and records every request.
//
// The default script reads directives from the latest user message:
//
//	CALL NAME JSON   call the tool NAME (or the one whose name ends in
//	                 "_NAME" or "-NAME", as agents prefix MCP tools) with
//	                 the JSON arguments
//
// Directive lines run in order, one tool call per model request; after
// the last one the model answers "RESULT: " followed by the last tool
// result it received (without the <untrusted_context> element Gemini CLI
// wraps MCP results in). A message without directives is answered with
// "FAKE-REPLY: " and its first line. Context an agent puts before the
// prompt is not part of the message: the <current_datetime> element
// Copilot starts each user message with, the <system-reminder>
// elements of Qwen Code, and the <session_context> element the Gemini
// CLI starts a session's first message with, are skipped.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Message is one conversation message, reduced to what scripts need.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Text is the message's text content.
	Text string
	// ToolCalls are the names of tools an assistant message called.
	ToolCalls []string
}

// Request is one model request.
type Request struct {
	// API is "chat", "responses", "messages" or "gemini".
	API      string
	Model    string
	Stream   bool
	Messages []Message
	// Tools are the names of the offered tools.
	Tools []string
	// Schema is the JSON schema the request asks the answer to follow
	// (structured output), nil when it names none.
	Schema map[string]any
	// Raw is the request body.
	Raw json.RawMessage
}

// ToolCall is a tool call the model makes.
type ToolCall struct {
	Name      string
	Arguments string
}

// Reply is the model's answer: text, or tool calls.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
}

// Server is a running fake model server. It is safe for concurrent use.
type Server struct {
	// URL is the base URL of the OpenAI APIs, ending in /v1.
	URL string
	// AnthropicURL is the base URL of the Messages API, as Anthropic's
	// clients take it (ANTHROPIC_BASE_URL): the server's root.
	AnthropicURL string
	// GeminiURL is the base URL of the Gemini API, as Google's clients
	// take it (GOOGLE_GEMINI_BASE_URL, @google/genai's
	// httpOptions.baseUrl): the server's root, to which they add the API
	// version, /v1beta.
	GeminiURL string

	srv     *httptest.Server
	respond func(*Request) Reply

	mu       sync.Mutex
	requests []*Request
	seq      int
}

// Start starts a server on loopback; respond nil uses Script.
func Start(respond func(*Request) Reply) *Server {
	if respond == nil {
		respond = Script
	}
	s := &Server{respond: respond}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("POST /v1/messages", s.messages)
	// A Gemini method is MODEL:METHOD, one path segment.
	mux.HandleFunc("POST /v1beta/models/{rest}", s.gemini)
	mux.HandleFunc("POST /v1/models/{rest}", s.gemini)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "fake-model", "object": "model", "owned_by": "aml"}}})
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	s.AnthropicURL = s.srv.URL
	s.GeminiURL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

func (s *Server) record(r *Request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	s.seq++
	return fmt.Sprintf("%d", s.seq)
}

// Script is the default directive interpreter (see the package doc). A
// request that names a schema for its answer (structured output) is
// answered with the smallest value of that schema, as JSON text
// (SchemaValue).
func Script(r *Request) Reply {
	if r.Schema != nil {
		b, _ := json.Marshal(SchemaValue(r.Schema))
		return Reply{Text: string(b)}
	}
	last := -1
	for i, m := range r.Messages {
		if m.Role == "user" {
			last = i
		}
	}
	if last < 0 {
		return Reply{Text: "FAKE-REPLY"}
	}
	msg := userText(r.Messages[last].Text)
	var calls []ToolCall
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "CALL ")
		if !ok {
			continue
		}
		name, args, _ := strings.Cut(rest, " ")
		calls = append(calls, ToolCall{Name: resolveTool(r.Tools, name), Arguments: strings.TrimSpace(args)})
	}
	done, lastResult := 0, ""
	for _, m := range r.Messages[last+1:] {
		if m.Role == "tool" {
			done++
			lastResult = toolText(m.Text)
		}
	}
	if len(calls) == 0 {
		first, _, _ := strings.Cut(msg, "\n")
		return Reply{Text: "FAKE-REPLY: " + first}
	}
	if done < len(calls) {
		return Reply{ToolCalls: []ToolCall{calls[done]}}
	}
	return Reply{Text: "RESULT: " + lastResult}
}

// toolText is a tool result without the <untrusted_context> element
// Gemini CLI wraps MCP tool results in.
func toolText(s string) string {
	t := strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(t, "<untrusted_context>"); ok {
		if inner, ok := strings.CutSuffix(inner, "</untrusted_context>"); ok {
			return strings.TrimSpace(inner)
		}
	}
	return s
}

// SchemaValue returns the smallest value of a JSON schema: an object of
// its required properties, each the smallest value of its own schema; the
// first of an enum or const; "fake" for a string, its minimum (or 0) for
// a number, false for a boolean, an empty list for an array, and nil for
// anything else. Type names are read in either case, as Gemini's
// responseSchema spells them in capitals.
func SchemaValue(schema map[string]any) any {
	if c, ok := schema["const"]; ok {
		return c
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ := schema["type"]
	if list, ok := typ.([]any); ok && len(list) > 0 {
		typ = list[0]
	}
	if t, ok := typ.(string); ok {
		typ = strings.ToLower(t)
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		required, _ := schema["required"].([]any)
		for _, r := range required {
			name, _ := r.(string)
			sub, _ := props[name].(map[string]any)
			out[name] = SchemaValue(sub)
		}
		return out
	case "string":
		return "fake"
	case "number", "integer":
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	}
	return nil
}

// contextElements are the elements agents put before the prompt in a user
// message: Copilot's <current_datetime>, Qwen Code's <system-reminder>,
// the Gemini CLI's <session_context>.
var contextElements = []string{"current_datetime", "system-reminder", "session_context"}

// userText is a user message without the context elements an agent puts
// before the prompt.
func userText(s string) string {
	t := strings.TrimLeft(s, " \t\r\n")
	for stripped := true; stripped; {
		stripped = false
		for _, name := range contextElements {
			if rest, ok := strings.CutPrefix(t, "<"+name+">"); ok {
				if _, after, ok := strings.Cut(rest, "</"+name+">"); ok {
					t, stripped = strings.TrimLeft(after, " \t\r\n"), true
				}
			}
		}
	}
	if t == strings.TrimLeft(s, " \t\r\n") {
		return s
	}
	return t
}

// resolveTool finds the offered tool named name, allowing an agent's
// server prefix.
func resolveTool(tools []string, name string) string {
	for _, t := range tools {
		if t == name {
			return t
		}
	}
	for _, t := range tools {
		if strings.HasSuffix(t, "_"+name) || strings.HasSuffix(t, "-"+name) {
			return t
		}
	}
	return name
}

// text extracts the text of an OpenAI content value: a string or a list
// of parts.
func text(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					b.WriteString(t)
				}
			}
		}
		return b.String()
	}
	return ""
}

func (s *Server) chat(w http.ResponseWriter, hr *http.Request) {
	var body struct {
		Model    string           `json:"model"`
		Stream   bool             `json:"stream"`
		Messages []map[string]any `json:"messages"`
		Tools    []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			// A custom (freeform) tool, as Copilot offers apply_patch
			// to GPT-5 models.
			Custom struct {
				Name string `json:"name"`
			} `json:"custom"`
		} `json:"tools"`
	}
	raw, err := readBody(hr)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &Request{API: "chat", Model: body.Model, Stream: body.Stream, Raw: raw}
	for _, t := range body.Tools {
		name := t.Function.Name
		if name == "" {
			name = t.Custom.Name
		}
		req.Tools = append(req.Tools, name)
	}
	for _, m := range body.Messages {
		msg := Message{Role: fmt.Sprint(m["role"]), Text: text(m["content"])}
		if tcs, ok := m["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				if f, ok := tc.(map[string]any)["function"].(map[string]any); ok {
					msg.ToolCalls = append(msg.ToolCalls, fmt.Sprint(f["name"]))
				}
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	id := "chatcmpl-" + s.record(req)
	reply := s.respond(req)
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	calls := make([]map[string]any, len(reply.ToolCalls))
	for i, c := range reply.ToolCalls {
		calls[i] = map[string]any{"index": i, "id": fmt.Sprintf("call_%s_%d", id, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !body.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Text}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
			msg["content"] = nil
		}
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	sse := newSSE(w)
	chunk := func(delta map[string]any, finishReason any, extra map[string]any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}}}
		for k, v := range extra {
			c[k] = v
		}
		sse.data(c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if reply.Text != "" {
		// Two pieces, so that clients really assemble a stream.
		half := len(reply.Text) / 2
		chunk(map[string]any{"content": reply.Text[:half]}, nil, nil)
		chunk(map[string]any{"content": reply.Text[half:]}, nil, nil)
	}
	if len(calls) > 0 {
		chunk(map[string]any{"tool_calls": calls}, nil, nil)
	}
	chunk(map[string]any{}, finish, map[string]any{"usage": usage})
	sse.raw("[DONE]")
}

func (s *Server) responses(w http.ResponseWriter, hr *http.Request) {
	var body struct {
		Model        string `json:"model"`
		Stream       bool   `json:"stream"`
		Instructions string `json:"instructions"`
		Input        any    `json:"input"`
		Tools        []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	raw, err := readBody(hr)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &Request{API: "responses", Model: body.Model, Stream: body.Stream, Raw: raw}
	// A namespace tool groups functions (Codex puts each MCP server in
	// one); they are offered as NAMESPACE__NAME and called back with the
	// namespace field.
	type qualified struct{ ns, name string }
	namespaced := map[string]qualified{}
	for _, t := range body.Tools {
		if t.Type == "namespace" {
			for _, inner := range t.Tools {
				full := t.Name + "__" + inner.Name
				namespaced[full] = qualified{t.Name, inner.Name}
				req.Tools = append(req.Tools, full)
			}
			continue
		}
		if t.Name != "" {
			req.Tools = append(req.Tools, t.Name)
		}
	}
	switch in := body.Input.(type) {
	case string:
		req.Messages = append(req.Messages, Message{Role: "user", Text: in})
	case []any:
		for _, item := range in {
			m, _ := item.(map[string]any)
			switch m["type"] {
			case "function_call_output":
				req.Messages = append(req.Messages, Message{Role: "tool", Text: text(m["output"])})
			case "function_call":
				req.Messages = append(req.Messages, Message{Role: "assistant", ToolCalls: []string{fmt.Sprint(m["name"])}})
			default:
				if role, ok := m["role"].(string); ok {
					req.Messages = append(req.Messages, Message{Role: role, Text: text(m["content"])})
				}
			}
		}
	}
	id := "resp_" + s.record(req)
	reply := s.respond(req)
	var output []any
	if reply.Text != "" {
		output = append(output, map[string]any{"type": "message", "id": id + "_msg", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}})
	}
	for i, c := range reply.ToolCalls {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("%s_fc%d", id, i), "call_id": fmt.Sprintf("call_%s_%d", id, i),
			"name": c.Name, "arguments": c.Arguments, "status": "completed"}
		if q, ok := namespaced[c.Name]; ok {
			item["name"], item["namespace"] = q.name, q.ns
		}
		output = append(output, item)
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	resp := func(status string, out []any) map[string]any {
		r := map[string]any{"id": id, "object": "response", "model": body.Model, "status": status, "output": out}
		if status == "completed" {
			r["usage"] = usage
		}
		return r
	}
	if !body.Stream {
		writeJSON(w, resp("completed", output))
		return
	}
	sse := newSSE(w)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sse.event(typ, fields)
	}
	event("response.created", map[string]any{"response": resp("in_progress", []any{})})
	event("response.in_progress", map[string]any{"response": resp("in_progress", []any{})})
	for i, item := range output {
		it := item.(map[string]any)
		if it["type"] == "message" {
			added := map[string]any{"type": "message", "id": it["id"], "role": "assistant", "status": "in_progress", "content": []any{}}
			event("response.output_item.added", map[string]any{"output_index": i, "item": added})
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			event("response.content_part.added", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "part": part})
			event("response.output_text.delta", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "delta": reply.Text})
			event("response.output_text.done", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "text": reply.Text})
			done := map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}
			event("response.content_part.done", map[string]any{"output_index": i, "item_id": it["id"], "content_index": 0, "part": done})
		} else {
			added := map[string]any{}
			for k, v := range it {
				added[k] = v
			}
			added["arguments"], added["status"] = "", "in_progress"
			event("response.output_item.added", map[string]any{"output_index": i, "item": added})
			event("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": it["id"], "delta": it["arguments"]})
			event("response.function_call_arguments.done", map[string]any{"output_index": i, "item_id": it["id"], "arguments": it["arguments"]})
		}
		event("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	event("response.completed", map[string]any{"response": resp("completed", output)})
}

func readBody(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (s *sse) data(v any) {
	b, _ := json.Marshal(v)
	s.raw(string(b))
}

func (s *sse) raw(data string) {
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if s.f != nil {
		s.f.Flush()
	}
}
