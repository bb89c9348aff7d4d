package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/kubetest"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

func benchRequest(dir string) *eval.SandboxAcquireRequest {
	return &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "bench",
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}}
}

// BenchmarkClusterAcquireRelease: a read-write lease of a 1,000-file,
// 20 MB workspace acquired and released through the provider
// ("provider"), beside the Kubernetes calls of that lifecycle made with
// client-go alone ("calls": create the Sandbox, watch it to Ready, exec
// the archive in, extract it, archive the tree, exec it out, delete).
func BenchmarkClusterAcquireRelease(b *testing.B) {
	c := kubetest.Open(b)
	ns := c.Namespace(b)
	dir := remotetest.Tree(b, 1000, 20<<10)
	s, err := kubernetes.New(kubernetes.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Image: kubetest.Image})
	if err != nil {
		b.Fatal(err)
	}
	p, err := remote.New(remote.Options{Service: s, GuestRoot: kubernetes.GuestRoot})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("provider", func(b *testing.B) {
		for b.Loop() {
			l, err := p.Acquire(ctx, benchRequest(dir))
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	archive := filepath.Join(b.TempDir(), "w.tar")
	if out, err := exec.Command("tar", "-cf", archive, "-C", dir, ".").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v %s", err, out)
	}
	b.Run("calls", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			rawLifecycle(b, c, ns, archive)
		}
	})
}

// rawLifecycle is one lease's Kubernetes calls with client-go alone.
func rawLifecycle(b *testing.B, c *kubetest.Cluster, ns, archive string) {
	ctx := context.Background()
	name := fmt.Sprintf("raw-%d", rawCount.Add(1))
	sb := rawSandbox(ns, name)
	if _, err := c.Dynamic.Resource(kubetest.Sandboxes).Namespace(ns).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	w, err := c.Core.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning {
			break
		}
	}
	w.Stop()
	execIn := func(stdin io.Reader, stdout io.Writer, argv ...string) {
		req := c.Core.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "sandbox", Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ex, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String())
		if err != nil {
			b.Fatal(err)
		}
		var stderr bytes.Buffer
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: &stderr}); err != nil {
			b.Fatalf("%q: %v %s", argv, err, stderr.String())
		}
	}
	f, err := os.Open(archive)
	if err != nil {
		b.Fatal(err)
	}
	execIn(f, io.Discard, "sh", "-c", `cat > /tmp/in.tar; s=$?; exit $s`)
	f.Close()
	execIn(nil, io.Discard, "sh", "-c", `mkdir -p /workspace && tar -xf /tmp/in.tar -C /workspace && rm -f /tmp/in.tar`)
	execIn(nil, io.Discard, "sh", "-c", `tar -cf /tmp/out.tar -C /workspace .`)
	var n countWriter
	execIn(nil, &n, "cat", "/tmp/out.tar")
	if n < 20<<20 {
		b.Fatalf("downloaded %d bytes", n)
	}
	bg := metav1.DeletePropagationBackground
	if err := c.Dynamic.Resource(kubetest.Sandboxes).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		b.Fatal(err)
	}
	zero := int64(0)
	_ = c.Core.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

var rawCount atomic.Int64

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }

// BenchmarkClusterExec: the round trip of one short command in a lease
// ("provider"), beside kubectl exec of the same command in the same pod
// ("kubectl").
func BenchmarkClusterExec(b *testing.B) {
	c := kubetest.Open(b)
	ns := c.Namespace(b)
	s, err := kubernetes.New(kubernetes.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Image: kubetest.Image})
	if err != nil {
		b.Fatal(err)
	}
	p, err := remote.New(remote.Options{Service: s, GuestRoot: kubernetes.GuestRoot})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	l, err := p.Acquire(ctx, benchRequest(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx)
	b.Run("provider", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Runtime().Exec(ctx, "true", nil, eval.ExecOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	pods, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		b.Fatalf("pods: %v", err)
	}
	kubectl, err := exec.LookPath("kubectl")
	if dir := os.Getenv("AML_TEST_KUBE_BIN"); dir != "" {
		kubectl, err = filepath.Join(dir, "kubectl"), nil
	}
	if err != nil {
		b.Skip("no kubectl on PATH to compare with")
	}
	b.Run("kubectl", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "exec", "-n", ns, pods.Items[0].Name, "--", "true").CombinedOutput(); err != nil {
				b.Fatalf("kubectl exec: %v %s", err, out)
			}
		}
	})
}

// BenchmarkClusterParallel: twenty sandboxes made Ready at once and
// deleted, through the Service ("service") and with client-go alone
// ("calls": create twenty Sandboxes, watch their pods to Running, delete
// them), so that the cost of parallel() in the provider can be told from
// the cluster's own.
func BenchmarkClusterParallel(b *testing.B) {
	c := kubetest.Open(b)
	ns := c.Namespace(b)
	s, err := kubernetes.New(kubernetes.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Image: kubetest.Image})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	settle := func(b *testing.B) {
		b.StopTimer()
		if left := c.Left(b, ns, nil); len(left) > 0 {
			b.Fatalf("left: %v", left)
		}
		b.StartTimer()
	}
	b.Run("service", func(b *testing.B) {
		for b.Loop() {
			errs := make(chan error, 20)
			for range 20 {
				go func() {
					m, err := s.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelOwner: "aml-1-2-3"}})
					if err == nil {
						err = m.Destroy(ctx)
					}
					errs <- err
				}()
			}
			for range 20 {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			settle(b)
		}
	})
	b.Run("calls", func(b *testing.B) {
		for b.Loop() {
			w, err := c.Core.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			names := make([]string, 20)
			for i := range names {
				names[i] = fmt.Sprintf("par-%d", rawCount.Add(1))
				go func(name string) {
					if _, err := c.Dynamic.Resource(kubetest.Sandboxes).Namespace(ns).Create(ctx, rawSandbox(ns, name), metav1.CreateOptions{}); err != nil {
						b.Error(err)
					}
				}(names[i])
			}
			running := map[string]bool{}
			for ev := range w.ResultChan() {
				// Only this round's pods (the watch begins with the
				// terminating ones of the round before).
				if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning && slices.Contains(names, pod.Name) {
					running[pod.Name] = true
				}
				if len(running) == 20 {
					break
				}
			}
			w.Stop()
			bg := metav1.DeletePropagationBackground
			zero := int64(0)
			for _, name := range names {
				if err := c.Dynamic.Resource(kubetest.Sandboxes).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
					b.Fatal(err)
				}
				_ = c.Core.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
			settle(b)
		}
	})
}

// rawSandbox is a Sandbox of the busybox image, as the provider makes
// one for image=.
func rawSandbox(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"terminationGracePeriodSeconds": int64(1), "automountServiceAccountToken": false, "restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "sandbox", "image": kubetest.Image,
				"command": []any{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}}},
		}}},
	}}
}
