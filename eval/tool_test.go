package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

func mustSchema(t testing.TB, doc map[string]any) *eval.Schema {
	t.Helper()
	s, err := eval.NewSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestToolCallsThroughProviderAndComponent(t *testing.T) {
	ran := 0
	tool, err := eval.NewTool(eval.ToolOptions{
		Name: "double", Description: "Double n.",
		Input:   mustSchema(t, map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}}}),
		Execute: func(_ context.Context, in any) (any, error) { ran++; return in.(map[string]any)["n"].(int64) * 2, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := deterministic.New(deterministic.Options{Respond: func(ctx context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		if len(req.Tools) != 1 || req.Tools[0].Name != "double" {
			return nil, errors.New("tool not granted")
		}
		out, err := req.Tools[0].Call(ctx, `{"n": 21}`) // a JSON string the schema rejects is decoded once
		if err != nil {
			return nil, err
		}
		_, err = req.Tools[0].Call(ctx, map[string]any{"n": "x"})
		var ti *eval.ToolInputError
		if !errors.As(err, &ti) {
			return nil, errors.New("bad input was not a ToolInputError")
		}
		return &eval.AgentResponse{Text: "model:" + jsonText(t, out)}, nil
	}})
	comp := &eval.Component{Name: "C", Fn: func(cc *eval.ComponentContext) (any, error) {
		out, err := cc.CallTool(tool, map[string]any{"n": 2})
		if err != nil {
			return nil, err
		}
		return []any{jsonText(t, out), " ", &eval.Agent{Children: []any{&eval.ToolGrant{Tool: tool}, "go"}}}, nil
	}}
	got, err := run(t, p, nil, comp)
	if err != nil || got != "4 model:42" {
		t.Fatalf("got %q, %v", got, err)
	}
	if ran != 2 {
		t.Fatalf("execute ran %d times, want 2 (invalid input must not reach it)", ran)
	}
}

func jsonText(t testing.TB, v any) string {
	s, err := eval.CanonicalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestObjectInputProvidersRejectNonObjectTools(t *testing.T) {
	tool, _ := eval.NewTool(eval.ToolOptions{Name: "s", Description: "String input.", Input: mustSchema(t, map[string]any{"type": "string"}),
		Execute: func(context.Context, any) (any, error) { return "x", nil }})
	p := objectProvider{echo(t, nil)}
	_, err := run(t, p, nil, &eval.Agent{Position: pos(2), Children: []any{&eval.ToolGrant{Tool: tool, Position: pos(3)}, "x"}})
	if err == nil || !strings.Contains(err.Error(), `t.star:3:1: tool "s" cannot be granted to provider`) {
		t.Fatalf("error %v", err)
	}
	if len(p.Calls()) != 0 {
		t.Fatal("provider ran")
	}
}

type objectProvider struct{ *deterministic.Agent }

func (objectProvider) RequiresObjectToolInput() bool { return true }

func TestMCPSecretsNeverTraced(t *testing.T) {
	server := &eval.MCPServer{Name: "billing", Transport: eval.MCPTransport{Type: "streamable-http", URL: "https://billing.example/mcp",
		Headers: map[string]string{"Authorization": "Bearer TOPSECRET"}}}
	local := &eval.MCPServer{Name: "local", Transport: eval.MCPTransport{Type: "stdio", Command: "srv", Env: map[string]string{"TOKEN": "TOPSECRET"}}}
	sink := &recordingSink{capture: true}
	var seen []string
	p, _ := deterministic.New(deterministic.Options{Respond: func(_ context.Context, req *eval.AgentRequest, _ int) (*eval.AgentResponse, error) {
		for _, m := range req.MCPServers {
			seen = append(seen, m.Name)
		}
		return &eval.AgentResponse{Text: "ok"}, nil
	}})
	rt, _ := eval.New(eval.Options{AgentProvider: p, Trace: []eval.TraceSink{sink}})
	if _, err := rt.Evaluate(context.Background(), &eval.Agent{Children: []any{&eval.MCPGrant{Server: server}, &eval.MCPGrant{Server: local}, &eval.MCPGrant{Name: "github"}, "x"}}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "billing,local,github" {
		t.Fatalf("provider saw %v", seen)
	}
	kinds := map[string]string{}
	for _, e := range sink.events {
		for k, v := range e.Attributes {
			if s, ok := v.(string); ok && (strings.Contains(s, "TOPSECRET") || strings.Contains(s, "billing.example")) {
				t.Fatalf("event %s attribute %s leaks transport configuration: %q", e.Name, k, s)
			}
		}
		if e.Name == "capability.mcp" {
			kinds[e.Attributes["name"].(string)] = e.Attributes["kind"].(string)
		}
	}
	if kinds["billing"] != "streamable-http" || kinds["local"] != "stdio" || kinds["github"] != "named" {
		t.Fatalf("capability.mcp events %v", kinds)
	}
}
