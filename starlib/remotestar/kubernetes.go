package remotestar

import (
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
)

var kubernetesBuiltin = &starlib.Builtin{
	Name:  "kubernetes_sandbox",
	Group: "providers",
	Doc: `Returns a sandbox provider whose leases are pods of a Kubernetes cluster running agent-sandbox (sigs.k8s.io/agent-sandbox v1beta1; the kubeconfig of KUBECONFIG, else ~/.kube/config, else the pod's service account, when not given).

Each outermost sandbox() makes one Sandbox from image= (or from the SandboxTemplate template=), or claims one from the SandboxWarmPool warm_pool=, labelled with the run, the lease and the aml process; waits until it is Ready; transfers the root subtree of the workspace into /workspace of its pod (a tar stream over exec, extracted there), and runs setup=. Commands run there through pods/exec with literal arguments and bounded output; under access = "read-only" they are refused (the tree is transferred, not mounted). On release of a read-write lease the pod's tree is mirrored into the source (additions, changes and deletions), then the Sandbox or claim is deleted; changes of a pod that is deleted or evicted first are lost. Agents run in the pod with their tools reaching the host through a tunnel: the image needs sh, tar, mkdir, rm, cat, the agent and the aml executable (relay=). aml sandbox prune deletes what killed aml processes left.`,
	Params: append([]starlib.Param{
		{Name: "kubeconfig", Type: "str | None", Default: "None", Doc: "The kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster)."},
		{Name: "namespace", Type: "str | None", Default: "None", Doc: `Namespace of the sandboxes (default: the kubeconfig context's, else "default").`},
		{Name: "image", Type: "str | None", Default: "None", Doc: `Image of a Sandbox made from a pod template of the provider's (default "` + kubernetes.DefaultImage + `" when neither template= nor warm_pool= is given).`},
		{Name: "template", Type: "str | None", Default: "None", Doc: "SandboxTemplate whose blueprint new Sandboxes copy; not with image= or warm_pool=."},
		{Name: "warm_pool", Type: "str | None", Default: "None", Doc: "SandboxWarmPool a SandboxClaim takes a ready sandbox from; not with image= or template=."},
		{Name: "resources", Type: "dict | None", Default: "None", Doc: `Requests and limits of the container, with image=: {"cpu": "500m", "memory": "1Gi"}.`},
		{Name: "service_account", Type: "str | None", Default: "None", Doc: "Service account of the pod, with image=; its token is mounted only when one is named."},
		{Name: "ready_timeout_ms", Type: "int | None", Default: "None", Positive: true, Unit: "milliseconds", Doc: "Bound on a sandbox's way to Ready, scheduling and the image's pull included (default 300000)."},
	}, common...),
	Returns: "a sandbox provider",
	Example: `configure(sandbox_provider = kubernetes_sandbox(image = "registry.example.com/aml-agent:1", namespace = "agents"))`,
}

// kubernetesOptions reads the service options of a call of
// kubernetes_sandbox().
func kubernetesOptions(c *starlib.Call) (kubernetes.Options, error) {
	ko := kubernetes.Options{Kubeconfig: c.Str("kubeconfig"), Namespace: c.Str("namespace"), Image: c.Str("image"), Template: c.Str("template"),
		WarmPool: c.Str("warm_pool"), ServiceAccount: c.Str("service_account")}
	if ko.Kubeconfig != "" {
		if abs, err := c.Abs(ko.Kubeconfig); err == nil {
			ko.Kubeconfig = abs
		}
	}
	res, err := c.StringDict("resources")
	if err != nil {
		return ko, err
	}
	for k, v := range res {
		switch k {
		case "cpu":
			ko.CPU = v
		case "memory":
			ko.Memory = v
		default:
			keys := []string{"cpu", "memory"}
			return ko, c.Errorf("resources= has no key %q: it takes %q and %q", k, keys[0], keys[1])
		}
	}
	if ms, set, err := c.Int("ready_timeout_ms"); err != nil {
		return ko, err
	} else if set {
		ko.ReadyTimeout = time.Duration(ms) * time.Millisecond
	}
	if err := kubernetes.CheckOptions(ko); err != nil {
		return ko, callError(c, err)
	}
	return ko, nil
}

// kubernetesRules are what aml check decides of a call: the rules of its
// arguments, and what the service and the remote core refuse before they
// contact the cluster.
func kubernetesRules(c *starlib.Call) error {
	if _, err := kubernetesOptions(c); err != nil {
		return err
	}
	opts, err := remoteOptions(c, nil, kubernetes.GuestRoot)
	if err != nil {
		return err
	}
	if err := remote.CheckOptions("kubernetes", opts); err != nil {
		return c.Errorf("%v", err)
	}
	return kubernetesLabels(c, opts.Labels)
}

// kubernetesLabels checks labels= against Kubernetes' own rules.
func kubernetesLabels(c *starlib.Call, labels map[string]string) error {
	if err := kubernetes.CheckLabels(labels); err != nil {
		return callError(c, err)
	}
	return nil
}

func kubernetesImpl(c *starlib.Call, ext Options) (starlark.Value, error) {
	// What aml check refuses is refused first, in the same order, so
	// that the run and the check report the same error.
	if err := kubernetesRules(c); err != nil {
		return nil, err
	}
	ko, err := kubernetesOptions(c)
	if err != nil {
		return nil, err
	}
	newService := func(o kubernetes.Options) (remote.Service, error) { return kubernetes.New(o) }
	if ext.Kubernetes != nil {
		newService = ext.Kubernetes
	}
	svc, err := newService(ko)
	if err != nil {
		return nil, callError(c, err)
	}
	return newProvider(c, svc, kubernetes.GuestRoot)
}

// callError is the service's error at the call, without its own prefix
// (the call names the builtin).
func callError(c *starlib.Call, err error) error {
	return c.Errorf("%s", strings.TrimPrefix(err.Error(), "kubernetes sandbox: "))
}
