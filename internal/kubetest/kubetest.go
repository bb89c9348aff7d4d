// Package kubetest gives tests the real Kubernetes cluster that
// scripts/kube-cluster.sh runs (named by AML_TEST_KUBECONFIG): a client,
// a namespace of their own, and what they left in it. Tests skip, saying
// how to start the cluster, when none is named; a cluster that is named
// and does not answer fails them.
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Image is the test cluster's image with a shell (busybox), which
// scripts/kube-cluster.sh imports into the cluster's containerd.
const Image = "localhost/aml-test/busybox:1"

// Var names the kubeconfig of the test cluster.
const Var = "AML_TEST_KUBECONFIG"

// Cluster is the test cluster's clients. It is safe for concurrent use.
type Cluster struct {
	// Kubeconfig is the file's path.
	Kubeconfig string
	// Config is the kubeconfig's REST configuration.
	Config *rest.Config
	// Core and Dynamic are clients of the built-in resources and of any
	// resource (agent-sandbox's).
	Core    k8s.Interface
	Dynamic dynamic.Interface
}

// Open returns the test cluster, or skips t when none is named.
func Open(t testing.TB) *Cluster {
	t.Helper()
	path := os.Getenv(Var)
	if path == "" {
		t.Skipf("no test Kubernetes cluster: %s is not set (build the cluster once with scripts/kube-cluster.sh build, about 30 minutes, then scripts/kube-cluster.sh up prints the exports)", Var)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("%s=%s: %v", Var, path, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	core, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := core.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("the test cluster of %s=%s does not answer (scripts/kube-cluster.sh up starts it): %v", Var, path, err)
	}
	return &Cluster{Kubeconfig: path, Config: cfg, Core: core, Dynamic: dyn}
}

// Namespace makes a namespace for t, deleted when t ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "aml-test-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := c.Core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The service account the pods run as is made by the controller
	// manager, a moment after the namespace.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := c.Core.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default service account after 30 s: %v", name, err)
		}
	}
	t.Cleanup(func() {
		_ = c.Core.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// The agent-sandbox resources.
var (
	Sandboxes        = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	SandboxClaims    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	SandboxTemplates = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	SandboxWarmPools = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
)

// Left lists the Sandboxes, SandboxClaims and pods of the namespace
// that tests left, as the provider's ids ("NS/sandbox/NAME",
// "NS/sandboxclaim/NAME"; a pod only when no object of the namespace
// owns it: "NS/pod/NAME"). While some are being deleted, or a pod's
// owner is gone and the garbage collector has yet to remove it, it waits,
// up to three minutes. Objects whose labels include keep are not listed (a
// warm pool's).
func (c *Cluster) Left(t testing.TB, ns string, keep map[string]string) []string {
	t.Helper()
	ctx := context.Background()
	// Three minutes: a loaded machine deletes twenty pods slowly.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var left []string
		settling := false
		owners := map[string]bool{}
		for _, r := range []struct {
			kind string
			gvr  schema.GroupVersionResource
		}{{"sandbox", Sandboxes}, {"sandboxclaim", SandboxClaims}} {
			l, err := c.Dynamic.Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if l == nil {
				continue
			}
			for _, u := range l.Items {
				owners[string(u.GetUID())] = true
				if kept(u.GetLabels(), keep) {
					continue
				}
				settling = settling || u.GetDeletionTimestamp() != nil
				left = append(left, ns+"/"+r.kind+"/"+u.GetName())
			}
		}
		pods, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if kept(p.Labels, keep) {
				continue
			}
			owned := false
			for _, o := range p.OwnerReferences {
				owned = owned || owners[string(o.UID)]
			}
			if p.DeletionTimestamp != nil || !owned {
				settling = settling || p.DeletionTimestamp != nil || len(p.OwnerReferences) > 0
				if !owned {
					left = append(left, ns+"/pod/"+p.Name)
				}
			}
		}
		if !settling || time.Now().After(deadline) {
			sort.Strings(left)
			return left
		}
	}
}

func kept(labels, keep map[string]string) bool {
	if len(keep) == 0 {
		return false
	}
	for k, v := range keep {
		if labels[k] != v {
			return false
		}
	}
	return true
}
