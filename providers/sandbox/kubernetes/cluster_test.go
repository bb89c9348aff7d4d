package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/fakemodel"
	"github.com/aml-go/aml/internal/kubetest"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/internal/testbin"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/remotestar"
)

// service is a Service over the test cluster in namespace ns.
func service(t *testing.T, c *kubetest.Cluster, opts kubernetes.Options) *kubernetes.Service {
	t.Helper()
	opts.Kubeconfig = c.Kubeconfig
	if opts.Image == "" && opts.Template == "" && opts.WarmPool == "" {
		opts.Image = kubetest.Image
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 5 * time.Minute
	}
	s, err := kubernetes.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClusterCore: the remote core's cases (conformance, the mirror,
// read-only refusal, hostile argv, bounds, timeouts, cancellation at 0,
// 50 ms, 300 ms, 1 s and 2 s into an acquisition, prune, a sandbox
// deleted mid-command) on the real cluster, with pods of the provider's
// own pod template.
func TestClusterCore(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	s := service(t, c, kubernetes.Options{Namespace: ns})
	remotetest.Run(t, remotetest.Harness{Service: s, GuestRoot: kubernetes.GuestRoot, Home: "/", Timeout: 2 * time.Minute,
		Left: func(t testing.TB) []string { return c.Left(t, ns, nil) }})
}

// TestClusterPodDeleted: the pod (not the Sandbox) deleted, or evicted
// through the Eviction API, while a command runs: the command fails
// saying so, and although the controller makes a new pod of the same
// name, the release refuses to mirror that one's tree (which would delete
// the source's files) and says the changes are lost; the source is as it
// was.
func TestClusterPodDeleted(t *testing.T) {
	c := kubetest.Open(t)
	for _, how := range []string{"deleted", "evicted"} {
		t.Run(how, func(t *testing.T) {
			ns := c.Namespace(t)
			p, err := remote.New(remote.Options{Service: service(t, c, kubernetes.Options{Namespace: ns}), GuestRoot: kubernetes.GuestRoot})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			remotetest.Write(t, dir, map[string]string{"a.txt": "a", "b.txt": "b"})
			ctx := context.Background()
			lease, err := p.Acquire(ctx, remotetest.Request(dir, eval.ReadWrite))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", "printf changed > a.txt"}, eval.ExecOptions{}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := lease.Runtime().Exec(ctx, "sleep", []string{"60"}, eval.ExecOptions{})
				done <- err
			}()
			pods, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("pods: %v %v", pods, err)
			}
			pod := pods.Items[0].Name
			time.Sleep(500 * time.Millisecond) // the sleep is running
			zero := int64(0)
			if how == "deleted" {
				err = c.Core.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			} else {
				err = c.Core.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
					DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &zero}})
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, kubernetes.ErrPodGone) {
					t.Errorf("the command in a pod %s: %v, want ErrPodGone", how, err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("the command in a pod %s never ended", how)
			}
			err = lease.Release(ctx)
			if err == nil || !strings.Contains(err.Error(), "its changes since it was hydrated are not in the workspace") {
				t.Errorf("release after the pod was %s: %v", how, err)
			}
			if got := strings.Join(remotetest.Listing(t, dir), " "); got != "a.txt=a b.txt=b" {
				t.Errorf("the source after its pod was %s: %s", how, got)
			}
			if left := c.Left(t, ns, nil); len(left) > 0 {
				t.Errorf("left: %v", left)
			}
		})
	}
}

// TestClusterParallel: twenty sandboxes in parallel(), through
// kubernetes_sandbox() as a workflow writes it, each over its own
// subtree, changed by a script and mirrored back; none is left.
func TestClusterParallel(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	base := t.TempDir()
	src := fmt.Sprintf(`configure(workspace_provider = local_workspace(directory = %q))
box = kubernetes_sandbox(kubeconfig = %q, namespace = %q, image = %q, labels = {"team": "tests"})

def one(i):
    return sandbox(
        script("cat seed.txt; printf %%s > out.txt" %% i, shell = "sh"),
        provider = box,
        access = "read-write",
        root = "w%%d" %% i,
    )

def main():
    return workspace(parallel(*[one(i) for i in range(20)]))
`, base, c.Kubeconfig, ns, kubetest.Image)
	for i := range 20 {
		remotetest.Write(t, filepath.Join(base, "w"+strconv.Itoa(i)), map[string]string{"seed.txt": "seed" + strconv.Itoa(i) + " "})
	}
	start := time.Now()
	out, err := starlib.Run(context.Background(), filepath.Join(base, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: []*starlib.Extension{remotestar.Extension}}, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if !strings.Contains(out, "seed"+strconv.Itoa(i)+" ") {
			t.Errorf("branch %d's script did not see its seed: %q", i, out)
		}
		if data, err := os.ReadFile(filepath.Join(base, "w"+strconv.Itoa(i), "out.txt")); err != nil || string(data) != strconv.Itoa(i) {
			t.Errorf("branch %d: out.txt = %q, %v", i, data, err)
		}
	}
	t.Logf("20 sandboxes in parallel in %v", time.Since(start).Round(time.Millisecond))
	if left := c.Left(t, ns, nil); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// template makes a SandboxTemplate of the busybox image in ns, with the
// host directory bin mounted at /opt/aml when it is not "".
func template(t *testing.T, c *kubetest.Cluster, ns, name, bin string) {
	t.Helper()
	container := map[string]any{
		"name": "main", "image": kubetest.Image, "imagePullPolicy": "IfNotPresent",
		"command": []any{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
		"env":     []any{map[string]any{"name": "PATH", "value": "/opt/aml:/usr/local/bin:/usr/bin:/bin"}},
	}
	spec := map[string]any{"terminationGracePeriodSeconds": int64(1), "automountServiceAccountToken": false, "containers": []any{container}}
	if bin != "" {
		container["volumeMounts"] = []any{map[string]any{"name": "aml", "mountPath": "/opt/aml", "readOnly": true}}
		spec["volumes"] = []any{map[string]any{"name": "aml", "hostPath": map[string]any{"path": bin, "type": "Directory"}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"podTemplate": map[string]any{"spec": spec}},
	}}
	if _, err := c.Dynamic.Resource(kubetest.SandboxTemplates).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestClusterWarmPool: a claim from a warm pool of two is Ready at once
// (the time is logged), runs commands in the pool's pod, and its release
// deletes the claim and its sandbox; the pool refills.
func TestClusterWarmPool(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	template(t, c, ns, "busybox", "")
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "warm", "namespace": ns},
		"spec":     map[string]any{"replicas": int64(2), "sandboxTemplateRef": map[string]any{"name": "busybox"}},
	}}
	if _, err := c.Dynamic.Resource(kubetest.SandboxWarmPools).Namespace(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPool := func() {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			u, err := c.Dynamic.Resource(kubetest.SandboxWarmPools).Namespace(ns).Get(ctx, "warm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			if ready == 2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the warm pool has %d ready sandboxes after 2 minutes", ready)
			}
		}
	}
	waitPool()
	s := service(t, c, kubernetes.Options{Namespace: ns, WarmPool: "warm"})
	start := time.Now()
	m, err := s.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelRun: "r", remote.LabelLease: "l", remote.LabelOwner: "aml-1-x-y"}})
	if err != nil {
		t.Fatal(err)
	}
	ready := time.Since(start)
	t.Logf("a claim from the warm pool was Ready in %v", ready.Round(time.Millisecond))
	if !strings.HasPrefix(m.ID(), ns+"/sandboxclaim/aml-") {
		t.Errorf("the claim's id %q", m.ID())
	}
	p, err := m.Start(ctx, remote.Command{Args: []string{"sh", "-c", "echo $HOSTNAME"}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 256)
	n, _ := p.Stdout().Read(out)
	go func() { buf := make([]byte, 256); _, _ = p.Stderr().Read(buf) }()
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("a command in the claimed pod: %d %v", code, err)
	}
	host := strings.TrimSpace(string(out[:n]))
	if !strings.HasPrefix(host, "warm-") {
		t.Errorf("the command ran in pod %q, not one of the pool's", host)
	}
	if err := m.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, err := c.Core.CoreV1().Pods(ns).Get(ctx, host, metav1.GetOptions{})
		claims, _ := c.Dynamic.Resource(kubetest.SandboxClaims).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil && len(claims.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claimed pod %s or the claim is still there a minute after the release", host)
		}
	}
	waitPool()
}

// TestClusterErrors: what the cluster refuses is said with what to do:
// an image that cannot be pulled fails at once, RBAC's refusal names
// the verb and resource (and the minimal Role of the docs grants enough),
// a template that does not exist is named; none leaves anything.
func TestClusterErrors(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	labels := map[string]string{remote.LabelRun: "r", remote.LabelLease: "l", remote.LabelOwner: "aml-1-x-y"}

	t.Run("image", func(t *testing.T) {
		s := service(t, c, kubernetes.Options{Namespace: ns, Image: "localhost:1/aml-test/missing:1"})
		start := time.Now()
		_, err := s.Create(ctx, remote.CreateRequest{Labels: labels})
		if !errors.Is(err, kubernetes.ErrImage) || !strings.Contains(err.Error(), "cannot be pulled") {
			t.Errorf("a missing image: %v", err)
		}
		t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	})
	t.Run("template", func(t *testing.T) {
		s := service(t, c, kubernetes.Options{Namespace: ns, Template: "missing"})
		_, err := s.Create(ctx, remote.CreateRequest{Labels: labels})
		if err == nil || !strings.Contains(err.Error(), `the SandboxTemplate "missing" does not exist in namespace `+ns) {
			t.Errorf("a missing template: %v", err)
		}
	})
	t.Run("rbac", func(t *testing.T) {
		kubeconfig := serviceAccount(t, c, ns, "limited")
		s, err := kubernetes.New(kubernetes.Options{Kubeconfig: kubeconfig, Namespace: ns, Image: kubetest.Image, ReadyTimeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Create(ctx, remote.CreateRequest{Labels: labels})
		if err == nil || !strings.Contains(err.Error(), `grant the verb "create" on "sandboxes.agents.x-k8s.io"`) {
			t.Fatalf("without a Role: %v", err)
		}
		grantMinimalRole(t, c, ns, "limited")
		p, err := remote.New(remote.Options{Service: s, GuestRoot: kubernetes.GuestRoot})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		remotetest.Write(t, dir, map[string]string{"a.txt": "a"})
		lease, err := p.Acquire(ctx, remotetest.Request(dir, eval.ReadWrite))
		if err != nil {
			t.Fatalf("with the docs' minimal Role: %v", err)
		}
		if res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", "cat a.txt; printf b > b.txt"}, eval.ExecOptions{}); err != nil || string(res.Stdout) != "a" {
			t.Errorf("a command with the minimal Role: %+v %v", res, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Errorf("release with the minimal Role: %v", err)
		}
		if got := strings.Join(remotetest.Listing(t, dir), " "); got != "a.txt=a b.txt=b" {
			t.Errorf("mirrored with the minimal Role: %s", got)
		}
	})
	t.Run("not installed", func(t *testing.T) {
		// The real API server's answer for resources it does not serve,
		// as in a cluster without agent-sandbox or its extensions.
		kubernetes.Unserve(t, "v0alpha0")
		for _, k := range []struct {
			opts    kubernetes.Options
			install string
		}{
			{kubernetes.Options{Namespace: ns, Image: kubetest.Image}, "/sandbox.yaml"},
			{kubernetes.Options{Namespace: ns, WarmPool: "pool"}, "/sandbox-with-extensions.yaml"},
			{kubernetes.Options{Namespace: ns, Template: "blueprint"}, "/sandbox-with-extensions.yaml"},
		} {
			s := service(t, c, k.opts)
			_, err := s.Create(ctx, remote.CreateRequest{Labels: labels})
			if !errors.Is(err, kubernetes.ErrNotInstalled) || !strings.Contains(err.Error(), "install it with kubectl apply --server-side -f https://") ||
				!strings.Contains(err.Error(), k.install) {
				t.Errorf("%+v: %v", k.opts, err)
			}
		}
		// Prune finds nothing to delete where there can be nothing.
		if found, err := service(t, c, kubernetes.Options{Namespace: ns, Image: kubetest.Image}).List(ctx, nil); err != nil || len(found) > 0 {
			t.Errorf("prune's list without agent-sandbox: %v %v", found, err)
		}
	})
	if left := c.Left(t, ns, nil); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// serviceAccount makes a service account in ns and a kubeconfig with a
// token of it.
func serviceAccount(t *testing.T, c *kubetest.Cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Core.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Core.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tokenRequest(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeconfig(t, path, c.Config.Host, ca, tok.Status.Token, ns)
	return path
}

// TestClusterAgent: a real ACP agent process (the fake agent, a static
// build the SandboxTemplate mounts from the host) runs in a pod, calls a
// Starlark tool that runs on the host (its relay reaches the tool bridge
// through the tunnel over an exec's streams: the pod has no route to the
// host) and submits a structured result; the workspace it changed is
// mirrored back, and nothing is left.
func TestClusterAgent(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	template(t, c, ns, "agents", agentBin(t))
	dir := t.TempDir()
	src := fmt.Sprintf(`configure(workspace_provider = local_workspace(directory = %q))
lookup = define_tool(name = "lookup", description = "Looks a word up.", execute = lambda input: "found " + input["q"],
    input = schema.object(q = schema.string()))
fake = acp_agent(command = "fake-acp-agent", env = {"AML_FAKE_ACP_MODE": "no-http"})
box = kubernetes_sandbox(kubeconfig = %q, namespace = %q, template = "agents")

def main():
    return workspace(sandbox(
        agent("cwd\nmcp\ncall lookup {\"q\": \"ocelot\"}", tool(lookup), provider = fake),
        script("printf made > made.txt", shell = "sh"),
        "|",
        agent(
            "submit {\"answer\": 42}",
            tool(lookup),
            provider = fake,
            schema = schema.object(answer = schema.integer()),
        ),
        provider = box,
        access = "read-write",
    ))
`, dir, c.Kubeconfig, ns)
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src),
		Extensions: []*starlib.Extension{remotestar.Extension, acpstar.New(acpstar.Options{})}}, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prose, structured, _ := strings.Cut(out, "|")
	if !strings.Contains(prose, `"command":"aml"`) || !strings.Contains(prose, "unix:///tmp/aml-run-") {
		t.Errorf("the bridge is not reached through the relay over the tunnel: %q", prose)
	}
	if !strings.Contains(prose, "/workspace") || !strings.Contains(prose, "result: found ocelot") {
		t.Errorf("the agent in the pod: %q, want its cwd in /workspace and the host tool's result", prose)
	}
	if structured != `{"answer":42}` {
		t.Errorf("structured result %q, want the submitted one", structured)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(data) != "made" {
		t.Errorf("the script's file was not mirrored back: %q %v", data, err)
	}
	if left := c.Left(t, ns, nil); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// agentBin is a directory of the fake agent, static, as fake-acp-agent
// and as aml (whose relays it serves too), for a template to mount.
func agentBin(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	testbin.BuildTo(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", testbin.Options{Static: true}, filepath.Join(bin, "fake-acp-agent"))
	data, err := os.ReadFile(filepath.Join(bin, "fake-acp-agent"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "aml"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestClusterMeteredAgent: an agent of a metering profile in a pod, which
// has no route to the host, reaches its model through aml model-relay in
// the pod, the tunnel and the run's model gateway on the host: the calls
// reach the model, and the spend counted is exactly what its answers
// said.
func TestClusterMeteredAgent(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	template(t, c, ns, "agents", agentBin(t))
	model := fakemodel.Start(nil)
	defer model.Close()
	ext := remotetest.MeteredAgent(t, model.URL)
	dir := t.TempDir()
	src := fmt.Sprintf(`configure(workspace_provider = local_workspace(directory = %q))
box = kubernetes_sandbox(kubeconfig = %q, namespace = %q, template = "agents")

def main():
    return workspace(sandbox(agent("model 3", provider = metered_fake()), provider = box, access = "read-write"))
`, dir, c.Kubeconfig, ns)
	var spent eval.Usage
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src),
		Extensions: []*starlib.Extension{remotestar.Extension, ext}}, eval.Options{OnFinish: func(ev eval.FinishEvent) { spent = ev.Usage }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "FAKE-REPLY: ") {
		t.Errorf("the agent said %q, want the model's answer", out)
	}
	reqs := int64(len(model.Requests()))
	if reqs != 3 || spent.ModelCalls != 3 || spent.InputTokens != 10*reqs || spent.OutputTokens != 5*reqs {
		t.Errorf("%d model requests, %+v counted; want 3 calls of 10 input and 5 output tokens", reqs, spent)
	}
	if left := c.Left(t, ns, nil); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}
