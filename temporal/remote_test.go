package temporal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/internal/kubetest"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/remotestar"
	"github.com/aml-go/aml/temporal"
)

const remoteFlow = `configure(workspace_provider = local_workspace(directory = %s))
box = daytona_sandbox(api_url = %s, api_key = env("DAYTONA_API_KEY"))

def main():
    return workspace(
        sandbox(
            script("printf new > change.txt; rm gone.txt; mkdir -p added && printf a > added/a.txt; pwd", shell = "sh"),
            include(path = "keep.txt", title = False),
            provider = box,
            access = "read-write",
        ),
        id = "remote",
    )
`

// TestRemoteSandboxOnTemporal: a daytona_sandbox() inside a workspace,
// on a worker: the worker's credentials (its Env, never the submitter's)
// create the sandbox, the workspace goes in and its changes come back
// into the workspace, and neither the sandbox nor a lease is left.
func TestRemoteSandboxOnTemporal(t *testing.T) {
	dbl := daytonadouble.New(t)
	for _, v := range []string{"DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_ORGANIZATION_ID", "DAYTONA_TARGET"} {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"keep.txt": "same", "change.txt": "old", "gone.txt": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "remote.star")
	src := strings.Replace(strings.Replace(remoteFlow, "%s", strconv.Quote(dir), 1), "%s", strconv.Quote(dbl.URL), 1)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, held, err := runLeases(t, path, temporal.Options{
		Extensions: []*starlib.Extension{remotestar.Extension},
		Env: func(name string) (string, bool) {
			if name == "DAYTONA_API_KEY" {
				return dbl.APIKey, true
			}
			return "", false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("%d leases still held after the run", held)
	}
	if !strings.Contains(got, daytonadouble.Home+"/workspace") || !strings.Contains(got, "same") {
		t.Errorf("result %q: want the sandbox's cwd and keep.txt read there", got)
	}
	if got := strings.Join(tree(t, dir), " "); got != "added/ added/a.txt=a change.txt=new keep.txt=same" {
		t.Errorf("the workspace after the run: %s", got)
	}
	if left := dbl.Docker().Left(t); len(left) > 0 {
		t.Errorf("sandboxes left: %v", left)
	}
	if errs := dbl.TakeErrors(); len(errs) > 0 {
		t.Errorf("requests or responses off the published API: %v", errs)
	}
}

const kubernetesFlow = `configure(workspace_provider = local_workspace(directory = %s))
box = kubernetes_sandbox(namespace = %s, image = %s, labels = {"team": "core"})

def main():
    return workspace(
        sandbox(
            script("printf new > change.txt; rm gone.txt; mkdir -p added && printf a > added/a.txt; pwd; cat keep.txt", shell = "sh"),
            provider = box,
            access = "read-write",
        ),
        id = "remote",
    )
`

// TestKubernetesSandboxOnTemporal: a kubernetes_sandbox() inside a
// workspace, on a worker of the real test cluster (the worker's
// KUBECONFIG): the pod gets the workspace, its changes come back, and
// neither a Sandbox, a pod nor a lease is left.
func TestKubernetesSandboxOnTemporal(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	dir := t.TempDir()
	for name, content := range map[string]string{"keep.txt": "same", "change.txt": "old", "gone.txt": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "kube.star")
	src := fmt.Sprintf(kubernetesFlow, strconv.Quote(dir), strconv.Quote(ns), strconv.Quote(kubetest.Image))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, held, err := runLeases(t, path, temporal.Options{Extensions: []*starlib.Extension{remotestar.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("%d leases still held after the run", held)
	}
	if f := strings.Fields(got); len(f) != 2 || f[0] != kubernetes.GuestRoot || f[1] != "same" {
		t.Errorf("result %q: want the pod's cwd (%s) and keep.txt read there", got, kubernetes.GuestRoot)
	}
	if got := strings.Join(tree(t, dir), " "); got != "added/ added/a.txt=a change.txt=new keep.txt=same" {
		t.Errorf("the workspace after the run: %s", got)
	}
	if left := c.Left(t, ns, nil); len(left) > 0 {
		t.Errorf("left in the cluster: %v", left)
	}
}

// tree lists dir: "name/" for a directory, "name=content" for a file.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out = append(out, rel+"/")
		} else {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, rel+"="+string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
