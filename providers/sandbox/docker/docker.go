package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/hostexec"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/scratch"
	"github.com/aml-go/aml/providers/option"
	"github.com/aml-go/aml/providers/sandbox/staged"
)

// DefaultImage is the image of a sandbox whose Options.Image is empty:
// the published AML agent sandbox image.
const DefaultImage = "wearesingular/aml-agent-sandbox:latest"

// DefaultMaxOutputBytes bounds the combined output of one command when
// Options.MaxOutputBytes is zero: 4 MiB.
const DefaultMaxOutputBytes int64 = 4 << 20

// Guest paths.
const (
	// WorkspaceMount is where the workspace directory is mounted.
	WorkspaceMount = "/workspace"
	// StagingMount is where the lease's file stagings are mounted.
	StagingMount = "/tmp/aml"
	// SocketMount is where the host serves the container unix sockets
	// (the tool bridge): a read-only mount, so that nothing in the
	// container can replace a socket or plant a link beside it.
	SocketMount = "/opt/aml/run"
)

// Labels every container of the provider carries.
const (
	// LabelRun is the evaluation (run) id.
	LabelRun = "aml.run"
	// LabelLease is the lease id.
	LabelLease = "aml.lease"
	// LabelOwner is the marker of the aml process that created it
	// (procscope.Marker), by which containers of dead runs are found.
	LabelOwner = "aml.owner"
)

// keepAlive is the container's main process: it waits for its stop.
const keepAlive = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`

// Options configure a Provider. The zero value is valid: the default
// image, no setup, no fallback workspace, no network.
type Options struct {
	// Client is the Engine API client; nil means NewClient (DOCKER_HOST,
	// else the docker CLI's context, else the local socket).
	Client client.APIClient
	// Image is the container image; "" means DefaultImage. An image the
	// engine does not have is pulled, as "docker run" does.
	Image string
	// Setup is trusted shell source run with "sh -lc" in the cwd of every
	// new container before the lease is returned; a non-zero exit fails
	// the acquisition, and so does running longer than SetupTimeout.
	Setup string
	// SetupTimeout bounds Setup; 0 means DefaultSetupTimeout.
	SetupTimeout time.Duration
	// EngineTimeout bounds each call to the Docker engine (a pull, by the
	// time between two progress messages); 0 means DefaultEngineTimeout.
	// A call past it fails with an *EngineTimeoutError.
	EngineTimeout time.Duration
	// User runs the container's processes ("uid", "uid:gid" or a name the
	// image knows); "" keeps the image's user.
	User string
	// Workspace is the host directory mounted at /workspace when a request
	// has no active workspace materialization; "" means none. A relative
	// path is resolved against the process working directory by New.
	Workspace string
	// MaxOutputBytes bounds the combined stdout and stderr of one Exec
	// (and of Setup); 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// Network is the container's network mode: "none" (the default),
	// "host", "bridge" or a network name.
	Network string
	// Env are environment variables of the container.
	Env map[string]string
	// Labels are added to the container's labels (the aml.* labels are
	// the provider's own).
	Labels map[string]string
	// Memory bounds the container's memory in bytes (the engine's
	// --memory; swap is bounded to the same); 0 means no bound.
	Memory int64
	// CPUs bounds the CPUs the container may use (the engine's --cpus,
	// 1.5 is one and a half); 0 means no bound.
	CPUs float64
	// PidsLimit bounds the processes of the container, so that a fork
	// loop ends inside it; 0 means DefaultPidsLimit, a negative value no
	// bound.
	PidsLimit int64
	// ReadOnlyRootFS mounts the image's file system read-only (the
	// workspace and staging mounts stay as they are, and /tmp is a
	// private tmpfs).
	ReadOnlyRootFS bool
	// CapDrop are the Linux capabilities the container's processes lose
	// ("ALL", or names such as "NET_RAW").
	CapDrop []string
	// Leftovers, when set, is called once, at the provider's first
	// acquisition, with the containers of the provider that aml processes
	// of this machine left when they were killed (see Leftovers), when
	// there are any; nothing is removed. The aml command prints one line
	// naming them and the prune command.
	Leftovers func([]Leftover)
	// Relay is the host path of an aml executable that runs in the image
	// (a static Linux build, or one whose libraries the image has). It is
	// mounted read-only at RelayPath, and agents in the container reach
	// their Starlark tools through its "mcp-relay" over a unix socket in
	// the read-only SocketMount, with no network. "" means none: agents with tools
	// cannot run in the container.
	Relay string
}

// DefaultPidsLimit bounds the processes of a container when
// Options.PidsLimit is 0: plenty for builds and test runners, few enough
// that a fork loop stops inside the container, not on the host.
const DefaultPidsLimit = 4096

// RelayPath is where Options.Relay is mounted in the container.
const RelayPath = "/opt/aml/bin/aml"

// Provider is the Docker eval.SandboxProvider. It is immutable after New
// and safe for concurrent use; every Acquire creates its own container.
type Provider struct {
	cli           client.APIClient
	opts          Options
	maxOutput     int64
	engineTimeout time.Duration
	staged        *staged.Provider[string, *box]
	// leftoversOnce runs the Leftovers report once.
	leftoversOnce sync.Once
}

var _ eval.SandboxProvider = (*Provider)(nil)

// New validates opts and returns a Provider. It does not contact the
// engine: a missing daemon or image is reported by Acquire.
func New(opts Options) (*Provider, error) {
	if err := CheckOptions(opts); err != nil {
		return nil, err
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Network == "" {
		opts.Network = "none"
	}
	if opts.SetupTimeout == 0 {
		opts.SetupTimeout = DefaultSetupTimeout
	}
	if opts.EngineTimeout == 0 {
		opts.EngineTimeout = DefaultEngineTimeout
	}
	if opts.PidsLimit == 0 {
		opts.PidsLimit = DefaultPidsLimit
	}
	opts.CapDrop = slices.Clone(opts.CapDrop)
	maxOutput := opts.MaxOutputBytes
	if maxOutput == 0 {
		maxOutput = DefaultMaxOutputBytes
	}
	if opts.Relay != "" {
		abs, err := filepath.Abs(opts.Relay)
		if err != nil {
			return nil, fmt.Errorf("docker sandbox relay %q: %w", opts.Relay, err)
		}
		opts.Relay = abs
	}
	if opts.Workspace != "" {
		abs, err := filepath.Abs(opts.Workspace)
		if err != nil {
			return nil, fmt.Errorf("docker sandbox workspace %q: %w", opts.Workspace, err)
		}
		opts.Workspace = abs
	}
	opts.Env = maps.Clone(opts.Env)
	opts.Labels = maps.Clone(opts.Labels)
	cli := opts.Client
	if cli == nil {
		c, err := NewClient()
		if err != nil {
			return nil, fmt.Errorf("docker sandbox: the Docker client: %w", err)
		}
		cli = c
	}
	p := &Provider{cli: cli, opts: opts, maxOutput: maxOutput, engineTimeout: opts.EngineTimeout}
	sp, err := staged.New(staged.Hooks[string, *box]{
		Name:            "docker",
		Provision:       p.provision,
		CreateRuntime:   p.createRuntime,
		Initialize:      p.initialize,
		ReleaseResource: p.releaseResource,
	})
	if err != nil {
		return nil, err
	}
	p.staged = sp
	return p, nil
}

// CheckOptions reports what New refuses in opts before it does anything
// (it makes no client and contacts no engine): malformed strings,
// negative or too small bounds, invalid environment variables and
// labels. aml check calls it on a call's literal arguments.
func CheckOptions(opts Options) error {
	for _, o := range []struct{ label, v string }{
		{"image", opts.Image}, {"setup", opts.Setup}, {"user", opts.User}, {"workspace", opts.Workspace}, {"network", opts.Network}, {"relay", opts.Relay},
	} {
		if err := option.Check("docker sandbox", o.label, o.v, false); err != nil {
			return err
		}
	}
	if opts.MaxOutputBytes < 0 {
		return fmt.Errorf("docker sandbox MaxOutputBytes must be positive, got %d", opts.MaxOutputBytes)
	}
	switch {
	case opts.Memory < 0:
		return fmt.Errorf("docker sandbox memory must be positive, got %d", opts.Memory)
	case opts.Memory > 0 && opts.Memory < 6<<20:
		// The engine refuses less than 6 MiB.
		return fmt.Errorf("docker sandbox memory must be at least 6 MiB, got %d bytes", opts.Memory)
	case opts.CPUs < 0:
		return fmt.Errorf("docker sandbox cpus must be positive, got %g", opts.CPUs)
	case opts.SetupTimeout < 0:
		return fmt.Errorf("docker sandbox setup timeout must be positive, got %v", opts.SetupTimeout)
	case opts.EngineTimeout < 0:
		return fmt.Errorf("docker sandbox engine timeout must be positive, got %v", opts.EngineTimeout)
	}
	for _, c := range opts.CapDrop {
		if err := option.Check("docker sandbox", "cap_drop entry", c, true); err != nil {
			return err
		}
	}
	if err := checkEnv(opts.Env); err != nil {
		return err
	}
	for k := range opts.Labels {
		if k == "" || strings.HasPrefix(k, "aml.") {
			return fmt.Errorf("docker sandbox label %q is invalid: labels must be non-empty and not start with \"aml.\" (the provider's own)", k)
		}
	}
	return nil
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("docker sandbox environment variable %q is invalid", k)
		}
	}
	return nil
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Name returns "docker".
func (p *Provider) Name() string { return "docker" }

// Image returns the image the provider's containers run.
func (p *Provider) Image() string { return p.opts.Image }

// Acquire creates, starts and sets up a container for req (see the
// package documentation). A failed or cancelled acquisition leaves no
// container behind.
func (p *Provider) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if req == nil {
		return nil, errors.New("docker sandbox: nil acquire request")
	}
	if p.opts.Leftovers != nil {
		p.leftoversOnce.Do(func() {
			// A failed listing says nothing here: the acquisition that
			// follows reports an engine that does not answer.
			if l, err := p.leftovers(ctx); err == nil && len(l) > 0 {
				p.opts.Leftovers(l)
			}
		})
	}
	return p.staged.Acquire(ctx, req)
}

// box is one container and what the lease keeps beside it.
type box struct {
	id      string // the container id ("" until created)
	leaseID string
	// host is a Host of the host runner over the same workspace
	// directory: the files of the runtime, with its confinement.
	host    *hostexec.Host
	staging string // host directory mounted at StagingMount
	// stagingRoot is a handle on staging opened before the container
	// existed: the container can write in the directory, so the host
	// reaches what is below it only through this handle, never by path
	// (a link the container plants in place of a staging
	// never leads the host out).
	stagingRoot *os.Root
	// sockets is the host directory mounted read-only at SocketMount.
	sockets string
	access  eval.Access
	root    string // guest path of the logical root
	cwd     string // guest path of the logical cwd
	rt      *runtime
	// relayErr says why the mounted relay does not run in the image.
	relayErr error
}

func (p *Provider) provision(ctx context.Context, req *eval.SandboxAcquireRequest) (prov staged.Provisioned[string, *box], err error) {
	if req.Access != eval.ReadOnly && req.Access != eval.ReadWrite {
		return prov, fmt.Errorf("access %q must be %q or %q", req.Access, eval.ReadOnly, eval.ReadWrite)
	}
	dir := p.opts.Workspace
	if req.Workspace != nil && req.Workspace.Directory != "" {
		dir = req.Workspace.Directory
	}
	if dir == "" {
		return prov, errors.New("the docker sandbox needs an active workspace() or a workspace directory (docker_sandbox(workspace = ...)) to mount at " + WorkspaceMount)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return prov, fmt.Errorf("workspace directory %q: %w", dir, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return prov, err
	}
	// The host runner validates root and cwd against the directory and
	// serves the files from the host. It is given the request's directory
	// as written (the fallback resolved), so that its errors quote it.
	hostDir := real
	if req.Workspace != nil && req.Workspace.Directory != "" {
		hostDir = req.Workspace.Directory
	}
	host, err := hostexec.Open(ctx, hostexec.Options{Dir: hostDir, Root: req.Root, Cwd: req.Cwd, Access: req.Access})
	if err != nil {
		return prov, err
	}
	b := &box{leaseID: "docker:" + uuid.NewString(), host: host, access: req.Access,
		root: path.Join(WorkspaceMount, req.Root), cwd: path.Join(WorkspaceMount, req.Root, req.Cwd)}
	prov = staged.Provisioned[string, *box]{ID: b.leaseID, Resource: b}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.releaseResource(context.WithoutCancel(ctx), prov))
		}
	}()
	if b.staging, err = scratch.MkdirTemp("aml-docker-"); err != nil {
		return prov, err
	}
	if err := os.Chmod(b.staging, 0o755); err != nil { // the container's user reads stagings
		return prov, err
	}
	if b.stagingRoot, err = os.OpenRoot(b.staging); err != nil {
		return prov, err
	}
	if b.sockets, err = scratch.MkdirTemp("aml-docker-"); err != nil {
		return prov, err
	}
	if err := os.Chmod(b.sockets, 0o711); err != nil { // the container's user reaches a socket by its name
		return prov, err
	}
	if err := p.ensureImage(ctx); err != nil {
		return prov, err
	}
	labels := maps.Clone(p.opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelRun] = req.EvaluationID
	labels[LabelLease] = b.leaseID
	labels[LabelOwner] = procscope.Marker()
	init := true
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: real, Target: WorkspaceMount, ReadOnly: req.Access == eval.ReadOnly},
		{Type: mount.TypeBind, Source: b.staging, Target: StagingMount},
		{Type: mount.TypeBind, Source: b.sockets, Target: SocketMount, ReadOnly: true},
	}
	if p.opts.Relay != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: p.opts.Relay, Target: RelayPath, ReadOnly: true})
	}
	// A cancelled request could leave a container the engine created
	// after all, with no id to remove it by: the creation is not
	// cancelled, only bounded, and cancellation is checked after it.
	created, err := engineCall(p, context.WithoutCancel(ctx), "create container", func(cctx context.Context) (container.CreateResponse, error) {
		return p.cli.ContainerCreate(cctx,
			&container.Config{
				Image:      p.opts.Image,
				Entrypoint: []string{"/bin/sh", "-c", keepAlive},
				Cmd:        []string{},
				User:       p.opts.User,
				Env:        envList(p.opts.Env),
				Labels:     labels,
				WorkingDir: b.cwd,
			},
			p.hostConfig(&init, mounts), nil, nil, containerName(req.EvaluationID))
	})
	if err != nil {
		return prov, fmt.Errorf("creating a container from %q: %w%s", p.opts.Image, err, hint(err, real))
	}
	b.id = created.ID
	if err := ctx.Err(); err != nil {
		return prov, context.Cause(ctx)
	}
	if err := engineDo(p, ctx, "start container", func(c context.Context) error {
		return p.cli.ContainerStart(c, b.id, container.StartOptions{})
	}); err != nil {
		return prov, fmt.Errorf("starting a container from %q: %w%s", p.opts.Image, err, hint(err, real))
	}
	if err := p.probe(ctx, b); err != nil {
		return prov, err
	}
	return prov, nil
}

// hostConfig is the HostConfig of a new container: its mounts, network
// and resource bounds.
func (p *Provider) hostConfig(init *bool, mounts []mount.Mount) *container.HostConfig {
	hc := &container.HostConfig{
		Init:           init,
		NetworkMode:    container.NetworkMode(p.opts.Network),
		Mounts:         mounts,
		ReadonlyRootfs: p.opts.ReadOnlyRootFS,
		CapDrop:        p.opts.CapDrop,
	}
	if p.opts.ReadOnlyRootFS {
		hc.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev"}
	}
	if p.opts.Memory > 0 {
		// Swap bounded to the memory: the bound is not escaped by
		// swapping.
		hc.Memory, hc.MemorySwap = p.opts.Memory, p.opts.Memory
	}
	if p.opts.CPUs > 0 {
		hc.NanoCPUs = int64(p.opts.CPUs * 1e9)
	}
	if p.opts.PidsLimit > 0 {
		limit := p.opts.PidsLimit
		hc.PidsLimit = &limit
	}
	return hc
}

// hint says what to check for the engine errors users meet.
func hint(err error, dir string) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unable to find user"), strings.Contains(msg, "no matching entries in passwd"):
		return `; check user = (a uid, "uid:gid", or a user in the image's /etc/passwd)`
	case strings.Contains(msg, "bind source path does not exist"), strings.Contains(msg, "invalid mount config"):
		return fmt.Sprintf("; the engine cannot mount %s: a remote engine (DOCKER_HOST) sees its own filesystem, not this machine's", dir)
	case strings.Contains(msg, "executable file not found"), strings.Contains(msg, "no such file or directory"):
		return "; the image must have /bin/sh"
	}
	return ""
}

// probe checks that the new container runs a shell command: an image
// without /bin/sh starts, then stops at once.
func (p *Provider) probe(ctx context.Context, b *box) error {
	inspect := func(ctx context.Context) (container.InspectResponse, error) {
		return engineCall(p, ctx, "inspect container", func(c context.Context) (container.InspectResponse, error) {
			return p.cli.ContainerInspect(c, b.id)
		})
	}
	fail := func(err error) error {
		var te *EngineTimeoutError
		if errors.As(err, &te) {
			return fmt.Errorf("the container of %q does not run commands: %w", p.opts.Image, err)
		}
		ins, ierr := inspect(context.WithoutCancel(ctx))
		if ierr == nil && ins.State != nil && !ins.State.Running {
			return fmt.Errorf("the container of %q stopped right after it started (exit status %d%s): the image must have /bin/sh", p.opts.Image, ins.State.ExitCode, stateError(ins.State.Error))
		}
		return fmt.Errorf("the container of %q does not run commands: %w", p.opts.Image, err)
	}
	ex, err := engineCall(p, ctx, "create exec", func(c context.Context) (container.ExecCreateResponse, error) {
		return p.cli.ContainerExecCreate(c, b.id, container.ExecOptions{Cmd: []string{"/bin/sh", "-c", ":"}, AttachStdout: true, AttachStderr: true})
	})
	if err != nil {
		return fail(err)
	}
	att, err := attach(p, ctx, "attach exec", func(c context.Context) (types.HijackedResponse, error) {
		return p.cli.ContainerExecAttach(c, ex.ID, container.ExecAttachOptions{})
	})
	if err != nil {
		return fail(err)
	}
	// The probe's output is a few bytes at most; a daemon that stops
	// sending it is cut at the engine timeout.
	stop := context.AfterFunc(ctx, func() { att.Close() })
	idle := time.AfterFunc(p.engineTimeout, func() { att.Close() })
	out, _ := io.ReadAll(io.LimitReader(att.Reader, 4096))
	idle.Stop()
	stop()
	att.Close()
	execInspect := func() (container.ExecInspect, error) {
		return engineCall(p, ctx, "inspect exec", func(c context.Context) (container.ExecInspect, error) {
			return p.cli.ContainerExecInspect(c, ex.ID)
		})
	}
	ins, err := execInspect()
	if err != nil {
		return fail(err)
	}
	for ins.Running {
		time.Sleep(5 * time.Millisecond)
		if ins, err = execInspect(); err != nil {
			return fail(err)
		}
	}
	if ins.ExitCode != 0 {
		// The container may be stopping: say so when it has stopped.
		for range 20 {
			c, err := inspect(ctx)
			if err == nil && c.State != nil && !c.State.Running {
				return fail(fmt.Errorf("exit status %d", ins.ExitCode))
			}
			time.Sleep(25 * time.Millisecond)
		}
		return fmt.Errorf("the container of %q cannot run /bin/sh (exit status %d: %s): the image must have /bin/sh", p.opts.Image, ins.ExitCode, strings.TrimSpace(string(out)))
	}
	return nil
}

func stateError(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// ensureImage pulls the image when the engine does not have it, as
// "docker run" does. The pull is bounded by the engine timeout between
// two progress messages, not as a whole: a large image keeps pulling.
func (p *Provider) ensureImage(ctx context.Context) error {
	imageInspect := func() error {
		return engineDo(p, ctx, "inspect image", func(c context.Context) error {
			_, err := p.cli.ImageInspect(c, p.opts.Image)
			return err
		})
	}
	err := imageInspect()
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return err
	}
	// The request's context outlives the call that starts it (the
	// progress is read after), so the bounds cancel it: first the wait
	// for an answer, then the wait for each progress message.
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	answer := &EngineTimeoutError{Op: "pull image", After: p.engineTimeout}
	idle := &EngineTimeoutError{Op: "pull image (no progress)", After: p.engineTimeout}
	progress := newIdleReader(nil, p.engineTimeout, func() { cancel(answer) })
	rc, perr := p.cli.ImagePull(pctx, p.opts.Image, image.PullOptions{})
	if perr == nil {
		progress.r = rc
		progress.timer.Stop()
		progress.timer = time.AfterFunc(p.engineTimeout, func() { cancel(idle) })
		_, perr = io.Copy(io.Discard, progress) // the pull runs while its progress is read
		rc.Close()
	}
	progress.close()
	var te *EngineTimeoutError
	if errors.As(context.Cause(pctx), &te) {
		perr = te
	}
	if perr == nil {
		if err := imageInspect(); err == nil {
			return nil
		}
	}
	return fmt.Errorf("image %q is not on the Docker engine and pulling it failed (%v): check the image name and the registry login, or build the image (docker build) and pass image = its tag", p.opts.Image, perr)
}

// containerName is the name of a new container:
// aml-<first 12 characters of the evaluation id>-<random suffix>.
func containerName(evaluationID string) string {
	var b strings.Builder
	for _, r := range evaluationID {
		if b.Len() == 12 {
			break
		}
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	id := b.String()
	if id == "" {
		id = "run"
	}
	return "aml-" + id + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
}

// engineError explains an error of the engine that means it cannot be
// reached.
func engineError(err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("%w: is the Docker daemon running, and does DOCKER_HOST point at it?", err)
	}
	return err
}

func (p *Provider) createRuntime(_ context.Context, prov staged.Provisioned[string, *box], req *eval.SandboxAcquireRequest) (eval.SandboxRuntime, error) {
	b := prov.Resource
	b.rt = &runtime{p: p, b: b, access: req.Access, rootPath: req.Root, cwdPath: req.Cwd, procs: map[*process]struct{}{}}
	return b.rt, nil
}

func (p *Provider) initialize(ctx context.Context, prov staged.Provisioned[string, *box], rt eval.SandboxRuntime, _ *eval.SandboxAcquireRequest) error {
	if p.opts.Relay != "" {
		// An aml built with cgo needs the C library it was linked with.
		res, err := rt.Exec(ctx, RelayPath, []string{"version"}, eval.ExecOptions{})
		switch {
		case err != nil:
			return fmt.Errorf("checking the relay: %w", err)
		case res.ExitCode != 0:
			prov.Resource.relayErr = fmt.Errorf("the aml executable %s does not run in the image %q (exit status %d: %s); build aml with CGO_ENABLED=0 for images without its C library", p.opts.Relay, p.opts.Image, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
	}
	if p.opts.Setup == "" {
		return nil
	}
	res, err := rt.Exec(ctx, "sh", []string{"-lc", p.opts.Setup}, eval.ExecOptions{Timeout: p.opts.SetupTimeout})
	if err != nil {
		var te *EngineTimeoutError
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &te) {
			return fmt.Errorf("setup did not finish within %v (setup_timeout_ms raises the bound): %w", p.opts.SetupTimeout, err)
		}
		return fmt.Errorf("setup: %w", err)
	}
	if res.ExitCode != 0 {
		out := strings.TrimSpace(string(res.Stderr))
		if out == "" {
			out = strings.TrimSpace(string(res.Stdout))
		}
		if len(out) > 2000 {
			out = "…" + out[len(out)-2000:]
		}
		return fmt.Errorf("setup exited with status %d: %s", res.ExitCode, out)
	}
	return nil
}

// releaseResource removes the container, then the host staging and the
// host lease. It runs once per lease (staged).
func (p *Provider) releaseResource(ctx context.Context, prov staged.Provisioned[string, *box]) error {
	b := prov.Resource
	if b == nil {
		return nil
	}
	var errs []error
	if b.rt != nil {
		b.rt.release()
	}
	if b.id != "" {
		err := engineDo(p, context.WithoutCancel(ctx), "remove container", func(c context.Context) error {
			return p.cli.ContainerRemove(c, b.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing container %s (aml sandbox prune removes it once the engine answers): %w", b.id, err))
		}
	}
	if b.stagingRoot != nil {
		_ = b.stagingRoot.Close()
	}
	for _, dir := range []string{b.staging, b.sockets} {
		if dir == "" {
			continue
		}
		if err := scratch.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if b.host != nil {
		if err := b.host.Release(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
