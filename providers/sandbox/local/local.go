package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
	"github.com/aml-go/aml/internal/scratch"
	"github.com/aml-go/aml/providers/option"
)

// DefaultMaxOutputBytes is the combined stdout and stderr bound of one
// command when Options.MaxOutputBytes is zero: 4 MiB.
const DefaultMaxOutputBytes = hostexec.DefaultMaxOutputBytes

// ErrReleased is wrapped by every operation on a lease, its runtime or
// its file stagings after the lease (or the staging) was released, and
// by the error of a command the release killed. It is
// hostexec.ErrReleased.
var ErrReleased = hostexec.ErrReleased

// DefaultSetupTimeout bounds Options.Setup when Options.SetupTimeout is
// 0: room for a package install, not for a hang.
const DefaultSetupTimeout = 10 * time.Minute

// Options configure a Provider. The zero value is valid: no setup, no
// fallback workspace and DefaultMaxOutputBytes.
type Options struct {
	// Setup is trusted shell source run with "sh -lc" in the acquired cwd
	// on every acquisition, after the paths were validated and before the
	// lease is returned; "" runs nothing. A non-zero exit fails the
	// acquisition. Because it is a host process, a configured Setup makes
	// read-only acquisitions fail (see the package documentation). It must
	// equal its trimmed form and contain no NUL byte. Never interpolate
	// untrusted text into it. A setup running longer than SetupTimeout
	// is killed (its process group) and fails the acquisition.
	Setup string
	// SetupTimeout bounds Setup; 0 means DefaultSetupTimeout. It must not
	// be negative.
	SetupTimeout time.Duration
	// Workspace is the fallback host directory used when a request has no
	// active workspace materialization; "" means none. A relative path is
	// resolved against the process working directory by New; the directory
	// must exist when a lease is acquired. It must equal its trimmed form
	// and contain no NUL byte.
	Workspace string
	// MaxOutputBytes bounds the combined stdout and stderr captured from
	// one Exec (and from Setup); 0 means DefaultMaxOutputBytes. It must not
	// be negative. Exceeding it kills the command's process group and
	// fails the command.
	MaxOutputBytes int64
}

// Provider is the local eval.SandboxProvider. It is immutable after New
// and safe for concurrent use; every Acquire creates an independent
// lease.
type Provider struct {
	setup        string
	setupTimeout time.Duration
	workspace    string
	maxOutput    int64
}

var _ eval.SandboxProvider = (*Provider)(nil)

// New validates opts and returns a Provider. It resolves
// opts.Workspace to an absolute path but does not require it to exist
// yet. It fails on hosts that are not Unix, where process groups are
// unavailable.
func New(opts Options) (*Provider, error) {
	if err := hostexec.Supported(); err != nil {
		return nil, err
	}
	if err := checkOption(opts.Setup, "setup"); err != nil {
		return nil, err
	}
	if err := checkOption(opts.Workspace, "workspace"); err != nil {
		return nil, err
	}
	p := &Provider{setup: opts.Setup, setupTimeout: opts.SetupTimeout, maxOutput: opts.MaxOutputBytes}
	switch {
	case p.setupTimeout == 0:
		p.setupTimeout = DefaultSetupTimeout
	case p.setupTimeout < 0:
		return nil, fmt.Errorf("local sandbox SetupTimeout must be positive, got %v", opts.SetupTimeout)
	}
	switch {
	case p.maxOutput == 0:
		p.maxOutput = DefaultMaxOutputBytes
	case p.maxOutput < 0:
		return nil, fmt.Errorf("local sandbox MaxOutputBytes must be positive, got %d", opts.MaxOutputBytes)
	}
	if opts.Workspace != "" {
		abs, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, fmt.Errorf("local sandbox workspace %q: %w", opts.Workspace, err)
		}
		p.workspace = abs
	}
	return p, nil
}

// checkOption validates an optional string option.
func checkOption(v, label string) error {
	return option.Check("local sandbox", label, v, false)
}

// Name returns "local".
func (p *Provider) Name() string { return "local" }

// KeepsNoState implements eval.StatelessSandbox: commands run directly in
// the workspace's (or the configured) directory, so journaled runs may use
// the provider.
func (p *Provider) KeepsNoState() bool { return true }

// Acquire validates the workspace directory, root and cwd of req, runs the
// configured setup and returns a lease whose runtime runs host processes.
// It returns an error wrapping context.Cause(ctx) when ctx ends first;
// setup runs under ctx, so cancelling it kills the setup's process group.
// A failed acquisition leaves no process, staging or open file behind.
func (p *Provider) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if req == nil {
		return nil, errors.New("local sandbox: nil acquire request")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local sandbox acquisition: %w", context.Cause(ctx))
	}
	if req.Access != eval.ReadOnly && req.Access != eval.ReadWrite {
		return nil, fmt.Errorf("local sandbox access %q must be %q or %q", req.Access, eval.ReadOnly, eval.ReadWrite)
	}
	dir := p.workspace
	if req.Workspace != nil && req.Workspace.Directory != "" {
		dir = req.Workspace.Directory
	}
	if dir == "" {
		return nil, errors.New("local sandbox requires an active workspace() or a configured workspace directory")
	}
	h, err := hostexec.Open(ctx, hostexec.Options{Dir: dir, Root: req.Root, Cwd: req.Cwd, Access: req.Access, MaxOutputBytes: p.maxOutput})
	if err != nil {
		return nil, err
	}
	l := &lease{id: "local:" + uuid.NewString(), host: h}
	if p.setup != "" {
		if err := runSetup(ctx, h, p.setup, p.setupTimeout, req.Access); err != nil {
			_ = l.Release(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("local sandbox acquisition: %w", context.Cause(ctx))
	}
	return l, nil
}

// runSetup runs the setup source in the cwd of h.
func runSetup(ctx context.Context, h *hostexec.Host, setup string, timeout time.Duration, access eval.Access) error {
	if access != eval.ReadWrite {
		return fmt.Errorf("local sandbox setup: %w", hostexec.ErrReadOnlyExec)
	}
	res, err := h.Run(ctx, "sh", []string{"-lc", setup}, eval.ExecOptions{Timeout: timeout})
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("local sandbox setup did not finish within %v (setup_timeout_ms raises the bound): %w", timeout, err)
		}
		return fmt.Errorf("local sandbox setup: %w", err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			return fmt.Errorf("local sandbox setup failed with exit code %d", res.ExitCode)
		}
		return fmt.Errorf("local sandbox setup failed with exit code %d: %s", res.ExitCode, msg)
	}
	return nil
}

// lease is one acquired local sandbox: a hostexec.Host and its id. It is
// safe for concurrent use.
type lease struct {
	id   string
	host *hostexec.Host
}

var _ eval.SandboxLease = (*lease)(nil)

// ID returns "local:<uuid>".
func (l *lease) ID() string { return l.id }

// Runtime returns the lease's runtime, the host's.
func (l *lease) Runtime() eval.SandboxRuntime { return l.host.Runtime() }

// Release kills every still-running process group of the lease, closes
// the pipes of spawned processes and removes its file stagings
// (hostexec.Host.Release). It copies nothing. The first call does the
// work; every call returns its result.
func (l *lease) Release(ctx context.Context) error { return l.host.Release(ctx) }

// MkdirTemp makes a private directory in the temporary directory that
// records this process as its owner, so that a later aml process can
// remove it should this one be killed. The evaluator makes the staging
// directories of agents outside a sandbox through it when the provider is
// its host (eval.Options.Host). Safe for concurrent use.
func (p *Provider) MkdirTemp(prefix string) (string, error) { return scratch.MkdirTemp(prefix) }

// RemoveAll removes a directory made by MkdirTemp. Safe for concurrent
// use.
func (p *Provider) RemoveAll(dir string) error { return scratch.RemoveAll(dir) }
