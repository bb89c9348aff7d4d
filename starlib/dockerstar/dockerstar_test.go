package dockerstar_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/dockerstar"
	"github.com/aml-go/aml/starlib/fsstar"
)

const testImage = "aml-test/busybox:1"

var engineOnce = sync.OnceValues(func() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return nil, err
	}
	_, err = cli.ImageInspect(ctx, testImage)
	return cli, err
})

func engine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := engineOnce()
	if err != nil {
		t.Skipf("no Docker engine with the image %s (%v): run scripts/docker-for-tests.sh, as .ci/run does", testImage, err)
	}
	return cli
}

// run evaluates a workflow with the docker and filesystem extensions and
// checks that it left no container of its run.
func run(t *testing.T, src string, env map[string]string) (string, error) {
	t.Helper()
	cli := engine(t)
	exts := []*starlib.Extension{dockerstar.Extension, fsstar.Extension}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	out, err := starlib.Run(context.Background(), filepath.Join(t.TempDir(), "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: exts, Env: lookup}, eval.Options{})
	list, lerr := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+t.Name()))})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(list) > 0 {
		t.Errorf("the run left %d containers", len(list))
	}
	return out, err
}

// TestScriptAndFileInAContainer: file() writes into the mounted local
// workspace, script() runs in the container and sees it, include() reads
// what the container wrote.
func TestScriptAndFileInAContainer(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, `
box = docker_sandbox(image = "`+testImage+`", labels = {"aml-test": "`+t.Name()+`"}, env = {"GREETING": "hello"})
configure(workspace_provider = local_workspace(directory = env("DIR")))

def main():
    return workspace(sandbox(
        file("from a file node\n", path = "notes/in.txt"),
        script("cat notes/in.txt; echo \"$GREETING from $(hostname -s 2>/dev/null || echo container) in $(pwd)\" > notes/out.txt; id -u", shell = "sh"),
        include(path = "notes/out.txt", title = False),
        provider = box,
        access = "read-write",
    ))
`, map[string]string{"DIR": dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "from a file node") || !strings.Contains(out, "hello from") || !strings.Contains(out, "in /workspace") {
		t.Errorf("result %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "notes", "out.txt"))
	if err != nil || !strings.Contains(string(b), "in /workspace") {
		t.Errorf("the container's write on the host: %q, %v", b, err)
	}
}

// TestRevisionFromContainerWrites: a filesystem workspace saves what the
// container wrote, and the next run restores it.
func TestRevisionFromContainerWrites(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	env := map[string]string{"STORE": store}
	_, err := run(t, `
box = docker_sandbox(image = "`+testImage+`", labels = {"aml-test": "`+t.Name()+`"})
store = filesystem_workspace(directory = env("STORE"))

def main():
    return workspace(sandbox(script("echo built-in-a-container > artifact.txt", shell = "sh"), provider = box, access = "read-write"),
        id = "w", provider = store, save = True)
`, env)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, `
store = filesystem_workspace(directory = env("STORE"))

def main():
    return workspace(include(path = "artifact.txt", title = False), id = "w", provider = store)
`, env)
	if err != nil || strings.TrimSpace(out) != "built-in-a-container" {
		t.Fatalf("restored %q, %v", out, err)
	}
}

// TestReadOnlyAndSetupFailure: access = "read-only" makes the
// container's writes fail at the mount; a failing setup fails the
// sandbox with its output, naming the sandbox's position.
func TestReadOnlyAndSetupFailure(t *testing.T) {
	dir := t.TempDir()
	_, err := run(t, `
box = docker_sandbox(image = "`+testImage+`", workspace = env("DIR"), labels = {"aml-test": "`+t.Name()+`"})

def main():
    return sandbox(script("echo x > f.txt", shell = "sh"), provider = box, access = "read-only")
`, map[string]string{"DIR": dir})
	if err == nil || !strings.Contains(err.Error(), "Read-only file system") {
		t.Errorf("a write in a read-only container: %v", err)
	}
	_, err = run(t, `
box = docker_sandbox(image = "`+testImage+`", workspace = env("DIR"), setup = "echo no toolchain >&2; exit 4", labels = {"aml-test": "`+t.Name()+`"})

def main():
    return sandbox(script("true", shell = "sh"), provider = box)
`, map[string]string{"DIR": dir})
	if err == nil || !strings.Contains(err.Error(), "setup exited with status 4: no toolchain") || !strings.Contains(err.Error(), "w.star:5:") {
		t.Errorf("a failing setup: %v", err)
	}
}
