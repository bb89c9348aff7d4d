// Package dockerstar binds the Docker sandbox provider to Starlark:
// docker_sandbox(), sandboxes that are containers on a Docker engine.
//
// It lives outside package starlib because the Docker Engine client
// brings its dependencies with it. Add Extension to
// starlib.LoadOptions.Extensions (the aml command does) to make the
// factory available.
package dockerstar

import (
	"time"

	units "github.com/docker/go-units"
	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/sandbox/docker"
	"github.com/aml-go/aml/starlib"
)

// Extension adds docker_sandbox() to workflows loaded with it
// (starlib.LoadOptions.Extensions); its containers have no tool relay
// (New gives one).
var Extension = New(Options{})

// Options configure the extension.
type Options struct {
	// Relay is the host path of an aml executable that runs in the
	// containers: their agents' tool relay (docker.Options.Relay). The
	// aml command passes its own executable.
	Relay string
	// Leftovers is docker.Options.Leftovers of every provider made: the
	// report of containers that killed aml processes left.
	Leftovers func([]docker.Leftover)
}

// New returns the extension with opts.
func New(opts Options) *starlib.Extension {
	b := *dockerSandboxBuiltin
	b.Impl = func(c *starlib.Call) (starlark.Value, error) { return dockerSandboxImpl(c, opts) }
	b.Rules = func(c *starlib.Call) error { return dockerSandboxRules(c, opts) }
	return &starlib.Extension{Name: "docker", Builtins: []*starlib.Builtin{&b}}
}

var dockerSandboxBuiltin = &starlib.Builtin{
	Name:  "docker_sandbox",
	Group: "providers",
	Doc: `Returns a sandbox provider whose leases are containers on a Docker engine (DOCKER_HOST, else the local socket).

Each outermost sandbox() starts one container from image= (pulled when the engine does not have it) with the workspace (the active workspace(), else workspace=) bind-mounted at /workspace, read-only for access = "read-only"; root= and cwd= are directories below it. Commands run with literal arguments through docker exec, in their own process group, killed on cancellation, timeout, output overflow and release; the image needs /bin/sh. File reads and writes go through the host side of the mount, confined to the root. The container has no network unless network= says otherwise, is labelled with the run and lease ids, and is removed on every path. setup= runs "sh -lc <setup>" in the cwd of every new container; a non-zero exit, or running past setup_timeout_ms, fails the acquisition. Every call to the engine is bounded (engine_timeout_ms): a frozen daemon ends the run with an error naming the call, and a command's timeout_ms holds whatever the daemon does.`,
	Params: []starlib.Param{
		{Name: "image", Type: "str | None", Default: "None", Doc: `Container image (default "` + docker.DefaultImage + `"); pin a version or digest for reproducible runs.`},
		{Name: "setup", Type: "str | None", Default: "None", Doc: "Trusted shell command run in every new container."},
		{Name: "setup_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Bound on setup= (default 600000, ten minutes); past it the setup is killed and the acquisition fails."},
		{Name: "engine_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Bound on each call to the Docker engine, and on the wait between two progress messages of a pull (default 30000); a frozen or vanished daemon fails the run with an error naming the call."},
		{Name: "user", Type: "str | None", Default: "None", Doc: `User of the container's processes ("uid", "uid:gid" or a name the image knows); default the image's.`},
		{Name: "workspace", Type: "str | None", Default: "None", Doc: "Fallback host directory mounted at /workspace when no workspace() is active."},
		{Name: "max_output_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on a command's combined output (default 4 MiB)."},
		{Name: "network", Type: "str | None", Default: "None", Doc: `Network mode: "none" (the default), "host", "bridge" or a network name.`},
		{Name: "env", Type: "dict | None", Default: "None", Doc: "Environment variables of the container (string values)."},
		{Name: "labels", Type: "dict | None", Default: "None", Doc: `Extra container labels (string values); the "aml." labels are the provider's.`},
		{Name: "memory", Type: "int | str | None", Default: "None", Doc: `Memory bound of the container: bytes, or a size such as "512m" or "2g" (swap is bounded to the same); default none.`},
		{Name: "cpus", Type: "float | int | None", Default: "None", Doc: "CPUs the container may use, as docker run --cpus (1.5 is one and a half); default none."},
		{Name: "pids_limit", Type: "int | None", Default: "None", Doc: "Bound on the container's processes, so that a fork loop stops inside it (default 4096; 0 removes the bound)."},
		{Name: "read_only_rootfs", Type: "bool | None", Default: "None", Doc: "Mount the image's file system read-only; /workspace stays as access= says and /tmp is a private tmpfs (default False)."},
		{Name: "cap_drop", Type: "list | None", Default: "None", Doc: `Linux capabilities the container's processes lose, such as ["ALL"] or ["NET_RAW"] (default none beyond the engine's own).`},
	},
	Returns: "a sandbox provider",
	Example: `configure(sandbox_provider = docker_sandbox(image = "wearesingular/aml-agent-sandbox:latest", workspace = "."))`,
}

func dockerSandboxImpl(c *starlib.Call, ext Options) (starlark.Value, error) {
	opts, err := dockerOptions(c, ext)
	if err != nil {
		return nil, err
	}
	p, err := docker.New(opts)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &starlib.SandboxProviderValue{Provider: p}, nil
}

// dockerSandboxRules are what aml check decides of a call: what
// docker.New refuses before it makes a client.
func dockerSandboxRules(c *starlib.Call, ext Options) error {
	opts, err := dockerOptions(c, ext)
	if err != nil {
		return err
	}
	if err := docker.CheckOptions(opts); err != nil {
		return c.Errorf("%v", err)
	}
	return nil
}

// dockerOptions reads the options of a call of docker_sandbox().
func dockerOptions(c *starlib.Call, ext Options) (docker.Options, error) {
	opts := docker.Options{Image: c.Str("image"), Setup: c.Str("setup"), User: c.Str("user"), Workspace: c.Str("workspace"), Network: c.Str("network"), Relay: ext.Relay, Leftovers: ext.Leftovers}
	if n, set, err := c.Int("max_output_bytes"); err != nil {
		return opts, err
	} else if set {
		opts.MaxOutputBytes = n // positive: the catalog checked it
	}
	if ms, set, err := c.Int("setup_timeout_ms"); err != nil {
		return opts, err
	} else if set {
		opts.SetupTimeout = time.Duration(ms) * time.Millisecond
	}
	if ms, set, err := c.Int("engine_timeout_ms"); err != nil {
		return opts, err
	} else if set {
		opts.EngineTimeout = time.Duration(ms) * time.Millisecond
	}
	var err error
	if opts.Env, err = c.StringDict("env"); err != nil {
		return opts, err
	}
	if opts.Labels, err = c.StringDict("labels"); err != nil {
		return opts, err
	}
	switch v := c.Value("memory").(type) {
	case starlark.Int:
		n, ok := v.Int64()
		if !ok || n <= 0 {
			return opts, c.Errorf("memory must be a positive number of bytes, got %s", v)
		}
		opts.Memory = n
	case starlark.String:
		n, err := units.RAMInBytes(string(v))
		if err != nil || n <= 0 {
			return opts, c.Errorf(`memory %q is not a size such as "512m" or "2g"`, string(v))
		}
		opts.Memory = n
	}
	switch v := c.Value("cpus").(type) {
	case starlark.Float:
		opts.CPUs = float64(v)
	case starlark.Int:
		n, _ := v.Int64()
		opts.CPUs = float64(n)
	}
	if c.Has("cpus") && c.Value("cpus") != starlark.None && opts.CPUs <= 0 {
		return opts, c.Errorf("cpus must be positive, got %s", c.Value("cpus"))
	}
	if n, set, err := c.Int("pids_limit"); err != nil {
		return opts, err
	} else if set {
		switch {
		case n < 0:
			return opts, c.Errorf("pids_limit must be positive, or 0 to remove the bound, got %d", n)
		case n == 0:
			opts.PidsLimit = -1
		default:
			opts.PidsLimit = n
		}
	}
	opts.ReadOnlyRootFS = c.Bool("read_only_rootfs", false)
	if opts.CapDrop, err = c.StringList("cap_drop"); err != nil {
		return opts, err
	}
	if abs, err := c.Abs(opts.Workspace); err == nil {
		opts.Workspace = abs
	}
	return opts, nil
}
