package acp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/testbin"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp"
)

// TestSDKExampleAgent drives the example agent shipped with
// github.com/coder/acp-go-sdk, built from this module's dependency graph,
// as a third-party peer: its turn streams text and a tool call and asks
// for permission to edit a file, which the engine answers from the AML
// permissions.
func TestSDKExampleAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the acp-go-sdk example agent peer in -short mode (its turn takes about five seconds)")
	}
	bin := testbin.Build(t, "github.com/coder/acp-go-sdk/example/agent", testbin.Options{})
	p, err := acp.New(acp.Config{Name: "sdk-example", Command: bin})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		perms eval.Permissions
		want  string
	}{
		{"read-write allows the edit", eval.DefaultPermissions(), "successfully updated the configuration"},
		{"read-only rejects the edit", eval.Permissions{Filesystem: "read-only"}, "prefer not to make that change"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, err := p.Run(ctx, &eval.AgentRequest{Prompt: "Update the configuration.", Permissions: c.perms}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp.Text, "ACP Go Example Agent") || !strings.Contains(resp.Text, c.want) {
				t.Fatalf("text = %q, want it to contain %q", resp.Text, c.want)
			}
			if resp.StopReason != "end_turn" || resp.SessionID == "" {
				t.Fatalf("stop reason %q, session %q", resp.StopReason, resp.SessionID)
			}
		})
	}
}
