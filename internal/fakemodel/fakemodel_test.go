package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out []map[string]any
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return []map[string]any{m}
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("bad event %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

func TestChatToolCallThenResult(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	tools := `"tools":[{"type":"function","function":{"name":"aml_lookup","parameters":{"type":"object"}}}]`
	events := post(t, s.URL+"/chat/completions", `{"model":"m","stream":true,`+tools+`,"messages":[{"role":"user","content":"CALL lookup {\"id\":7}"}]}`)
	var name, args, finish string
	for _, e := range events {
		c := e["choices"].([]any)[0].(map[string]any)
		if f, ok := c["finish_reason"].(string); ok {
			finish = f
		}
		if tcs, ok := c["delta"].(map[string]any)["tool_calls"].([]any); ok {
			f := tcs[0].(map[string]any)["function"].(map[string]any)
			name, args = f["name"].(string), f["arguments"].(string)
		}
	}
	if name != "aml_lookup" || args != `{"id":7}` || finish != "tool_calls" {
		t.Fatalf("tool call %q %q finish %q", name, args, finish)
	}
	events = post(t, s.URL+"/chat/completions", `{"model":"m",`+tools+`,"messages":[{"role":"user","content":"CALL lookup {\"id\":7}"},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"aml_lookup","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"record 7"}]}`)
	msg := events[0]["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "RESULT: record 7" {
		t.Fatalf("final = %v", msg)
	}
	if n := len(s.Requests()); n != 2 {
		t.Fatalf("recorded %d requests", n)
	}
}

func TestResponsesStream(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	events := post(t, s.URL+"/responses", `{"model":"m","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"hello there"}]}]}`)
	var types []string
	var final string
	for _, e := range events {
		types = append(types, e["type"].(string))
		if e["type"] == "response.output_text.done" {
			final = e["text"].(string)
		}
	}
	if types[0] != "response.created" || types[len(types)-1] != "response.completed" || final != "FAKE-REPLY: hello there" {
		t.Fatalf("events %v, text %q", types, final)
	}
	events = post(t, s.URL+"/responses", `{"model":"m","stream":true,"tools":[{"type":"function","name":"shell"}],"input":"CALL shell {\"cmd\":\"ls\"}"}`)
	var call map[string]any
	for _, e := range events {
		if e["type"] == "response.output_item.done" {
			call = e["item"].(map[string]any)
		}
	}
	if call["type"] != "function_call" || call["name"] != "shell" || call["arguments"] != `{"cmd":"ls"}` {
		t.Fatalf("function call = %v", call)
	}
}

// TestCopilotContextSkipped: the first line of a message that starts
// with Copilot's <current_datetime> element is the prompt's.
func TestCopilotContextSkipped(t *testing.T) {
	r := Script(&Request{Messages: []Message{{Role: "user", Text: "<current_datetime>2026-01-02T03:04:05Z</current_datetime>\n\nhello there\nmore\n\n<system_reminder>x</system_reminder>"}}})
	if r.Text != "FAKE-REPLY: hello there" {
		t.Fatalf("reply = %q", r.Text)
	}
}

// TestCustomToolNamed: a custom (freeform) chat tool is recorded by its
// name.
func TestCustomToolNamed(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	post(t, s.URL+"/chat/completions", `{"model":"m","tools":[{"type":"function","function":{"name":"view"}},{"type":"custom","custom":{"name":"apply_patch"}}],"messages":[{"role":"user","content":"hi"}]}`)
	if got := s.Requests()[0].Tools; len(got) != 2 || got[0] != "view" || got[1] != "apply_patch" {
		t.Fatalf("tools = %q", got)
	}
}

// TestMessagesToolUseThenResult: Anthropic's Messages API, streamed: the
// event sequence the service sends (message_start, a content block's
// start, deltas and stop, message_delta with the stop reason and output
// usage, message_stop), a tool_use block with the script's input, and
// after a tool_result the final text.
func TestMessagesToolUseThenResult(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	tools := `"tools":[{"name":"mcp__aml__lookup","description":"d","input_schema":{"type":"object"}}]`
	events := post(t, s.AnthropicURL+"/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"system":[{"type":"text","text":"Be brief."}],`+tools+
		`,"messages":[{"role":"user","content":[{"type":"text","text":"CALL lookup {\"id\":7}"}]}]}`)
	var types []string
	var name, args, stop string
	var input, output float64
	for _, e := range events {
		types = append(types, e["type"].(string))
		switch e["type"] {
		case "message_start":
			input = e["message"].(map[string]any)["usage"].(map[string]any)["input_tokens"].(float64)
		case "content_block_start":
			if b := e["content_block"].(map[string]any); b["type"] == "tool_use" {
				name = b["name"].(string)
			}
		case "content_block_delta":
			if d := e["delta"].(map[string]any); d["type"] == "input_json_delta" {
				args += d["partial_json"].(string)
			}
		case "message_delta":
			stop = e["delta"].(map[string]any)["stop_reason"].(string)
			output = e["usage"].(map[string]any)["output_tokens"].(float64)
		}
	}
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want || name != "mcp__aml__lookup" || args != `{"id":7}` || stop != "tool_use" || input != 10 || output != 5 {
		t.Fatalf("events %v, tool %q %q, stop %q, usage %v/%v", types, name, args, stop, input, output)
	}
	reqs := s.Requests()
	if r := reqs[0]; r.API != "messages" || r.Messages[0].Role != "system" || r.Messages[0].Text != "Be brief." || r.Tools[0] != "mcp__aml__lookup" {
		t.Fatalf("recorded %+v", r)
	}
	// The result comes back as a tool_result block; the answer is text,
	// not streamed this time.
	final := post(t, s.AnthropicURL+"/v1/messages", `{"model":"m","max_tokens":100,`+tools+`,"messages":[`+
		`{"role":"user","content":"CALL lookup {\"id\":7}"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__aml__lookup","input":{"id":7}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Record 7"}]}]}]}`)
	m := final[0]
	content := m["content"].([]any)[0].(map[string]any)
	if m["type"] != "message" || m["stop_reason"] != "end_turn" || content["type"] != "text" || content["text"] != "RESULT: Record 7" ||
		m["usage"].(map[string]any)["output_tokens"] != float64(5) {
		t.Fatalf("final %v", m)
	}
	if r := s.Requests()[1]; len(r.Messages) != 3 || r.Messages[1].ToolCalls[0] != "mcp__aml__lookup" || r.Messages[2].Role != "tool" {
		t.Fatalf("recorded %+v", r.Messages)
	}
	// A request without a model is refused as the service refuses it.
	resp, err := http.Post(s.AnthropicURL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || e["type"] != "error" || e["error"].(map[string]any)["type"] != "invalid_request_error" {
		t.Fatalf("a bad request: %d %v", resp.StatusCode, e)
	}
}

// TestMessagesStructuredOutput: a request whose output_config names a
// JSON schema is answered with a value of that schema, whatever its
// message says.
func TestMessagesStructuredOutput(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	schema := `{"type":"object","properties":{"title":{"type":"string"},"n":{"type":"integer"},"kind":{"enum":["a","b"]},"note":{"type":"string"}},"required":["title","n","kind"]}`
	got := post(t, s.AnthropicURL+"/v1/messages", `{"model":"m","max_tokens":100,"output_config":{"format":{"type":"json_schema","schema":`+schema+`}},`+
		`"messages":[{"role":"user","content":"CALL lookup {}"}]}`)
	text := got[0]["content"].([]any)[0].(map[string]any)["text"]
	if text != `{"kind":"a","n":0,"title":"fake"}` {
		t.Fatalf("answer %v", got[0])
	}
	if r := s.Requests()[0]; r.Schema == nil || r.Schema["required"] == nil {
		t.Fatalf("recorded schema %v", r.Schema)
	}
}

// TestGeminiFunctionCallThenResult: Gemini's streamGenerateContent with
// alt=sse answers a directive with a functionCall part, its last chunk
// carrying the finish reason and usage; after a functionResponse (and a
// thought, which is not text), generateContent answers the final text in
// one response.
func TestGeminiFunctionCallThenResult(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	tools := `"tools":[{"functionDeclarations":[{"name":"mcp_aml_lookup","parameters":{"type":"object"}}]}]`
	url := s.GeminiURL + "/v1beta/models/gemini-2.5-pro"
	events := post(t, url+":streamGenerateContent?alt=sse", `{"systemInstruction":{"parts":[{"text":"Be brief."}]},`+tools+
		`,"contents":[{"role":"user","parts":[{"text":"CALL lookup {\"id\":7}"}]}]}`)
	last := events[len(events)-1]
	cand := last["candidates"].([]any)[0].(map[string]any)
	call := cand["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["functionCall"].(map[string]any)
	usage := last["usageMetadata"].(map[string]any)
	if call["name"] != "mcp_aml_lookup" || call["args"].(map[string]any)["id"] != float64(7) || cand["finishReason"] != "STOP" ||
		usage["promptTokenCount"] != float64(10) || usage["candidatesTokenCount"] != float64(5) || last["modelVersion"] != "gemini-2.5-pro" {
		t.Fatalf("events %v", events)
	}
	if r := s.Requests()[0]; r.API != "gemini" || r.Model != "gemini-2.5-pro" || !r.Stream || r.Messages[0].Role != "system" ||
		r.Messages[0].Text != "Be brief." || r.Tools[0] != "mcp_aml_lookup" {
		t.Fatalf("recorded %+v", r)
	}
	final := post(t, url+":generateContent", `{`+tools+`,"contents":[`+
		`{"role":"user","parts":[{"text":"CALL lookup {\"id\":7}"}]},`+
		`{"role":"model","parts":[{"text":"Looking it up.","thought":true},{"functionCall":{"name":"mcp_aml_lookup","args":{"id":7}}}]},`+
		`{"role":"user","parts":[{"functionResponse":{"name":"mcp_aml_lookup","response":{"output":"Record 7"}}}]}]}`)
	cand = final[0]["candidates"].([]any)[0].(map[string]any)
	if parts := cand["content"].(map[string]any)["parts"].([]any); len(parts) != 1 || parts[0].(map[string]any)["text"] != "RESULT: Record 7" ||
		cand["finishReason"] != "STOP" || final[0]["usageMetadata"] == nil {
		t.Fatalf("final %v", final[0])
	}
	if r := s.Requests()[1]; r.Stream || len(r.Messages) != 3 || r.Messages[1].Role != "assistant" || r.Messages[1].Text != "" || r.Messages[1].ToolCalls[0] != "mcp_aml_lookup" ||
		r.Messages[2].Role != "tool" || r.Messages[2].Text != "Record 7" {
		t.Fatalf("recorded %+v", r.Messages)
	}
}

// TestGeminiStreamText: a text answer streams in two chunks, which
// assemble to the reply (the Gemini CLI's <session_context> part skipped);
// without alt=sse the chunks come as a JSON array.
func TestGeminiStreamText(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	body := `{"contents":[{"role":"user","parts":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"},{"text":"hello there"}]}]}`
	events := post(t, s.GeminiURL+"/v1beta/models/m:streamGenerateContent?alt=sse", body)
	var got string
	for _, e := range events {
		got += e["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
	}
	if len(events) != 2 || got != "FAKE-REPLY: hello there" || events[0]["usageMetadata"] != nil || events[1]["usageMetadata"] == nil {
		t.Fatalf("events %v", events)
	}
	resp, err := http.Post(s.GeminiURL+"/v1/models/m:streamGenerateContent", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list) != 2 {
		t.Fatalf("array %v %v", list, err)
	}
}

// TestGeminiStructuredOutput: a request whose generationConfig names a
// responseJsonSchema, or a responseSchema with Gemini's capitalised
// types, is answered with a value of that schema, numbers at their
// minimum.
func TestGeminiStructuredOutput(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	for _, config := range []string{
		`{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"title":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["title","n"]}}`,
		`{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"title":{"type":"STRING"},"n":{"type":"INTEGER","minimum":1}},"required":["title","n"]}}`,
	} {
		got := post(t, s.GeminiURL+"/v1beta/models/m:generateContent", `{"generationConfig":`+config+`,"contents":[{"role":"user","parts":[{"text":"CALL lookup {}"}]}]}`)
		text := got[0]["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"]
		if text != `{"n":1,"title":"fake"}` {
			t.Fatalf("answer %v", got[0])
		}
	}
}

// TestGeminiError: a bad request, and an unknown method, are refused in
// Google's error shape.
func TestGeminiError(t *testing.T) {
	s := Start(nil)
	defer s.Close()
	for _, c := range []struct {
		path, body, status string
		code               int
	}{
		{"/v1beta/models/m:generateContent", `{"contents":[]}`, "INVALID_ARGUMENT", 400},
		{"/v1beta/models/m:generateContent", `{"contents":`, "INVALID_ARGUMENT", 400},
		{"/v1beta/models/m:embedContent", `{}`, "NOT_FOUND", 404},
	} {
		resp, err := http.Post(s.GeminiURL+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.code || e.Error.Code != c.code || e.Error.Status != c.status || e.Error.Message == "" {
			t.Fatalf("%s %s: %d %+v", c.path, c.body, resp.StatusCode, e)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("recorded %d requests", n)
	}
}

// TestUntrustedContextUnwrapped: a tool result Gemini CLI wraps in
// <untrusted_context> is answered by its content.
func TestUntrustedContextUnwrapped(t *testing.T) {
	r := &Request{Tools: []string{"mcp_aml_lookup"}, Messages: []Message{
		{Role: "user", Text: "CALL lookup {}"},
		{Role: "assistant", ToolCalls: []string{"mcp_aml_lookup"}},
		{Role: "tool", Text: "<untrusted_context>\nRecord 4\n</untrusted_context>"},
	}}
	if got := Script(r).Text; got != "RESULT: Record 4" {
		t.Fatalf("answer %q", got)
	}
}
