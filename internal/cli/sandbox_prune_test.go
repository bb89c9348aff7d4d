//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/internal/kubetest"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/providers/sandbox/daytona"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

const dockerTestImage = "aml-test/busybox:1"

// dockerEngine returns a client of a Docker engine with the test image,
// or skips saying what is missing.
func dockerEngine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err = cli.Ping(ctx); err == nil {
			_, err = cli.ImageInspect(ctx, dockerTestImage)
		}
	}
	if err != nil {
		t.Skipf("no Docker engine with the image %s (%v): run scripts/docker-for-tests.sh, as .ci/run does", dockerTestImage, err)
	}
	return cli
}

func labelled(t *testing.T, cli *client.Client, label string) []container.Summary {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// waitUntil polls cond until it holds or the signal timeout passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(signalTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDockerSandboxCleanup: SIGINT in the middle of a script in a
// container removes the container; after a SIGKILL the container stays,
// and aml sandbox prune removes it (and only it: a container of a live
// run is busy). Not parallel: the prune removes what any dead run left in
// the shared engine (see cleanup).
func TestDockerSandboxCleanup(t *testing.T) {
	cli := dockerEngine(t)
	bin := buildAML(t)
	dir := t.TempDir()
	mark := "aml-cleanup-" + strconv.Itoa(os.Getpid())
	wf := filepath.Join(dir, "long.star")
	src := `box = docker_sandbox(image = "` + dockerTestImage + `", workspace = ` + strconv.Quote(dir) + `, labels = {"aml-test": "` + mark + `"})

def main():
    return sandbox(script("echo started > started; sleep 300", shell = "sh"), provider = box, access = "read-write")
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		_ = os.Remove(filepath.Join(dir, "started"))
		cmd := exec.Command(bin, "run", "--quiet", wf)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the script to start in its container", func() bool {
			_, err := os.Stat(filepath.Join(dir, "started"))
			return err == nil
		})
		return cmd
	}
	label := "aml-test=" + mark
	t.Cleanup(func() {
		for _, c := range labelled(t, cli, label) {
			_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})

	// SIGINT: the run cancels the script and removes its container.
	run := start()
	if n := len(labelled(t, cli, label)); n != 1 {
		t.Fatalf("%d containers while the script runs, want 1", n)
	}
	_ = run.Process.Signal(syscall.SIGINT)
	err := run.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("aml run after SIGINT: %v, want exit 130", err)
	}
	if left := labelled(t, cli, label); len(left) != 0 {
		t.Errorf("SIGINT left %d containers", len(left))
	}

	// SIGKILL: nothing could clean up; prune removes what the dead run
	// left, and reports a live run's container as busy.
	killed := start()
	_ = killed.Process.Signal(syscall.SIGKILL)
	_ = killed.Wait()
	left := labelled(t, cli, label)
	if len(left) != 1 {
		t.Fatalf("%d containers after SIGKILL, want the one it left", len(left))
	}
	// An ordinary run that acquires a Docker sandbox names what the dead
	// run left, and the command that removes it, without removing it.
	quick := filepath.Join(dir, "quick.star")
	if err := os.WriteFile(quick, []byte(`box = docker_sandbox(image = "`+dockerTestImage+`", workspace = `+strconv.Quote(dir)+`, labels = {"aml-test": "`+mark+`"})

def main():
    return sandbox(script("true", shell = "sh"), provider = box)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ordinary := exec.Command(bin, "run", quick)
	ordinary.Dir = dir
	stderr, err := ordinary.CombinedOutput()
	if err != nil {
		t.Fatalf("an ordinary run after the SIGKILL: %v: %s", err, stderr)
	}
	name := strings.TrimPrefix(left[0].Names[0], "/")
	if !strings.Contains(string(stderr), "left by killed aml processes") || !strings.Contains(string(stderr), name) || !strings.Contains(string(stderr), "`aml sandbox prune` removes them") {
		t.Errorf("the ordinary run does not name the leftover container %s and the prune command:\n%s", name, stderr)
	}
	if n := len(labelled(t, cli, label)); n != 1 {
		t.Errorf("the ordinary run changed the leftovers: %d containers, want the 1 left", n)
	}
	live := start()
	defer func() { _ = live.Process.Kill(); _ = live.Wait() }()
	out, err := exec.Command(bin, "sandbox", "prune", "--json").Output()
	if err != nil {
		t.Fatalf("aml sandbox prune: %v", err)
	}
	var rep struct {
		Removed []struct{ ID string } `json:"removed"`
		Busy    []struct{ ID string } `json:"busy"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	removed := map[string]bool{}
	for _, r := range rep.Removed {
		removed[r.ID] = true
	}
	if !removed[left[0].ID] {
		t.Errorf("prune did not remove the killed run's container %s: %s", left[0].ID, out)
	}
	now := labelled(t, cli, label)
	if len(now) != 1 || now[0].ID == left[0].ID {
		t.Fatalf("after prune: %d containers, want only the live run's", len(now))
	}
	busy := false
	for _, b := range rep.Busy {
		busy = busy || b.ID == now[0].ID
	}
	if !busy {
		t.Errorf("the live run's container is not reported busy: %s", out)
	}
	_ = live.Process.Signal(syscall.SIGINT)
	_ = live.Wait()
	if n := len(labelled(t, cli, label)); n != 0 {
		t.Errorf("%d containers after the live run ended", n)
	}
	if !strings.Contains(string(out), `"removed"`) {
		t.Errorf("prune output %s", out)
	}
}

// TestOrphanProcesses: a SIGKILLed run leaves its script and the setsid
// descendant it started; the next ordinary run names them and the command
// that ends them (killing nothing), aml sandbox prune lists them, and
// aml sandbox prune --kill-orphans ends them all. Not parallel: the prune
// ends every dead run's leftovers on the machine (see cleanup).
func TestOrphanProcesses(t *testing.T) {
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id (/etc/machine-id or /proc/sys/kernel/random/boot_id): leftover processes cannot be told")
	}
	bin := buildAML(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "orphan.star")
	if err := os.WriteFile(wf, []byte(`def main():
    return script("setsid sleep 300 & sleep 300 & echo $$ > sh.pid; echo started > started; wait", shell = "sh")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "run", "--quiet", wf)
	run.Dir = dir
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// Both sleeps are forked once the script says it started.
	waitUntil(t, "the script to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	b, _ := os.ReadFile(filepath.Join(dir, "sh.pid"))
	shell, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the script's shell pid %q: %v", b, err)
	}
	owner := run.Process.Pid
	_ = run.Process.Signal(syscall.SIGKILL)
	_ = run.Wait()
	mine := func() []int {
		var pids []int
		for _, o := range procscope.Orphans() {
			if o.Owner == owner {
				pids = append(pids, o.PID)
			}
		}
		return pids
	}
	// The script's shell dies with aml (the kernel's parent-death
	// signal), asynchronously: the leftovers are what stays once it is
	// gone.
	waitUntil(t, "the script's shell to die with aml", func() bool { return !processLive(shell) })
	left := mine()
	// The script's sleep and the setsid one.
	if len(left) < 2 {
		t.Fatalf("after SIGKILL %d processes of the run are left, want its script's and the setsid descendant", len(left))
	}
	t.Cleanup(func() {
		for _, pid := range mine() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	hello := filepath.Join(dir, "hello.star")
	if err := os.WriteFile(hello, []byte("def main():\n    return \"hi\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ordinary := exec.Command(bin, "run", hello)
	ordinary.Dir = dir
	var stderr strings.Builder
	ordinary.Stderr = &stderr
	if out, err := ordinary.Output(); err != nil || strings.TrimSpace(string(out)) != "hi" {
		t.Fatalf("an ordinary run: %v: %s %s", err, out, stderr.String())
	}
	for _, pid := range left {
		if want := fmt.Sprintf("%d (of aml %d)", pid, owner); !strings.Contains(stderr.String(), want) {
			t.Errorf("the ordinary run does not name %s:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "`aml sandbox prune --kill-orphans` ends them") {
		t.Errorf("the ordinary run does not name the command that ends them:\n%s", stderr.String())
	}
	if got := mine(); len(got) != len(left) {
		t.Errorf("the ordinary run changed the leftovers: %v, was %v", got, left)
	}
	quiet := exec.Command(bin, "run", "--quiet", hello)
	quiet.Dir = dir
	if out, err := quiet.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "hi" {
		t.Errorf("--quiet still prints the leftovers line (or failed: %v): %s", err, out)
	}

	// prune lists them without --kill-orphans and ends them with it. The
	// Docker engine may be absent: the processes are handled anyway.
	out, _ := exec.Command(bin, "sandbox", "prune").Output()
	for _, pid := range left {
		if want := fmt.Sprintf("orphan process %d (its aml process %d is gone", pid, owner); !strings.Contains(string(out), want) {
			t.Errorf("aml sandbox prune does not list %d: %s", pid, out)
		}
	}
	if got := mine(); len(got) != len(left) {
		t.Errorf("aml sandbox prune without --kill-orphans killed %v", left)
	}
	out, _ = exec.Command(bin, "sandbox", "prune", "--kill-orphans", "--json").Output()
	var rep struct {
		Killed []procscope.Orphan `json:"killed"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	killed := map[int]bool{}
	for _, o := range rep.Killed {
		killed[o.PID] = true
	}
	for _, pid := range left {
		if !killed[pid] {
			t.Errorf("--kill-orphans does not report killing %d: %s", pid, out)
		}
	}
	waitUntil(t, "the orphans to end", func() bool { return len(mine()) == 0 })
}

// TestSandboxPruneDaytona: with Daytona's credentials in the environment,
// aml sandbox prune destroys the Daytona sandboxes a dead aml process
// left, reports a live one's as busy and leaves the others.
func TestSandboxPruneDaytona(t *testing.T) {
	dbl := daytonadouble.New(t)
	for _, v := range []string{"DAYTONA_ORGANIZATION_ID", "DAYTONA_TARGET"} {
		t.Setenv(v, "")
	}
	t.Setenv("DAYTONA_API_KEY", dbl.APIKey)
	t.Setenv("DAYTONA_API_URL", dbl.URL)
	svc, err := daytona.New(daytona.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id: owners cannot be judged")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(owner string) string {
		m, err := svc.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelOwner: owner, remote.LabelLease: "l", remote.LabelRun: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID()
	}
	dead := create(fmt.Sprintf("aml-%d-%s-x", cmd.Process.Pid, procscope.MachineTag()))
	live := create(procscope.Marker())
	var stdout, stderr strings.Builder
	if code := cmdSandbox([]string{"prune"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("aml sandbox prune: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "removed daytona sandbox "+dead) || !strings.Contains(stdout.String(), "busy daytona sandbox "+live) {
		t.Errorf("aml sandbox prune:\n%s", stdout.String())
	}
	found, err := svc.List(ctx, nil)
	if err != nil || len(found) != 1 || found[0].ID != live {
		t.Errorf("after prune: %v %v", found, err)
	}
	_ = svc.Destroy(ctx, live)
}

// TestSandboxPruneKubernetes: with KUBECONFIG naming the test cluster,
// aml sandbox prune deletes the Sandbox a dead aml process left, reports
// a live one's as busy and leaves the others; the deleted one's pod goes
// with it.
func TestSandboxPruneKubernetes(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	for _, v := range []string{"DAYTONA_API_KEY", "MODAL_TOKEN_ID"} {
		t.Setenv(v, "")
	}
	t.Setenv("HOME", t.TempDir()) // no ~/.modal.toml
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id: owners cannot be judged")
	}
	svc, err := kubernetes.New(kubernetes.Options{Namespace: ns, Image: kubetest.Image})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(owner string) string {
		m, err := svc.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelOwner: owner, remote.LabelLease: "kubernetes:l", remote.LabelRun: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID()
	}
	dead := create(fmt.Sprintf("aml-%d-%s-x", cmd.Process.Pid, procscope.MachineTag()))
	live := create(procscope.Marker())
	var stdout, stderr strings.Builder
	if code := cmdSandbox([]string{"prune"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("aml sandbox prune: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "removed kubernetes sandbox "+dead) || !strings.Contains(stdout.String(), "busy kubernetes sandbox "+live) {
		t.Errorf("aml sandbox prune:\n%s", stdout.String())
	}
	if left := c.Left(t, ns, nil); len(left) != 1 || left[0] != live {
		t.Errorf("after prune: %v, want only %s", left, live)
	}
	_ = svc.Destroy(ctx, live)
}

// TestSandboxPruneKubernetesUnreachable: a kubeconfig whose cluster is
// down (its port refuses) is said on stderr, not failed: the other
// services and the processes are still handled.
func TestSandboxPruneKubernetesUnreachable(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	for _, v := range []string{"DAYTONA_API_KEY", "MODAL_TOKEN_ID"} {
		t.Setenv(v, "")
	}
	t.Setenv("HOME", t.TempDir())
	var stdout, stderr strings.Builder
	if code := cmdSandbox([]string{"prune"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("aml sandbox prune with a cluster that is down: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no kubernetes sandboxes checked: ") || !strings.Contains(stderr.String(), "refused the connection") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
