//go:build linux

package main

import (
	"context"
	"encoding/json"
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
// run is busy).
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
