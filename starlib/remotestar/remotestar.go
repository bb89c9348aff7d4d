// Package remotestar binds the remote sandbox providers to Starlark:
// daytona_sandbox(), modal_sandbox() and kubernetes_sandbox(), sandboxes
// that are disposable machines of a service or pods of a cluster, the
// workspace transferred in and mirrored back.
//
// It lives outside package starlib because the services' clients bring
// their dependencies with them. Add Extension to
// starlib.LoadOptions.Extensions (the aml command does) to make the
// factories available.
package remotestar

import (
	"time"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/sandbox/daytona"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
)

// Extension adds the remote sandbox factories to workflows loaded with it.
var Extension = New(Options{})

// Options configure the extension.
type Options struct {
	// Daytona, when set, makes the Daytona services instead of
	// daytona.New (tests point them at a double).
	Daytona func(daytona.Options) (remote.Service, error)
	// Modal, when set, makes the Modal services instead of modal.New.
	Modal func(modal.Options) (remote.Service, error)
	// Kubernetes, when set, makes the Kubernetes services instead of
	// kubernetes.New.
	Kubernetes func(kubernetes.Options) (remote.Service, error)
}

// New returns the extension with opts.
func New(opts Options) *starlib.Extension {
	d := *daytonaBuiltin
	d.Impl = func(c *starlib.Call) (starlark.Value, error) { return daytonaImpl(c, opts) }
	d.Rules = daytonaRules
	m := *modalBuiltin
	m.Impl = func(c *starlib.Call) (starlark.Value, error) { return modalImpl(c, opts) }
	m.Rules = modalRules
	k := *kubernetesBuiltin
	k.Impl = func(c *starlib.Call) (starlark.Value, error) { return kubernetesImpl(c, opts) }
	k.Rules = kubernetesRules
	return &starlib.Extension{Name: "remote", Builtins: []*starlib.Builtin{&d, &k, &m}}
}

// common are the parameters every remote sandbox factory takes.
var common = []starlib.Param{
	{Name: "setup", Type: "str | None", Default: "None", Doc: `Trusted shell command run with "sh -lc" in the cwd after the workspace arrived, on every acquisition; a failure destroys the sandbox.`},
	{Name: "setup_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Bound on setup= (default 600000, ten minutes)."},
	{Name: "workspace", Type: "str | None", Default: "None", Doc: "Fallback local directory transferred when no workspace() is active."},
	{Name: "max_output_bytes", Type: "int | None", Default: "None", Positive: true, Doc: "Bound on a command's combined output (default 4 MiB)."},
	{Name: "relay", Type: "str | None", Default: "None", Doc: `The aml executable in the image (default "aml" on its PATH): an agent's tool relay and the tunnel to the host run it.`},
	{Name: "labels", Type: "dict | None", Default: "None", Doc: `Extra labels of every sandbox (string values); the "aml." labels are the provider's.`},
}

// remoteOptions reads the common parameters.
func remoteOptions(c *starlib.Call, svc remote.Service, guestRoot string) (remote.Options, error) {
	opts := remote.Options{Service: svc, GuestRoot: guestRoot, Setup: c.Str("setup"), Workspace: c.Str("workspace"), Relay: c.Str("relay")}
	if ms, set, err := c.Int("setup_timeout_ms"); err != nil {
		return opts, err
	} else if set {
		opts.SetupTimeout = time.Duration(ms) * time.Millisecond
	}
	if n, set, err := c.Int("max_output_bytes"); err != nil {
		return opts, err
	} else if set {
		opts.MaxOutputBytes = n
	}
	labels, err := c.StringDict("labels")
	if err != nil {
		return opts, err
	}
	opts.Labels = labels
	if abs, err := c.Abs(opts.Workspace); err == nil {
		opts.Workspace = abs
	}
	return opts, nil
}

var daytonaBuiltin = &starlib.Builtin{
	Name:  "daytona_sandbox",
	Group: "providers",
	Doc: `Returns a sandbox provider whose leases are disposable Daytona sandboxes (the Daytona v0 API; DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_ORGANIZATION_ID and DAYTONA_TARGET when not given).

Each outermost sandbox() creates one sandbox from image= (a one-line Dockerfile FROM it) or snapshot= (not both; neither means the AML agent image), transfers the root subtree of the workspace into "workspace" in the sandbox user's home (a tar stream, extracted remotely), and runs setup=. Commands run there with literal arguments and bounded output; under access = "read-only" they are refused (the tree is transferred, not mounted). On release of a read-write lease the remote tree is downloaded and mirrored into the source (additions, changes and deletions), then the sandbox is destroyed; changes of a sandbox that dies first are lost. Agents run inside with their tools reaching the host through a tunnel: the image needs sh, tar, mkdir, rm, the agent and the aml executable (relay=).`,
	Params: append([]starlib.Param{
		{Name: "image", Type: "str | None", Default: "None", Doc: `Image of new sandboxes (default "` + daytona.DefaultImage + `"); not with snapshot=.`},
		{Name: "snapshot", Type: "str | None", Default: "None", Doc: "Daytona snapshot new sandboxes are created from; not with image=."},
		{Name: "create", Type: "dict | None", Default: "None", Doc: "Further fields of Daytona's create request (cpu, memory, disk, env, networkAllowList, ...); not image or snapshot."},
		{Name: "create_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Bound on a sandbox's creation, a build included (default 300000)."},
		{Name: "api_key", Type: "str | None", Default: "None", Secret: true, Doc: "Daytona API key (DAYTONA_API_KEY); prefer env()."},
		{Name: "api_url", Type: "str | None", Default: "None", Doc: "Daytona API URL (DAYTONA_API_URL, else " + daytona.DefaultAPIURL + ")."},
		{Name: "organization_id", Type: "str | None", Default: "None", Doc: "Daytona organization (DAYTONA_ORGANIZATION_ID)."},
		{Name: "target", Type: "str | None", Default: "None", Doc: "Daytona target region (DAYTONA_TARGET)."},
	}, common...),
	Returns: "a sandbox provider",
	Example: `configure(sandbox_provider = daytona_sandbox(snapshot = "aml-agent", api_key = env("DAYTONA_API_KEY")))`,
}

// daytonaOptions reads the service options of a call of
// daytona_sandbox().
func daytonaOptions(c *starlib.Call) (daytona.Options, error) {
	do := daytona.Options{APIKey: c.Str("api_key"), APIURL: c.Str("api_url"), OrganizationID: c.Str("organization_id"), Target: c.Str("target"),
		Image: c.Str("image"), Snapshot: c.Str("snapshot")}
	if c.Has("image") && c.Has("snapshot") && c.Value("image") != starlark.None && c.Value("snapshot") != starlark.None {
		return do, c.Errorf("image= and snapshot= cannot both be given: choose one, or neither for the AML agent image")
	}
	create, err := c.JSON("create")
	if err != nil {
		return do, err
	}
	for _, k := range []string{"image", "snapshot", "buildInfo"} {
		if _, ok := create[k]; ok {
			return do, c.Errorf("create= cannot hold %q: give image= or snapshot= at the top", k)
		}
	}
	do.Create = create
	if ms, set, err := c.Int("create_timeout_ms"); err != nil {
		return do, err
	} else if set {
		do.CreateTimeout = time.Duration(ms) * time.Millisecond
	}
	return do, nil
}

// daytonaRules are what aml check decides of a call: the rules of its
// arguments, and, when it names its API key (else the run reads
// DAYTONA_API_KEY, and may fail there first), what the service and the
// remote core refuse before they contact anything.
func daytonaRules(c *starlib.Call) error {
	do, err := daytonaOptions(c)
	if err != nil || do.APIKey == "" {
		return err
	}
	if err := daytona.CheckOptions(do); err != nil {
		return c.Errorf("%v", err)
	}
	opts, err := remoteOptions(c, nil, "workspace")
	if err != nil {
		return err
	}
	if err := remote.CheckOptions("daytona", opts); err != nil {
		return c.Errorf("%v", err)
	}
	return nil
}

func daytonaImpl(c *starlib.Call, ext Options) (starlark.Value, error) {
	do, err := daytonaOptions(c)
	if err != nil {
		return nil, err
	}
	newService := func(o daytona.Options) (remote.Service, error) { return daytona.New(o) }
	if ext.Daytona != nil {
		newService = ext.Daytona
	}
	svc, err := newService(do)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return newProvider(c, svc, "workspace")
}

// newProvider is the sandbox provider of a call over svc: the common
// parameters read, the remote core made.
func newProvider(c *starlib.Call, svc remote.Service, guestRoot string) (starlark.Value, error) {
	opts, err := remoteOptions(c, svc, guestRoot)
	if err != nil {
		return nil, err
	}
	p, err := remote.New(opts)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &starlib.SandboxProviderValue{Provider: p}, nil
}
