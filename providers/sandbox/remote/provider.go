package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/providers/option"
	"github.com/aml-go/aml/providers/sandbox/staged"
)

// DefaultMaxOutputBytes bounds the combined output of one command when
// Options.MaxOutputBytes is 0: 4 MiB.
const DefaultMaxOutputBytes int64 = 4 << 20

// DefaultSetupTimeout bounds Options.Setup when Options.SetupTimeout is 0.
const DefaultSetupTimeout = 10 * time.Minute

// Labels every remote sandbox of the provider carries.
const (
	// LabelRun is the evaluation (run) id.
	LabelRun = "aml.run"
	// LabelLease is the lease id.
	LabelLease = "aml.lease"
	// LabelOwner is the marker of the aml process that created it
	// (procscope.Marker), by which the sandboxes of dead runs are found.
	LabelOwner = "aml.owner"
)

// Options configure a Provider.
type Options struct {
	// Service is the remote sandbox service's client; required.
	Service Service
	// GuestRoot is the guest directory the workspace is transferred to:
	// relative to the service's home ("workspace" for Daytona) or
	// absolute ("/workspace" for Modal); required.
	GuestRoot string
	// Setup is trusted shell source run with "sh -lc" in the cwd after
	// hydration; a non-zero exit, or running past SetupTimeout, fails the
	// acquisition (and destroys the sandbox).
	Setup string
	// SetupTimeout bounds Setup; 0 means DefaultSetupTimeout.
	SetupTimeout time.Duration
	// Workspace is the host directory transferred when a request has no
	// active workspace materialization; "" means none. A relative path is
	// resolved against the process working directory by New.
	Workspace string
	// MaxOutputBytes bounds the combined stdout and stderr of one command
	// (and of setup and the transfer commands); 0 means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// Labels are added to every sandbox's labels (the aml.* labels are
	// the provider's own).
	Labels map[string]string
	// Relay is the aml executable in the sandbox's image ("" means "aml",
	// found on its PATH, as the AML images have it): an agent's tool relay
	// (aml mcp-relay) and the tunnel that carries its connection to the
	// host (aml sandbox-tunnel) run it.
	Relay string
}

// Provider is an eval.SandboxProvider whose leases are remote sandboxes:
// each acquisition creates one, transfers the workspace's root subtree
// into Options.GuestRoot, and its release mirrors the remote tree back
// into the source (read-write leases) and destroys it. It is immutable
// after New and safe for concurrent use.
type Provider struct {
	opts      Options
	maxOutput int64
	staged    *staged.Provider[string, *box]
}

var _ eval.SandboxProvider = (*Provider)(nil)

// New validates opts and returns a Provider. It does not contact the
// service.
func New(opts Options) (*Provider, error) {
	if opts.Service == nil {
		return nil, errors.New("remote sandbox: no service")
	}
	name := opts.Service.Name() + " sandbox"
	if err := CheckOptions(opts.Service.Name(), opts); err != nil {
		return nil, err
	}
	if opts.SetupTimeout == 0 {
		opts.SetupTimeout = DefaultSetupTimeout
	}
	if opts.Relay == "" {
		opts.Relay = "aml"
	}
	if opts.Workspace != "" {
		abs, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, fmt.Errorf("%s workspace %q: %w", name, opts.Workspace, err)
		}
		opts.Workspace = abs
	}
	opts.Labels = maps.Clone(opts.Labels)
	p := &Provider{opts: opts, maxOutput: opts.MaxOutputBytes}
	if p.maxOutput == 0 {
		p.maxOutput = DefaultMaxOutputBytes
	}
	sp, err := staged.New(staged.Hooks[string, *box]{
		Name:               opts.Service.Name(),
		Provision:          p.provision,
		CreateRuntime:      p.createRuntime,
		Initialize:         p.initialize,
		CleanupProvisioned: p.discard,
		ReleaseResource:    p.release,
	})
	if err != nil {
		return nil, err
	}
	p.staged = sp
	return p, nil
}

// Name returns the service's name.
func (p *Provider) Name() string { return p.opts.Service.Name() }

// Acquire creates a remote sandbox and transfers the workspace into it
// (see the package documentation). A failed or cancelled acquisition
// leaves no sandbox behind and changes nothing on the host.
func (p *Provider) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if req == nil {
		return nil, fmt.Errorf("%s sandbox: nil acquire request", p.Name())
	}
	return p.staged.Acquire(ctx, req)
}

// box is one remote sandbox and what the lease keeps beside it.
type box struct {
	m Machine
	// host is a Host of the host runner over the workspace directory:
	// the root and cwd validated against it, and the mirror's
	// destination.
	host    *hostexec.Host
	dir     string // the real host directory of the root subtree
	access  eval.Access
	root    string // guest path of the logical root (Options.GuestRoot)
	cwd     string // guest path of the logical cwd
	leaseID string
	rt      *runtime
}

func (p *Provider) provision(ctx context.Context, req *eval.SandboxAcquireRequest) (prov staged.Provisioned[string, *box], err error) {
	name := p.Name()
	if req.Access != eval.ReadOnly && req.Access != eval.ReadWrite {
		return prov, fmt.Errorf("access %q must be %q or %q", req.Access, eval.ReadOnly, eval.ReadWrite)
	}
	dir := p.opts.Workspace
	if req.Workspace != nil && req.Workspace.Directory != "" {
		dir = req.Workspace.Directory
	}
	if dir == "" {
		return prov, fmt.Errorf("the %s sandbox requires an active workspace() or a workspace directory (%s_sandbox(workspace = ...)) to transfer", name, name)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return prov, fmt.Errorf("workspace directory %q: %w", dir, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return prov, err
	}
	// The host runner validates root and cwd against the directory. It
	// is given the request's directory as written (the fallback
	// resolved), so that its errors quote it.
	hostDir := real
	if req.Workspace != nil && req.Workspace.Directory != "" {
		hostDir = req.Workspace.Directory
	}
	host, err := hostexec.Open(ctx, hostexec.Options{Dir: hostDir, Root: req.Root, Cwd: req.Cwd, Access: req.Access})
	if err != nil {
		return prov, err
	}
	b := &box{host: host, access: req.Access, dir: filepath.Join(real, filepath.FromSlash(req.Root)),
		root: p.opts.GuestRoot, cwd: path.Join(p.opts.GuestRoot, req.Cwd), leaseID: name + ":" + uuid.NewString()}
	prov = staged.Provisioned[string, *box]{ID: b.leaseID, Resource: b}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.discard(context.WithoutCancel(ctx), prov))
		}
	}()
	labels := maps.Clone(p.opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelRun] = req.EvaluationID
	labels[LabelLease] = b.leaseID
	labels[LabelOwner] = procscope.Marker()
	m, err := p.opts.Service.Create(ctx, CreateRequest{Labels: labels})
	if err != nil {
		return prov, fmt.Errorf("creating a %s sandbox: %w", name, err)
	}
	b.m = m
	prov.Handle = m.ID()
	if err := ctx.Err(); err != nil {
		return prov, context.Cause(ctx)
	}
	return prov, nil
}

func (p *Provider) createRuntime(_ context.Context, prov staged.Provisioned[string, *box], req *eval.SandboxAcquireRequest) (eval.SandboxRuntime, error) {
	b := prov.Resource
	b.rt = &runtime{p: p, b: b, access: req.Access, rootPath: req.Root, cwdPath: req.Cwd, procs: map[*process]struct{}{}}
	return b.rt, nil
}

func (p *Provider) initialize(ctx context.Context, prov staged.Provisioned[string, *box], rt eval.SandboxRuntime, _ *eval.SandboxAcquireRequest) error {
	b := prov.Resource
	if err := p.hydrate(ctx, b); err != nil {
		return err
	}
	if p.opts.Setup == "" {
		return nil
	}
	res, err := b.rt.run(ctx, []string{"sh", "-lc", p.opts.Setup}, b.cwd, nil, p.opts.SetupTimeout)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("setup did not finish within %v (setup_timeout_ms raises the bound): %w", p.opts.SetupTimeout, err)
		}
		return fmt.Errorf("setup: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("setup failed with exit code %d: %s", res.ExitCode, tail(res.Stderr, res.Stdout))
	}
	return nil
}

// tail is the end of a failed command's stderr (else stdout), for an
// error.
func tail(stderr, stdout []byte) string {
	out := strings.TrimSpace(string(stderr))
	if out == "" {
		out = strings.TrimSpace(string(stdout))
	}
	if len(out) > 2000 {
		out = "…" + out[len(out)-2000:]
	}
	return out
}

// discard destroys the sandbox of a failed acquisition without
// reconciling anything: nothing the lease's user did is there.
func (p *Provider) discard(ctx context.Context, prov staged.Provisioned[string, *box]) error {
	b := prov.Resource
	if b == nil {
		return nil
	}
	var errs []error
	if b.rt != nil {
		b.rt.release()
	}
	if b.m != nil {
		if err := b.m.Destroy(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("destroying %s sandbox %s: %w", p.Name(), b.m.ID(), err))
		}
	}
	if b.rt != nil {
		b.rt.stopTunnel()
	}
	if b.host != nil {
		if err := b.host.Release(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release ends the lease: its processes are killed, a read-write lease's
// remote tree is mirrored into the source, then the sandbox is destroyed;
// both errors are kept when both fail.
func (p *Provider) release(ctx context.Context, prov staged.Provisioned[string, *box]) error {
	b := prov.Resource
	if b == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if b.rt != nil {
		b.rt.release()
		b.rt.releaseStagings(ctx)
	}
	if b.access == eval.ReadWrite && b.m != nil {
		if err := p.reconcile(ctx, b); err != nil {
			errs = append(errs, fmt.Errorf("reconciling %s sandbox %s into %s (its changes since it was hydrated are not in the workspace, and are lost once it is destroyed): %w", p.Name(), b.m.ID(), b.dir, err))
		}
	}
	if err := p.discard(ctx, prov); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckOptions reports what New refuses in opts (opts.Service aside) for
// the service named service: malformed strings, a guest root that is not
// a clean directory, negative bounds, labels that are the provider's.
// aml check calls it on a call's literal arguments.
func CheckOptions(service string, opts Options) error {
	name := service + " sandbox"
	for _, o := range []struct{ label, v string }{{"setup", opts.Setup}, {"workspace", opts.Workspace}, {"relay", opts.Relay}} {
		if err := option.Check(name, o.label, o.v, false); err != nil {
			return err
		}
	}
	if opts.GuestRoot == "" || path.Clean(opts.GuestRoot) != opts.GuestRoot || opts.GuestRoot == "/" || opts.GuestRoot == "." {
		return fmt.Errorf("%s: guest root %q must be a clean directory other than the home or /", name, opts.GuestRoot)
	}
	switch {
	case opts.MaxOutputBytes < 0:
		return fmt.Errorf("%s max_output_bytes must be positive, got %d", name, opts.MaxOutputBytes)
	case opts.SetupTimeout < 0:
		return fmt.Errorf("%s setup timeout must be positive, got %v", name, opts.SetupTimeout)
	}
	for k := range opts.Labels {
		if k == "" || strings.HasPrefix(k, "aml.") {
			return fmt.Errorf("%s label %q is invalid: labels must be non-empty and not start with \"aml.\" (the provider's own)", name, k)
		}
	}
	return nil
}
