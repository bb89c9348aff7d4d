package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// geminiPart is one part of a Gemini content, reduced to the fields the
// fake honours.
type geminiPart struct {
	Text string `json:"text"`
	// Thought marks the model's thinking, which is not its answer.
	Thought      bool `json:"thought"`
	FunctionCall *struct {
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string `json:"name"`
		Response any    `json:"response"`
	} `json:"functionResponse"`
}

// gemini serves Google's Gemini API as @google/genai calls it (and so the
// Gemini CLI): POST /v1beta/models/MODEL:generateContent, a JSON
// GenerateContentResponse, and POST
// /v1beta/models/MODEL:streamGenerateContent, with ?alt=sse server-sent
// events each carrying a GenerateContentResponse, without it a JSON array
// of them; /v1/models/... is served the same. The request fields it
// honours: contents (roles "user" and "model"; text, functionCall and
// functionResponse parts), systemInstruction (its text parts),
// tools[].functionDeclarations[].name, and generationConfig's
// responseJsonSchema or responseSchema (Request.Schema); other parts
// (inline data, thoughts) and settings are ignored. A functionResponse
// part is a Message of role "tool" whose text is the response's output or
// content field when that is a string, else the response as JSON.
//
// An answer is candidates[0].content (role "model") with text or
// functionCall parts (name, args, and an id), finishReason "STOP" (the
// service's reason for function calls too), usageMetadata of 10 prompt and
// 5 candidate tokens, modelVersion and responseId. A stream sends text in
// two chunks, then the function calls, and puts finishReason and
// usageMetadata on its last chunk. Errors are Google's shape:
// {"error":{"code","message","status"}}.
func (s *Server) gemini(w http.ResponseWriter, hr *http.Request) {
	rest := hr.PathValue("rest")
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "method not found: "+hr.URL.Path)
		return
	}
	model, method := rest[:i], rest[i+1:]
	if method != "generateContent" && method != "streamGenerateContent" {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "method not found: "+method)
		return
	}
	var body struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		SystemInstruction struct {
			Parts []geminiPart `json:"parts"`
		} `json:"systemInstruction"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseSchema     map[string]any `json:"responseSchema"`
			ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		} `json:"generationConfig"`
	}
	raw, err := readBody(hr)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if len(body.Contents) == 0 {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	stream := method == "streamGenerateContent"
	req := &Request{API: "gemini", Model: model, Stream: stream, Raw: raw}
	req.Schema = body.GenerationConfig.ResponseJSONSchema
	if req.Schema == nil {
		req.Schema = body.GenerationConfig.ResponseSchema
	}
	for _, t := range body.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, f.Name)
		}
	}
	var sys strings.Builder
	for _, p := range body.SystemInstruction.Parts {
		sys.WriteString(p.Text)
	}
	if sys.Len() > 0 {
		req.Messages = append(req.Messages, Message{Role: "system", Text: sys.String()})
	}
	for _, c := range body.Contents {
		msg := Message{Role: c.Role}
		if c.Role == "model" {
			msg.Role = "assistant"
		}
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				msg.ToolCalls = append(msg.ToolCalls, p.FunctionCall.Name)
			case p.FunctionResponse != nil:
				// A result is a message of its own, as the other APIs
				// carry it.
				req.Messages = append(req.Messages, Message{Role: "tool", Text: functionResult(p.FunctionResponse.Response)})
			case !p.Thought:
				msg.Text += p.Text
			}
		}
		if msg.Text != "" || len(msg.ToolCalls) > 0 {
			req.Messages = append(req.Messages, msg)
		}
	}
	id := "gemini-" + s.record(req)
	reply := s.respond(req)
	var calls []any
	for i, c := range reply.ToolCalls {
		var args any = map[string]any{}
		if c.Arguments != "" {
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
				args = map[string]any{}
			}
		}
		if _, ok := args.(map[string]any); !ok {
			args = map[string]any{}
		}
		calls = append(calls, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args, "id": fmt.Sprintf("call_%s_%d", id, i)}})
	}
	// The chunks of the answer, each a list of parts: the text in two
	// pieces, so that clients really assemble a stream, then the calls.
	var chunks [][]any
	if half := len(reply.Text) / 2; half > 0 {
		chunks = append(chunks, []any{map[string]any{"text": reply.Text[:half]}}, []any{map[string]any{"text": reply.Text[half:]}})
	} else if reply.Text != "" || len(calls) == 0 {
		chunks = append(chunks, []any{map[string]any{"text": reply.Text}})
	}
	if len(calls) > 0 {
		chunks = append(chunks, calls)
	}
	response := func(parts []any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		r := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": id}
		if last {
			cand["finishReason"] = "STOP"
			r["usageMetadata"] = map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
		}
		return r
	}
	if !stream {
		var parts []any
		if reply.Text != "" || len(calls) == 0 {
			parts = append(parts, map[string]any{"text": reply.Text})
		}
		writeJSON(w, response(append(parts, calls...), true))
		return
	}
	if hr.URL.Query().Get("alt") != "sse" {
		var list []any
		for i, c := range chunks {
			list = append(list, response(c, i == len(chunks)-1))
		}
		writeJSON(w, list)
		return
	}
	sse := newSSE(w)
	for i, c := range chunks {
		sse.data(response(c, i == len(chunks)-1))
	}
}

// functionResult is the text of a functionResponse's response: its output
// or content field when that is a string (the Gemini CLI sends
// {"output": TEXT}), else the response as JSON.
func functionResult(v any) string {
	if m, ok := v.(map[string]any); ok {
		for _, key := range []string{"output", "content"} {
			if s, ok := m[key].(string); ok {
				return s
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// googleError answers as Google's APIs fail a request.
func googleError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
