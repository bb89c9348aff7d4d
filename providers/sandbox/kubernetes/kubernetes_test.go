package kubernetes

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

func TestCheckOptions(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{}, ""},
		{Options{Image: "busybox", CPU: "500m", Memory: "1Gi", ServiceAccount: "agents", Namespace: "team-a"}, ""},
		{Options{Image: "a", Template: "b"}, "give one of image=, template= and warm_pool="},
		{Options{Template: "t", WarmPool: "p"}, "give one of"},
		{Options{Template: "t", CPU: "1"}, "resources= applies to image= only"},
		{Options{WarmPool: "p", ServiceAccount: "x"}, "service_account= applies to image= only"},
		{Options{CPU: "lots"}, `resources["cpu"] = "lots" is not a Kubernetes quantity`},
		{Options{Memory: "1GB!"}, `resources["memory"]`},
		{Options{Namespace: "Team_A"}, `namespace= "Team_A" is not a Kubernetes name`},
		{Options{Template: "a/b"}, `template= "a/b" is not a Kubernetes name`},
		{Options{ReadyTimeout: -time.Second}, "timeouts must be positive"},
	} {
		err := CheckOptions(c.opts)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckOptions(%+v) = %v, want %q", c.opts, err, c.want)
		}
	}
	if err := CheckLabels(map[string]string{"team": "a", "example.com/tier": "x-1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []map[string]string{{"a b": "x"}, {"team": "has space"}, {"team": strings.Repeat("x", 64)}} {
		if err := CheckLabels(bad); err == nil || !strings.Contains(err.Error(), "not a Kubernetes label") {
			t.Errorf("CheckLabels(%v) = %v", bad, err)
		}
	}
}

// TestMetadata: the provider's labels are kept exactly as annotations and
// in a form labels allow; the user's pass as they are.
func TestMetadata(t *testing.T) {
	owner := "aml-4242-0123abcd-1700000000"
	lease := "kubernetes:6f1c2d3e-aaaa-bbbb-cccc-0123456789ab"
	l, a := metadata(map[string]string{remote.LabelOwner: owner, remote.LabelLease: lease, remote.LabelRun: "", "team": "x"})
	if a[remote.LabelOwner] != owner || a[remote.LabelLease] != lease || l["team"] != "x" || a["team"] != "" {
		t.Errorf("annotations %v, labels %v", a, l)
	}
	if l[remote.LabelLease] != "kubernetes_6f1c2d3e-aaaa-bbbb-cccc-0123456789ab" || l[remote.LabelRun] != "x" {
		t.Errorf("labels %v", l)
	}
	for k, v := range l {
		if errs := CheckLabels(map[string]string{k: v}); errs != nil {
			t.Errorf("label %s=%s: %v", k, v, errs)
		}
	}
	if got := labelValue(strings.Repeat("é", 80) + "-tail"); len(got) > 63 || !strings.HasSuffix(got, "tail") {
		t.Errorf("labelValue of a long value: %q", got)
	}
}

// TestNoKubeconfig: with no KUBECONFIG, no ~/.kube/config and not in a
// pod, New says how to name a cluster.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := New(Options{})
	if !errors.Is(err, ErrNoKubeconfig) || !strings.Contains(err.Error(), "set KUBECONFIG or give kubeconfig=") {
		t.Errorf("New without a cluster: %v", err)
	}
	_, err = New(Options{Kubeconfig: filepath.Join(t.TempDir(), "missing")})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("New with a missing kubeconfig: %v", err)
	}
}

// TestServerDoesNotAnswer: an API server that accepts the connection and
// never answers fails the call at RequestTimeout, saying so.
func TestServerDoesNotAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+l.Addr().String()+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Kubeconfig: kc, Image: "busybox", RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Create(context.Background(), remote.CreateRequest{Labels: map[string]string{remote.LabelOwner: "o"}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Errorf("a server that never answers: %v", err)
	}
}

// fakes returns a Service over client-go's fakes.
func fakes(t *testing.T, opts Options) (*Service, *dynamicfake.FakeDynamicClient, *fake.Clientset) {
	t.Helper()
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		sandboxes: "SandboxList", sandboxClaims: "SandboxClaimList", sandboxTemplates: "SandboxTemplateList",
	})
	core := fake.NewClientset()
	if opts.Namespace == "" {
		opts.Namespace = "team"
	}
	return newService(opts, core, dyn), dyn, core
}

// TestErrorsSayWhatToDo: RBAC's refusal names the verb and resource to
// grant, a cluster without agent-sandbox names the command that installs
// it.
func TestErrorsSayWhatToDo(t *testing.T) {
	s, dyn, _ := fakes(t, Options{Image: "busybox"})
	dyn.PrependReactor("create", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}, "", errors.New(`User "bob" cannot create resource`))
	})
	_, err := s.Create(context.Background(), remote.CreateRequest{})
	if err == nil || !strings.Contains(err.Error(), `RBAC forbids create on sandboxes.agents.x-k8s.io in namespace team: grant the verb "create" on "sandboxes.agents.x-k8s.io"`) ||
		!strings.Contains(err.Error(), "docs/sandboxes.md") {
		t.Errorf("forbidden: %v", err)
	}

	s, dyn, _ = fakes(t, Options{WarmPool: "pool"})
	dyn.PrependReactor("create", "sandboxclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}
	})
	_, err = s.Create(context.Background(), remote.CreateRequest{})
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "sandbox-with-extensions.yaml") {
		t.Errorf("not installed: %v", err)
	}
}

// TestFailedCreationLeavesNothing: a creation whose wait fails after the
// object was made deletes it.
func TestFailedCreationLeavesNothing(t *testing.T) {
	s, dyn, _ := fakes(t, Options{Image: "busybox"})
	dyn.PrependReactor("get", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}, "x", errors.New("no"))
	})
	_, err := s.Create(context.Background(), remote.CreateRequest{Labels: map[string]string{remote.LabelOwner: "aml-1-2-3"}})
	if err == nil || !strings.Contains(err.Error(), `grant the verb "get"`) {
		t.Fatalf("Create: %v", err)
	}
	var created, deleted string
	for _, a := range dyn.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			created = a.GetObject().(metav1.Object).GetName()
		case k8stesting.DeleteAction:
			deleted = a.GetName()
		}
	}
	if created == "" || deleted != created {
		t.Errorf("created %q, deleted %q", created, deleted)
	}
	l, err := s.List(context.Background(), nil)
	if err != nil || len(l) != 0 {
		t.Errorf("left: %v %v", l, err)
	}
}

// TestListWithoutExtensions: a cluster with agent-sandbox but not its
// extensions (no claims served) lists its Sandboxes; other failures of
// the claims' list are errors.
func TestListWithoutExtensions(t *testing.T) {
	s, dyn, _ := fakes(t, Options{Image: "busybox"})
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "left", "namespace": "team", "labels": map[string]any{remote.LabelOwner: "aml-1-2-3"},
			"annotations": map[string]any{remote.LabelOwner: "aml-1-2-3"}}}}
	if _, err := dyn.Resource(sandboxes).Namespace("team").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notServed := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}
	fail := error(notServed)
	dyn.PrependReactor("list", "sandboxclaims", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, fail })
	l, err := s.List(context.Background(), nil)
	if err != nil || len(l) != 1 || l[0].ID != "team/sandbox/left" {
		t.Errorf("without the extensions: %+v %v", l, err)
	}
	fail = apierrors.NewInternalError(errors.New("etcd is down"))
	if l, err := s.List(context.Background(), nil); err == nil {
		t.Errorf("a failed list of claims: %+v, no error", l)
	}
}

// TestPodFailure: a pod whose image cannot be pulled, or whose container
// exited, fails the wait at once; an unscheduled one is waited for.
func TestPodFailure(t *testing.T) {
	pull := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "sandbox", Image: "nope:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}}
	if err := podFailure(pull); !errors.Is(err, ErrImage) || !strings.Contains(err.Error(), `the image "nope:1" of pod p cannot be pulled (ErrImagePull): not found`) {
		t.Errorf("pull: %v", err)
	}
	exited := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}}
	if err := podFailure(exited); !errors.Is(err, ErrImage) || !strings.Contains(err.Error(), "must keep running") {
		t.Errorf("exited: %v", err)
	}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes have enough memory"}}}}
	if err := podFailure(pending); err != nil {
		t.Errorf("unscheduled: %v", err)
	}
	if why := podWaiting(pending); !strings.Contains(why, "not scheduled (Unschedulable): 0/1 nodes have enough memory") {
		t.Errorf("waiting: %q", why)
	}
}

// TestParseID: ids name the namespace, the kind and the object.
func TestParseID(t *testing.T) {
	for _, id := range []string{"team/sandbox/aml-1", "team/sandboxclaim/aml-2"} {
		if r, err := parseID(id); err != nil || r.id() != id {
			t.Errorf("parseID(%q) = %+v %v", id, r, err)
		}
	}
	for _, id := range []string{"", "a/b", "team/pod/x", "/sandbox/x"} {
		if _, err := parseID(id); err == nil {
			t.Errorf("parseID(%q) accepted", id)
		}
	}
}
