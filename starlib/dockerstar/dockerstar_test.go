package dockerstar_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/testbin"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
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

// buildStatic builds a static Linux binary of a package of this module
// into dir.
func buildStatic(t *testing.T, pkg, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	testbin.BuildTo(t, pkg, testbin.Options{Static: true}, out)
	return out
}

// TestAgentInAContainer: a real ACP agent process (the fake agent, a
// static build) runs inside the container with no network, calls a
// Starlark tool that runs on the host through the tool bridge (its relay
// in the container, over a unix socket in the staging mount) and submits
// a structured result.
func TestAgentInAContainer(t *testing.T) {
	cli := engine(t)
	dir := t.TempDir()
	bin := t.TempDir()
	buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", dir, "fake-acp-agent")
	relay := buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", bin, "aml")
	exts := []*starlib.Extension{dockerstar.New(dockerstar.Options{Relay: relay}), acpstar.New(acpstar.Options{})}
	src := `
lookup = define_tool(name = "lookup", description = "Looks a word up.", execute = lambda input: "found " + input["q"],
    input = schema.object(q = schema.string()))
fake = acp_agent(command = "/workspace/fake-acp-agent", env = {"AML_FAKE_ACP_MODE": "no-http"})
box = docker_sandbox(image = "` + testImage + `", workspace = env("DIR"), labels = {"aml-test": "` + t.Name() + `"})

def main():
    return sandbox(
        agent("cwd\nmcp\ncall lookup {\"q\": \"ocelot\"}", tool(lookup), provider = fake),
        "|",
        agent(
            "submit {\"answer\": 42}",
            tool(lookup),
            provider = fake,
            schema = schema.object(answer = schema.integer()),
        ),
        provider = box,
        access = "read-write",
    )
`
	lookup := func(k string) (string, bool) { return dir, k == "DIR" }
	out, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: []byte(src), Extensions: exts, Env: lookup}, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prose, structured, _ := strings.Cut(out, "|")
	if !strings.Contains(prose, `"command":"/opt/aml/bin/aml"`) || !strings.Contains(prose, "unix:///opt/aml/run/bridge-") {
		t.Errorf("the bridge is not reached through the mounted relay over the shared socket: %q", prose)
	}
	if !strings.Contains(prose, "/workspace") || !strings.Contains(prose, "result: found ocelot") {
		t.Errorf("the agent in the container: %q, want its cwd /workspace and the host tool's result", prose)
	}
	if structured != `{"answer":42}` {
		t.Errorf("structured result %q, want the submitted one", structured)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+t.Name()))})
	if err != nil || len(list) != 0 {
		t.Errorf("containers left: %d, %v", len(list), err)
	}
}

// TestAgentInAContainerFailures: without a relay an agent with tools
// fails with what to do; a run cancelled while the agent works leaves no
// container.
func TestAgentInAContainerFailures(t *testing.T) {
	cli := engine(t)
	dir := t.TempDir()
	buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", dir, "fake-acp-agent")
	lookup := func(k string) (string, bool) { return dir, k == "DIR" }
	src := func(prompt string) []byte {
		return []byte(`
lookup = define_tool(name = "lookup", description = "Looks a word up.", execute = lambda input: "found")
fake = acp_agent(command = "/workspace/fake-acp-agent", env = {"AML_FAKE_ACP_MODE": "no-http"})
box = docker_sandbox(image = "` + testImage + `", workspace = env("DIR"), labels = {"aml-test": "` + t.Name() + `"})

def main():
    return sandbox(agent("` + prompt + `", tool(lookup), provider = fake), provider = box, access = "read-write")
`)
	}
	left := func() int {
		list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+t.Name()))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	noRelay := []*starlib.Extension{dockerstar.Extension, acpstar.New(acpstar.Options{})}
	_, err := starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: src("tools"), Extensions: noRelay, Env: lookup}, eval.Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the tool bridge here (the docker sandbox has no aml executable") {
		t.Errorf("an agent with tools in a container without a relay: %v", err)
	}
	if n := left(); n != 0 {
		t.Errorf("%d containers left", n)
	}

	// A relay linked against a C library the image lacks (busybox has
	// none) is found out, and said.
	dynamic := filepath.Join(t.TempDir(), "aml")
	testbin.BuildTo(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", testbin.Options{}, dynamic)
	if out, _ := exec.Command("file", dynamic).Output(); strings.Contains(string(out), "dynamically linked") {
		wrong := []*starlib.Extension{dockerstar.New(dockerstar.Options{Relay: dynamic}), acpstar.New(acpstar.Options{})}
		_, err = starlib.Run(context.Background(), filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: src("tools"), Extensions: wrong, Env: lookup}, eval.Options{})
		if err == nil || !strings.Contains(err.Error(), "does not run in the image") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("an agent with a relay that cannot run in the image: %v", err)
		}
	} else {
		t.Logf("the default build is static here (%s): the dynamic relay case is not exercised", strings.TrimSpace(string(out)))
	}

	relay := buildStatic(t, "github.com/aml-go/aml/internal/cmd/fake-acp-agent", t.TempDir(), "aml")
	exts := []*starlib.Extension{dockerstar.New(dockerstar.Options{Relay: relay}), acpstar.New(acpstar.Options{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// The agent notes its turn in the workspace, then hangs in it.
		_, err := starlib.Run(ctx, filepath.Join(dir, "w.star"), "", starlib.LoadOptions{Source: src(`ratelimit /workspace/turn 0\nhang-hard`), Extensions: exts, Env: lookup}, eval.Options{})
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "turn")); err == nil && left() != 0 {
			break
		}
		if time.Now().After(deadline) {
			select {
			case err := <-done:
				t.Fatalf("the run ended before the agent was in its turn: %v", err)
			default:
			}
			t.Fatal("the agent in its container was not in its turn within a minute")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("a cancelled run succeeded")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the cancelled run did not end")
	}
	if n := left(); n != 0 {
		t.Errorf("%d containers left after the cancellation", n)
	}
}

// TestFailedBranchAndTimeout: a parallel() branch whose container
// command fails ends with its container removed while its sibling goes on
// (parallel() settles every branch, as the original: no fail-fast), and a
// script's timeout_ms kills it; each leaves no container.
func TestFailedBranchAndTimeout(t *testing.T) {
	dir := t.TempDir()
	_, err := run(t, `
box = docker_sandbox(image = "`+testImage+`", workspace = env("DIR"), labels = {"aml-test": "`+t.Name()+`"})

def main():
    return parallel(
        sandbox(script("exit 4", shell = "sh"), provider = box, access = "read-write"),
        script("sleep 1", shell = "sh"),
    )
`, map[string]string{"DIR": dir})
	if err == nil || !strings.Contains(err.Error(), "exited with code 4") {
		t.Fatalf("a run with a failing branch: %v", err)
	}
	_, err = run(t, `
box = docker_sandbox(image = "`+testImage+`", workspace = env("DIR"), labels = {"aml-test": "`+t.Name()+`"})

def main():
    return sandbox(script("sleep 300", shell = "sh", timeout_ms = 300), provider = box, access = "read-write")
`, map[string]string{"DIR": dir})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("a script past its timeout_ms: %v", err)
	}
}

// TestResourceOptions: memory=, cpus=, pids_limit=, read_only_rootfs= and
// cap_drop= reach the container (the cgroup files inside it say so), and
// bad values are refused with the option named.
func TestResourceOptions(t *testing.T) {
	out, err := run(t, `
box = docker_sandbox(image = "`+testImage+`", labels = {"aml-test": "`+t.Name()+`"}, memory = "64m", cpus = 0.5, pids_limit = 100, read_only_rootfs = True, cap_drop = ["ALL"])
configure(workspace_provider = deterministic_workspace())

def main():
    return workspace(sandbox(
        script("""
c=/sys/fs/cgroup
if [ -f $c/memory.max ]; then cat $c/memory.max $c/cpu.max $c/pids.max
else cat $c/memory/memory.limit_in_bytes; echo $(cat $c/cpu/cpu.cfs_quota_us) $(cat $c/cpu/cpu.cfs_period_us); cat $c/pids/pids.max; fi
touch /etc/x 2>/dev/null || echo read-only
""", shell = "sh"),
        provider = box,
        access = "read-write",
    ))
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"67108864", "50000 100000", "100", "read-only"} {
		if !strings.Contains(out, want) {
			t.Errorf("the container's limits %q lack %q", out, want)
		}
	}
	for src, want := range map[string]string{
		`docker_sandbox(memory = "lots")`: `memory "lots" is not a size`,
		`docker_sandbox(memory = 1024)`:   "memory must be at least 6 MiB",
		`docker_sandbox(cpus = -1)`:       "cpus must be positive",
		`docker_sandbox(pids_limit = -5)`: "pids_limit must be positive",
		`docker_sandbox(cap_drop = [1])`:  "cap_drop",
		`docker_sandbox(memory = 1.5)`:    "memory",
	} {
		_, err := starlib.LoadFile(filepath.Join(t.TempDir(), "w.star"), starlib.LoadOptions{Source: []byte("p = " + src + "\n"), Extensions: []*starlib.Extension{dockerstar.Extension}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", src, err, want)
		}
	}
}
