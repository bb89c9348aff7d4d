package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// messages serves Anthropic's Messages API (POST /v1/messages), streamed
// and not, with tool use. The request fields it honours: model, stream,
// system (a string or text blocks), messages (string content, or text,
// tool_use and tool_result blocks), tools (their names) and
// output_config.format (a json_schema, Request.Schema). Every answer
// reports 10 input and 5 output tokens: message_start says the input and
// one output token, message_delta the output so far, as the service does.
func (s *Server) messages(w http.ResponseWriter, hr *http.Request) {
	var body struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		System   any    `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		OutputConfig struct {
			Format struct {
				Type   string         `json:"type"`
				Schema map[string]any `json:"schema"`
			} `json:"format"`
		} `json:"output_config"`
	}
	raw, err := readBody(hr)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if body.Model == "" || len(body.Messages) == 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model and messages are required")
		return
	}
	req := &Request{API: "messages", Model: body.Model, Stream: body.Stream, Raw: raw}
	if f := body.OutputConfig.Format; f.Type == "json_schema" {
		req.Schema = f.Schema
	}
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	if sys := text(body.System); sys != "" {
		req.Messages = append(req.Messages, Message{Role: "system", Text: sys})
	}
	for _, m := range body.Messages {
		blocks, ok := m.Content.([]any)
		if !ok {
			req.Messages = append(req.Messages, Message{Role: m.Role, Text: text(m.Content)})
			continue
		}
		msg := Message{Role: m.Role}
		for _, b := range blocks {
			block, _ := b.(map[string]any)
			switch block["type"] {
			case "text":
				t, _ := block["text"].(string)
				msg.Text += t
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, fmt.Sprint(block["name"]))
			case "tool_result":
				// A result is a message of its own, as the other APIs
				// carry it.
				req.Messages = append(req.Messages, Message{Role: "tool", Text: text(block["content"])})
			}
		}
		if msg.Text != "" || len(msg.ToolCalls) > 0 {
			req.Messages = append(req.Messages, msg)
		}
	}
	id := "msg_" + s.record(req)
	reply := s.respond(req)
	var content []any
	if reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	for i, c := range reply.ToolCalls {
		var input any = map[string]any{}
		if c.Arguments != "" {
			if err := json.Unmarshal([]byte(c.Arguments), &input); err != nil {
				input = map[string]any{}
			}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%s_%d", id, i), "name": c.Name, "input": input})
	}
	stop := "end_turn"
	if len(reply.ToolCalls) > 0 {
		stop = "tool_use"
	}
	usage := func(output int) map[string]any {
		return map[string]any{"input_tokens": 10, "output_tokens": output, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	}
	message := func(content []any, stopReason any, output int) map[string]any {
		return map[string]any{"id": id, "type": "message", "role": "assistant", "model": body.Model, "content": content,
			"stop_reason": stopReason, "stop_sequence": nil, "usage": usage(output)}
	}
	if !body.Stream {
		if content == nil {
			content = []any{}
		}
		writeJSON(w, message(content, stop, 5))
		return
	}
	sse := newSSE(w)
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		sse.event(typ, fields)
	}
	event("message_start", map[string]any{"message": message([]any{}, nil, 1)})
	for i, c := range content {
		block := c.(map[string]any)
		switch block["type"] {
		case "text":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			// Two pieces, so that clients really assemble a stream.
			half := len(reply.Text) / 2
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": reply.Text[:half]}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": reply.Text[half:]}})
		case "tool_use":
			args, _ := json.Marshal(block["input"])
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	event("message_stop", map[string]any{})
}

// anthropicError answers as the Messages API fails a request.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
