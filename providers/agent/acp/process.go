package acp

import (
	"context"
	"fmt"
	"maps"
	"os/exec"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/local"
)

// startHost starts the agent with the trusted local launcher: the local
// sandbox runtime (the one host runner of AML: its own process group,
// the host environment plus the launch env and PWD), rooted at cwd. The
// lease it runs in is released at cleanup, after the process. A missing
// executable is reported with the command and how to fix it.
func (s *session) startHost(ctx context.Context, cwd string) (eval.SandboxProcess, error) {
	path, err := exec.LookPath(s.launch.Command)
	if err != nil {
		return nil, fmt.Errorf("ACP agent executable %q not found: install it or put it on PATH (or pass its absolute path as command): %w", s.launch.Command, err)
	}
	host, err := local.New(local.Options{})
	if err != nil {
		return nil, fmt.Errorf("starting ACP agent %q: %w", s.launch.Command, err)
	}
	lease, err := host.Acquire(ctx, &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".",
		Workspace: &eval.WorkspaceMaterialization{Directory: cwd, Cwd: "."}})
	if err != nil {
		return nil, fmt.Errorf("starting ACP agent %q: %w", s.launch.Command, err)
	}
	s.hostLease = lease
	env := maps.Clone(s.launch.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["PWD"] = cwd
	proc, err := lease.Runtime().Spawn(s.life, path, s.launch.Args, eval.ExecOptions{Env: env})
	if err != nil {
		return nil, fmt.Errorf("starting ACP agent %q: %w", s.launch.Command, err)
	}
	return proc, nil
}

// releaseHost releases the host lease of a host launch; repeat-safe.
func (s *session) releaseHost(ctx context.Context) error {
	lease := s.hostLease
	s.hostLease = nil
	if lease == nil {
		return nil
	}
	if err := lease.Release(ctx); err != nil {
		return fmt.Errorf("releasing the agent's host process runtime: %w", err)
	}
	return nil
}
