package remotestar_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/remote"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/remotestar"
)

// TestKubernetesArguments: kubernetes_sandbox()'s arguments reach the
// service's options, and what Kubernetes would refuse is refused at the
// call, naming the rule.
func TestKubernetesArguments(t *testing.T) {
	var got kubernetes.Options
	ext := remotestar.New(remotestar.Options{Kubernetes: func(o kubernetes.Options) (remote.Service, error) {
		got = o
		return stubService{}, nil
	}})
	run := func(call string) error {
		_, err := starlib.Run(context.Background(), "/work/w.star", "", starlib.LoadOptions{Source: []byte("b = " + call + "\ndef main():\n    return 1\n"), Extensions: []*starlib.Extension{ext}}, eval.Options{})
		return err
	}
	if err := run(`kubernetes_sandbox(kubeconfig = "kc", namespace = "agents", image = "img:1", resources = {"cpu": "500m", "memory": "1Gi"}, service_account = "bot", ready_timeout_ms = 5000, labels = {"team": "a"})`); err != nil {
		t.Fatal(err)
	}
	kc, _ := filepath.Abs("kc")
	want := kubernetes.Options{Kubeconfig: kc, Namespace: "agents", Image: "img:1", CPU: "500m", Memory: "1Gi", ServiceAccount: "bot", ReadyTimeout: 5 * time.Second}
	if got != want {
		t.Errorf("options %+v, want %+v", got, want)
	}
	for call, want := range map[string]string{
		`kubernetes_sandbox(image = "a", template = "b")`:               "give one of image=, template= and warm_pool=",
		`kubernetes_sandbox(warm_pool = "p", resources = {"cpu": "1"})`: "resources= applies to image= only",
		`kubernetes_sandbox(resources = {"gpu": "1"})`:                  `resources= has no key "gpu"`,
		`kubernetes_sandbox(resources = {"cpu": "fast"})`:               "is not a Kubernetes quantity",
		`kubernetes_sandbox(namespace = "Agents")`:                      "is not a Kubernetes name",
		`kubernetes_sandbox(labels = {"team": "a b"})`:                  "is not a Kubernetes label value",
		`kubernetes_sandbox(labels = {"aml.run": "x"})`:                 `labels must be non-empty and not start with "aml."`,
		`kubernetes_sandbox(ready_timeout_ms = 0)`:                      "ready_timeout_ms",
	} {
		if err := run(call); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", call, err, want)
		}
	}
}

// stubService stands for a cluster the test never reaches.
type stubService struct{}

func (stubService) Name() string { return "kubernetes" }
func (stubService) Create(context.Context, remote.CreateRequest) (remote.Machine, error) {
	return nil, errors.New("no cluster")
}
func (stubService) List(context.Context, map[string]string) ([]remote.Found, error) { return nil, nil }
func (stubService) Destroy(context.Context, string) error                           { return nil }
