package acp

import (
	"context"
	"fmt"
	"maps"
	"os/exec"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
)

// startHost starts the agent with AML's host runner (internal/hostexec:
// its own process group, the host environment plus the launch env and
// PWD), rooted at cwd. The Host it runs in is released at cleanup, after
// the process. A missing executable is reported with the command and how
// to fix it.
func (s *session) startHost(ctx context.Context, cwd string) (eval.SandboxProcess, error) {
	path, err := exec.LookPath(s.launch.Command)
	if err != nil {
		return nil, fmt.Errorf("ACP agent executable %q not found: install it or put it on PATH (or pass its absolute path as command): %w", s.launch.Command, err)
	}
	host, err := hostexec.Open(ctx, hostexec.Options{Dir: cwd, Root: ".", Cwd: ".", Access: eval.ReadWrite})
	if err != nil {
		return nil, fmt.Errorf("starting ACP agent %q: %w", s.launch.Command, err)
	}
	s.host = host
	env := maps.Clone(s.launch.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["PWD"] = cwd
	proc, err := host.Runtime().Spawn(s.life, path, s.launch.Args, eval.ExecOptions{Env: env})
	if err != nil {
		return nil, fmt.Errorf("starting ACP agent %q: %w", s.launch.Command, err)
	}
	return proc, nil
}

// releaseHost releases the Host of a host launch; repeat-safe.
func (s *session) releaseHost(ctx context.Context) error {
	host := s.host
	s.host = nil
	if host == nil {
		return nil
	}
	if err := host.Release(ctx); err != nil {
		return fmt.Errorf("releasing the agent's host process runtime: %w", err)
	}
	return nil
}
