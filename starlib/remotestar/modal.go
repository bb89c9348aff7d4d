package remotestar

import (
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "github.com/modal-labs/modal-client/go"
	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
)

var modalBuiltin = &starlib.Builtin{
	Name:  "modal_sandbox",
	Group: "providers",
	Doc: `Returns a sandbox provider whose leases are disposable Modal sandboxes (Modal's official Go SDK; MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, else ~/.modal.toml, when not given).

Each outermost sandbox() creates one sandbox in the app app_name= (created when missing) from the registry image image=, transfers the root subtree of the workspace into /workspace (a tar stream, extracted remotely), and runs setup=. Commands run there with literal arguments and bounded output; under access = "read-only" they are refused (the tree is transferred, not mounted). On release of a read-write lease the remote tree is downloaded and mirrored into the source (additions, changes and deletions), then the sandbox is terminated; changes of a sandbox that dies first are lost. Agents run inside with their tools reaching the host through a tunnel: the image needs sh, tar, mkdir, rm, dd, the agent and the aml executable (relay=).`,
	Params: append([]starlib.Param{
		{Name: "image", Type: "str | None", Default: "None", Doc: `Registry image of new sandboxes (default "` + modal.DefaultImage + `"); linux/amd64.`},
		{Name: "app_name", Type: "str | None", Default: `"` + modal.DefaultAppName + `"`, Doc: "Modal app the sandboxes belong to, created when missing."},
		{Name: "create", Type: "dict | None", Default: "None", Doc: "Native creation parameters: cpu, cpu_limit, memory_mib, memory_limit_mib, gpu, timeout_ms (lifetime, default one hour), idle_timeout_ms, env, regions, cloud, block_network, outbound_domain_allowlist, outbound_cidr_allowlist, tags."},
		{Name: "token_id", Type: "str | None", Default: "None", Secret: true, Doc: "Modal token id (MODAL_TOKEN_ID); prefer env()."},
		{Name: "token_secret", Type: "str | None", Default: "None", Secret: true, Doc: "Modal token secret (MODAL_TOKEN_SECRET); prefer env()."},
		{Name: "environment", Type: "str | None", Default: "None", Doc: "Modal environment (MODAL_ENVIRONMENT, else the profile's or the workspace's default)."},
	}, common...),
	Returns: "a sandbox provider",
	Example: `configure(sandbox_provider = modal_sandbox(image = "registry.example.com/aml-agent:1", token_id = env("MODAL_TOKEN_ID"), token_secret = env("MODAL_TOKEN_SECRET")))`,
}

// modalCreateKeys are the keys create= accepts.
var modalCreateKeys = []string{"block_network", "cloud", "cpu", "cpu_limit", "env", "gpu", "idle_timeout_ms", "memory_limit_mib", "memory_mib",
	"outbound_cidr_allowlist", "outbound_domain_allowlist", "regions", "tags", "timeout_ms"}

// modalCreate turns create= into the SDK's parameters.
func modalCreate(m map[string]any) (sdk.SandboxCreateParams, error) {
	var p sdk.SandboxCreateParams
	num := func(k string) (float64, error) {
		switch v := m[k].(type) {
		case float64:
			return v, nil
		case int64:
			return float64(v), nil
		case int:
			return float64(v), nil
		}
		return 0, fmt.Errorf("create[%q] must be a number", k)
	}
	strs := func(k string) ([]string, error) {
		list, ok := m[k].([]any)
		if !ok {
			return nil, fmt.Errorf("create[%q] must be a list of strings", k)
		}
		out := make([]string, 0, len(list))
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("create[%q] must be a list of strings", k)
			}
			out = append(out, s)
		}
		return out, nil
	}
	strMap := func(k string) (map[string]string, error) {
		d, ok := m[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("create[%q] must be a dict of strings", k)
		}
		out := map[string]string{}
		for key, v := range d {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("create[%q] must be a dict of strings", k)
			}
			out[key] = s
		}
		return out, nil
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		var err error
		var f float64
		switch k {
		case "cpu", "cpu_limit", "memory_mib", "memory_limit_mib", "timeout_ms", "idle_timeout_ms":
			if f, err = num(k); err == nil && f <= 0 {
				err = fmt.Errorf("create[%q] must be positive", k)
			}
			switch k {
			case "cpu":
				p.CPU = f
			case "cpu_limit":
				p.CPULimit = f
			case "memory_mib":
				p.MemoryMiB = int(f)
			case "memory_limit_mib":
				p.MemoryLimitMiB = int(f)
			case "timeout_ms":
				p.Timeout = time.Duration(f) * time.Millisecond
			case "idle_timeout_ms":
				p.IdleTimeout = time.Duration(f) * time.Millisecond
			}
		case "gpu", "cloud":
			s, ok := m[k].(string)
			if !ok {
				err = fmt.Errorf("create[%q] must be a string", k)
			}
			if k == "gpu" {
				p.GPU = s
			} else {
				p.Cloud = s
			}
		case "block_network":
			b, ok := m[k].(bool)
			if !ok {
				err = fmt.Errorf("create[%q] must be a bool", k)
			}
			p.BlockNetwork = b
		case "regions":
			p.Regions, err = strs(k)
		case "outbound_cidr_allowlist", "outbound_domain_allowlist":
			var list []string
			if list, err = strs(k); err == nil {
				if k == "outbound_cidr_allowlist" {
					p.OutboundCIDRAllowlist = &sdk.Allowlist{Entries: list}
				} else {
					p.OutboundDomainAllowlist = &sdk.Allowlist{Entries: list}
				}
			}
		case "env":
			p.Env, err = strMap(k)
		case "tags":
			p.Tags, err = strMap(k)
		default:
			err = fmt.Errorf("create= has no key %q; the keys are %s", k, strings.Join(modalCreateKeys, ", "))
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// modalOptions reads the service options of a call of modal_sandbox().
func modalOptions(c *starlib.Call) (modal.Options, error) {
	mo := modal.Options{TokenID: c.Str("token_id"), TokenSecret: c.Str("token_secret"), Environment: c.Str("environment"),
		AppName: c.Str("app_name"), Image: c.Str("image")}
	create, err := c.JSON("create")
	if err != nil {
		return mo, err
	}
	if mo.Create, err = modalCreate(create); err != nil {
		return mo, c.Errorf("%v", err)
	}
	return mo, nil
}

// modalRules are what aml check decides of a call: the rules of its
// arguments, what the service refuses before it makes a client, and,
// when the call names its token (else the client reads Modal's
// configuration, and may fail there first), what the remote core
// refuses.
func modalRules(c *starlib.Call) error {
	mo, err := modalOptions(c)
	if err != nil {
		return err
	}
	if err := modal.CheckOptions(mo); err != nil {
		return c.Errorf("%v", err)
	}
	if mo.TokenID == "" {
		return nil
	}
	opts, err := remoteOptions(c, nil, "/workspace")
	if err != nil {
		return err
	}
	if err := remote.CheckOptions("modal", opts); err != nil {
		return c.Errorf("%v", err)
	}
	return nil
}

func modalImpl(c *starlib.Call, ext Options) (starlark.Value, error) {
	mo, err := modalOptions(c)
	if err != nil {
		return nil, err
	}
	newService := func(o modal.Options) (remote.Service, error) { return modal.New(o) }
	if ext.Modal != nil {
		newService = ext.Modal
	}
	svc, err := newService(mo)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return newProvider(c, svc, "/workspace")
}
