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
