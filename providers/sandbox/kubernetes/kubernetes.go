package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// DefaultImage is the image of new sandboxes when Options names neither
// an image, a template nor a warm pool: the AML agent image.
const DefaultImage = "wearesingular/aml-agent-sandbox:latest"

// GuestRoot is the directory of the pod the workspace is transferred to.
const GuestRoot = "/workspace"

// Default bounds.
const (
	// DefaultReadyTimeout bounds a sandbox's way to Ready: scheduling,
	// the image's pull and the container's start.
	DefaultReadyTimeout = 5 * time.Minute
	// DefaultRequestTimeout bounds one API call.
	DefaultRequestTimeout = 30 * time.Second
)

// The agent-sandbox resources.
var (
	sandboxes         = sandboxv1.GroupVersion.WithResource("sandboxes")
	sandboxClaims     = extv1.GroupVersion.WithResource("sandboxclaims")
	sandboxTemplates  = extv1.GroupVersion.WithResource("sandboxtemplates")
	containerName     = "sandbox"
	installSandbox    = "kubectl apply --server-side -f https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v1.0.1/sandbox.yaml"
	installExtensions = "kubectl apply --server-side -f https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v1.0.1/sandbox-with-extensions.yaml"
)

// Options configure a Service.
type Options struct {
	// Kubeconfig is the kubeconfig file; "" means KUBECONFIG's files,
	// then ~/.kube/config, then the pod's own service account (in a
	// cluster).
	Kubeconfig string
	// Config, when set, is used instead of a kubeconfig (embedders and
	// tests).
	Config *rest.Config
	// Namespace of the sandboxes; "" means the kubeconfig context's,
	// else "default".
	Namespace string
	// Image, Template and WarmPool choose what a sandbox is made from;
	// at most one is given (none means Image = DefaultImage).
	Image    string
	Template string
	WarmPool string
	// CPU and Memory are the container's requests and limits, as
	// Kubernetes quantities ("500m", "1Gi"); only with Image.
	CPU    string
	Memory string
	// ServiceAccount is the pod's service account, whose token is then
	// mounted; "" means the namespace's default, with no token mounted.
	// Only with Image.
	ServiceAccount string
	// ReadyTimeout bounds the way to Ready; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// RequestTimeout bounds each API call; 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// Service is a remote.Service over a cluster's agent-sandbox API. It is
// safe for concurrent use.
type Service struct {
	opts    Options
	ns      string
	cfg     *rest.Config
	core    k8s.Interface
	dyn     dynamic.Interface
	server  string
	newName func() string
}

var _ remote.Service = (*Service)(nil)

// ErrNoKubeconfig is wrapped by New's error when no cluster is
// configured.
var ErrNoKubeconfig = errors.New("no kubeconfig")

// New validates opts, reads the kubeconfig and returns a Service. It does
// not contact the cluster.
func New(opts Options) (*Service, error) {
	if err := CheckOptions(opts); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Image == "" && opts.Template == "" && opts.WarmPool == "" {
		opts.Image = DefaultImage
	}
	quietKlog()
	cfg, ns, err := loadConfig(opts)
	if err != nil {
		return nil, err
	}
	if opts.Namespace != "" {
		ns = opts.Namespace
	}
	cfg = rest.CopyConfig(cfg)
	// Twenty sandboxes in parallel() each wait and exec: client-go's
	// default of 5 requests a second would queue them.
	cfg.QPS, cfg.Burst = 100, 200
	core, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	return &Service{opts: opts, ns: ns, cfg: cfg, core: core, dyn: dyn, server: cfg.Host, newName: randomName}, nil
}

// quietKlog stops client-go's own log (klog), which would print the
// streams' teardown ("Copying stdout failed", "Websocket Ping failed")
// on aml's stderr whenever a command is killed or a sandbox deleted: the
// provider reports what matters in its errors.
var quietKlog = sync.OnceFunc(func() {
	klog.SetLogger(logr.Discard())
})

// newService is New over given clients (the unit tests' fakes).
func newService(opts Options, core k8s.Interface, dyn dynamic.Interface) *Service {
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Image == "" && opts.Template == "" && opts.WarmPool == "" {
		opts.Image = DefaultImage
	}
	ns := opts.Namespace
	if ns == "" {
		ns = "default"
	}
	return &Service{opts: opts, ns: ns, cfg: &rest.Config{Host: "https://fake"}, core: core, dyn: dyn, server: "https://fake", newName: randomName}
}

// loadConfig reads the kubeconfig (or the pod's service account) and its
// context's namespace.
func loadConfig(opts Options) (*rest.Config, string, error) {
	if opts.Config != nil {
		return opts.Config, "default", nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		if _, err := os.Stat(opts.Kubeconfig); err != nil {
			return nil, "", fmt.Errorf("kubernetes sandbox: kubeconfig %s: %w", opts.Kubeconfig, err)
		}
		rules.ExplicitPath = opts.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", fmt.Errorf("kubernetes sandbox: %w: set KUBECONFIG or give kubeconfig= the file of the cluster (kubectl's own, ~/.kube/config, is read when it exists), or run aml in a pod with a service account", ErrNoKubeconfig)
		}
		return nil, "", fmt.Errorf("kubernetes sandbox: reading the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}

// CheckOptions reports what New refuses in opts before it reads any
// file: more than one of image, template and warm pool; resources or a
// service account with a template or pool (they are the template's);
// quantities Kubernetes would refuse; names that are not DNS names.
// aml check calls it on a call's literal arguments.
func CheckOptions(opts Options) error {
	given := 0
	for _, v := range []string{opts.Image, opts.Template, opts.WarmPool} {
		if v != "" {
			given++
		}
	}
	if given > 1 {
		return errors.New("kubernetes sandbox: give one of image=, template= and warm_pool=, not several")
	}
	if opts.Image == "" && (opts.Template != "" || opts.WarmPool != "") {
		for _, o := range []struct{ name, v string }{{"resources", opts.CPU + opts.Memory}, {"service_account", opts.ServiceAccount}} {
			if o.v != "" {
				return fmt.Errorf("kubernetes sandbox: %s= applies to image= only: with template= or warm_pool= the SandboxTemplate's pod spec sets it", o.name)
			}
		}
	}
	for _, q := range []struct{ name, v string }{{"cpu", opts.CPU}, {"memory", opts.Memory}} {
		if q.v == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q.v); err != nil {
			return fmt.Errorf("kubernetes sandbox: resources[%q] = %q is not a Kubernetes quantity (such as \"500m\", \"2\", \"512Mi\", \"4Gi\"): %w", q.name, q.v, err)
		}
	}
	for _, n := range []struct{ name, v string }{{"namespace", opts.Namespace}, {"template", opts.Template}, {"warm_pool", opts.WarmPool}, {"service_account", opts.ServiceAccount}} {
		if n.v == "" {
			continue
		}
		check := validation.IsDNS1123Subdomain
		if n.name == "namespace" {
			check = validation.IsDNS1123Label
		}
		if errs := check(n.v); len(errs) > 0 {
			return fmt.Errorf("kubernetes sandbox: %s= %q is not a Kubernetes name: %s", n.name, n.v, strings.Join(errs, "; "))
		}
	}
	if opts.ReadyTimeout < 0 || opts.RequestTimeout < 0 {
		return errors.New("kubernetes sandbox: timeouts must be positive")
	}
	return nil
}

// CheckLabels reports the labels Kubernetes would refuse.
func CheckLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("kubernetes sandbox: label %q is not a Kubernetes label key: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("kubernetes sandbox: the value %q of label %q is not a Kubernetes label value: %s", labels[k], k, strings.Join(errs, "; "))
		}
	}
	return nil
}

// Name implements remote.Service.
func (s *Service) Name() string { return "kubernetes" }

// Namespace is the namespace the sandboxes are made in.
func (s *Service) Namespace() string { return s.ns }

func randomName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "aml-" + hex.EncodeToString(b[:])
}

// own are the provider's labels: they are kept exactly as annotations,
// and in a sanitized form as labels.
var own = []string{remote.LabelRun, remote.LabelLease, remote.LabelOwner}

var notLabelChar = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// labelValue is v as a label value: characters outside the label
// alphabet become "_", at most 63 of them, starting and ending with a
// letter or digit ("x" when nothing is left).
func labelValue(v string) string {
	v = notLabelChar.ReplaceAllString(v, "_")
	if len(v) > 63 {
		v = v[len(v)-63:]
	}
	v = strings.Trim(v, "_.-")
	if v == "" {
		return "x"
	}
	return v
}

// metadata splits a request's labels into the object's labels and
// annotations.
func metadata(labels map[string]string) (map[string]string, map[string]string) {
	l, a := map[string]string{}, map[string]string{}
	for k, v := range labels {
		if slices.Contains(own, k) {
			l[k], a[k] = labelValue(v), v
			continue
		}
		l[k] = v
	}
	return l, a
}

// Create implements remote.Service: the Sandbox or SandboxClaim, Ready,
// its pod (see the package documentation).
func (s *Service) Create(ctx context.Context, req remote.CreateRequest) (_ remote.Machine, err error) {
	name := s.newName()
	labels, annotations := metadata(req.Labels)
	if err := CheckLabels(labels); err != nil {
		return nil, err
	}
	kind := kindSandbox
	var obj *unstructured.Unstructured
	switch {
	case s.opts.WarmPool != "":
		kind = kindClaim
		obj, err = toUnstructured(&extv1.SandboxClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: extv1.GroupVersion.String(), Kind: "SandboxClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: labels, Annotations: annotations},
			Spec:       extv1.SandboxClaimSpec{WarmPoolRef: extv1.SandboxWarmPoolRef{Name: s.opts.WarmPool}},
		})
	case s.opts.Template != "":
		var tpl *extv1.SandboxTemplate
		if tpl, err = s.template(ctx); err != nil {
			return nil, err
		}
		sb := s.sandbox(name, labels, annotations, tpl.Spec.SandboxBlueprint)
		sb.Annotations[sandboxv1.SandboxTemplateRefAnnotation] = tpl.Name
		obj, err = toUnstructured(sb)
	default:
		obj, err = toUnstructured(s.sandbox(name, labels, annotations, s.blueprint(labels)))
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	ref := objectRef{kind: kind, namespace: s.ns, name: name}
	// From here on the object may exist: whatever ends the creation
	// deletes it by its name, even when the create's answer was lost.
	defer func() {
		if err != nil {
			if derr := s.delete(context.WithoutCancel(ctx), ref, ""); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	err = s.call(ctx, "create", ref.resource(), func(ctx context.Context) error {
		_, err := s.dyn.Resource(ref.gvr()).Namespace(s.ns).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	pod, err := s.waitReady(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.newMachine(ref, pod.Name, pod.UID), nil
}

// template reads the SandboxTemplate of Options.Template.
func (s *Service) template(ctx context.Context) (*extv1.SandboxTemplate, error) {
	var tpl extv1.SandboxTemplate
	err := s.call(ctx, "get", "sandboxtemplates.extensions.agents.x-k8s.io", func(ctx context.Context) error {
		u, err := s.dyn.Resource(sandboxTemplates).Namespace(s.ns).Get(ctx, s.opts.Template, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tpl)
	})
	if apierrors.IsNotFound(err) && !isMissingResource(err) {
		return nil, fmt.Errorf("kubernetes sandbox: the SandboxTemplate %q does not exist in namespace %s (kubectl get sandboxtemplates -n %s lists those that do): %w", s.opts.Template, s.ns, s.ns, err)
	}
	return &tpl, err
}

// blueprint is the pod of a sandbox made from Options.Image.
func (s *Service) blueprint(labels map[string]string) sandboxv1.SandboxBlueprint {
	grace := int64(1)
	noToken := s.opts.ServiceAccount == ""
	c := corev1.Container{
		Name:  containerName,
		Image: s.opts.Image,
		// The container's process only keeps the pod alive: commands
		// are execs beside it. It ends at once on SIGTERM.
		Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"},
	}
	if s.opts.CPU != "" || s.opts.Memory != "" {
		rl := corev1.ResourceList{}
		if s.opts.CPU != "" {
			rl[corev1.ResourceCPU] = resource.MustParse(s.opts.CPU)
		}
		if s.opts.Memory != "" {
			rl[corev1.ResourceMemory] = resource.MustParse(s.opts.Memory)
		}
		c.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	noService := false
	return sandboxv1.SandboxBlueprint{
		Service: &noService,
		PodTemplate: sandboxv1.PodTemplate{
			ObjectMeta: sandboxv1.PodMetadata{Labels: maps.Clone(labels)},
			Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{c},
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: &grace,
				ServiceAccountName:            s.opts.ServiceAccount,
				AutomountServiceAccountToken:  &[]bool{!noToken}[0],
				EnableServiceLinks:            &noService,
			},
		},
	}
}

// sandbox is a Sandbox of the blueprint, carrying the labels (the pod
// too) and annotations.
func (s *Service) sandbox(name string, labels, annotations map[string]string, bp sandboxv1.SandboxBlueprint) *sandboxv1.Sandbox {
	bp = *bp.DeepCopy()
	if bp.PodTemplate.ObjectMeta.Labels == nil {
		bp.PodTemplate.ObjectMeta.Labels = map[string]string{}
	}
	maps.Copy(bp.PodTemplate.ObjectMeta.Labels, labels)
	return &sandboxv1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: sandboxv1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: labels, Annotations: maps.Clone(annotations)},
		Spec:       sandboxv1.SandboxSpec{SandboxBlueprint: bp},
	}
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// The kinds of object a sandbox is.
const (
	kindSandbox = "sandbox"
	kindClaim   = "sandboxclaim"
)

// objectRef names a Sandbox or SandboxClaim; its ID form is
// "namespace/kind/name".
type objectRef struct{ kind, namespace, name string }

func (r objectRef) id() string { return r.namespace + "/" + r.kind + "/" + r.name }

func (r objectRef) gvr() schema.GroupVersionResource {
	if r.kind == kindClaim {
		return sandboxClaims
	}
	return sandboxes
}

// resource is the resource's full name, as RBAC and kubectl spell it.
func (r objectRef) resource() string {
	return r.gvr().Resource + "." + r.gvr().Group
}

func parseID(id string) (objectRef, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 || (parts[1] != kindSandbox && parts[1] != kindClaim) || parts[0] == "" || parts[2] == "" {
		return objectRef{}, fmt.Errorf("kubernetes sandbox: %q is not a sandbox id (namespace/sandbox/name or namespace/sandboxclaim/name)", id)
	}
	return objectRef{namespace: parts[0], kind: parts[1], name: parts[2]}, nil
}

// List implements remote.Service: the Sandboxes and SandboxClaims of the
// namespace carrying the labels (the provider's own compared exactly,
// through their annotations). With nil labels, the provider's objects of
// every namespace (aml sandbox prune), or of the namespace when listing
// all is forbidden.
func (s *Service) List(ctx context.Context, labels map[string]string) ([]remote.Found, error) {
	ns := s.ns
	var selector string
	if labels == nil {
		ns, selector = metav1.NamespaceAll, remote.LabelOwner
	} else {
		l, _ := metadata(labels)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(l)) {
			parts = append(parts, k+"="+l[k])
		}
		selector = strings.Join(parts, ",")
	}
	var out []remote.Found
	for _, kind := range []string{kindSandbox, kindClaim} {
		ref := objectRef{kind: kind}
		items, err := s.list(ctx, ref, ns, selector)
		if ns == metav1.NamespaceAll && apierrors.IsForbidden(err) {
			items, err = s.list(ctx, ref, s.ns, selector)
		}
		if errors.Is(err, ErrNotInstalled) {
			// agent-sandbox (or its extensions, for claims) is not
			// installed: there are no such objects.
			continue
		}
		if err != nil {
			return nil, err
		}
	items:
		for _, u := range items {
			found := maps.Clone(u.GetLabels())
			if found == nil {
				found = map[string]string{}
			}
			for _, k := range own {
				if v, ok := u.GetAnnotations()[k]; ok {
					found[k] = v
				}
			}
			for k, v := range labels {
				if found[k] != v {
					continue items
				}
			}
			out = append(out, remote.Found{ID: objectRef{kind: kind, namespace: u.GetNamespace(), name: u.GetName()}.id(), Labels: found})
		}
	}
	return out, nil
}

func (s *Service) list(ctx context.Context, ref objectRef, ns, selector string) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	err := s.call(ctx, "list", ref.resource(), func(ctx context.Context) error {
		opts := metav1.ListOptions{LabelSelector: selector}
		for {
			l, err := s.dyn.Resource(ref.gvr()).Namespace(ns).List(ctx, opts)
			if err != nil {
				return err
			}
			items = append(items, l.Items...)
			if opts.Continue = l.GetContinue(); opts.Continue == "" {
				return nil
			}
		}
	})
	return items, err
}

// Destroy implements remote.Service: the object is deleted (its pod with
// it); one that no longer exists is not an error.
func (s *Service) Destroy(ctx context.Context, id string) error {
	ref, err := parseID(id)
	if err != nil {
		return err
	}
	return s.delete(ctx, ref, "")
}

// delete deletes the object, and its pod at once when it is known (the
// garbage collector would, a moment later, with a grace period).
func (s *Service) delete(ctx context.Context, ref objectRef, pod string) error {
	background := metav1.DeletePropagationBackground
	err := s.call(ctx, "delete", ref.resource(), func(ctx context.Context) error {
		err := s.dyn.Resource(ref.gvr()).Namespace(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{PropagationPolicy: &background})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if pod == "" {
		return nil
	}
	now := int64(0)
	return s.call(ctx, "delete", "pods", func(ctx context.Context) error {
		err := s.core.CoreV1().Pods(ref.namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &now})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
