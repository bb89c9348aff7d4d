package acp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// TestMessageSizeLimits: ACP messages are at most 10 MiB per line. A
// prompt over the limit is refused before it is sent, a tool result over
// it reaches the agent as a tool error, and an agent message over it ends
// the session with an error that names the limit, not a misleading
// disconnect.
func TestMessageSizeLimits(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("y", acp.MaxMessageBytes)
	_, err := fake(t, nil).Run(ctx, &eval.AgentRequest{Prompt: "say x " + big}, nil)
	if err == nil || !strings.Contains(err.Error(), "over the") || !strings.Contains(err.Error(), "10 MiB") || !strings.Contains(err.Error(), "include(") {
		t.Fatalf("oversized prompt: %v", err)
	}

	tool, err := eval.NewTool(eval.ToolOptions{Name: "dump", Description: "Dumps everything.", Execute: func(context.Context, any) (any, error) { return big, nil }})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, fake(t, nil), &eval.Agent{Children: []any{&eval.ToolGrant{Tool: tool}, "call dump {}"}})
	if err != nil || !strings.HasPrefix(out, "error: ") || !strings.Contains(out, "limit of one message") {
		t.Fatalf("oversized tool result: %q, %v", out, err)
	}

	_, err = fake(t, nil).Run(ctx, &eval.AgentRequest{Prompt: "huge 11000000"}, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 10485760 bytes (10 MiB, the limit of one message line)") {
		t.Fatalf("oversized agent message: %v", err)
	}
}
