package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// TestInsideLocalSandbox launches the agent through the local sandbox's
// runtime: the session cwd is the sandbox's effective cwd (with the
// agent's cwd=), and env= reaches the agent through the runtime.
func TestInsideLocalSandbox(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(local.Options{Workspace: dir})
	if err != nil {
		t.Skipf("local sandbox unavailable here: %v", err)
	}
	node := &eval.Sandbox{Provider: sb, Access: "read-write", Children: []any{
		&eval.Agent{Provider: fake(t, nil), Cwd: "sub", Children: []any{"cwd\nsay |\nenv AML_FAKE_ACP_SERVE"}},
	}}
	rt, err := eval.New(eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Evaluate(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(dir, "sub"))
	if want := real + "|1"; got != want {
		t.Fatalf("got %q, want %q (the sandbox cwd and env=)", got, want)
	}
}

// TestSandboxNeverFallsBackToHost: inside a sandbox the agent is started
// only through the runtime's Spawn; a sandbox that cannot run it fails
// the session.
func TestSandboxNeverFallsBackToHost(t *testing.T) {
	cmd, _ := acptest.Command()
	sb, err := deterministic.NewSandbox(deterministic.SandboxOptions{
		Exec: func(_ context.Context, command string, _ []string, _ eval.ExecOptions) (*eval.ExecResult, error) {
			if command == "pwd" {
				return &eval.ExecResult{Stdout: []byte("/sandbox/work\n")}, nil
			}
			return &eval.ExecResult{ExitCode: 127, Stderr: []byte(command + ": not found in the sandbox image\n")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := fake(t, nil)
	node := &eval.Sandbox{Provider: sb, Access: "read-write", Children: []any{&eval.Agent{Provider: p, Children: []any{"say hi"}}}}
	rt, _ := eval.New(eval.Options{})
	_, err = rt.Evaluate(context.Background(), node)
	if err == nil || !strings.Contains(err.Error(), "exited with code 127 during initialize") || !strings.Contains(err.Error(), "not found in the sandbox image") {
		t.Fatalf("error = %v", err)
	}
	var spawned bool
	for _, c := range sb.Commands() {
		if c.Command == cmd {
			spawned = true
		}
	}
	if !spawned {
		t.Fatalf("the agent was not started through the sandbox: %+v", sb.Commands())
	}
}
