package dockertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// Daemon is a dockerd a test started for itself (its data, exec root and
// socket in a temporary directory), so that it can freeze it without
// touching the engine other tests use. It is stopped, with its
// containers, when the test ends.
type Daemon struct {
	t   testing.TB
	cmd *exec.Cmd
	// Host is its DOCKER_HOST ("unix://…").
	Host string
	// Client is a client of it.
	Client *client.Client
}

// PrivateDaemon starts a Daemon with the images copied from the shared
// engine (which must have them), or skips saying what is missing: root,
// dockerd, the docker CLI or a shared engine.
func PrivateDaemon(t testing.TB, images ...string) *Daemon {
	t.Helper()
	shared := Engine(t)
	for _, img := range images {
		if _, err := shared.ImageInspect(context.Background(), img); err != nil {
			t.Skipf("the Docker engine lacks the image %s (%v): run scripts/docker-for-tests.sh, as .ci/run does", img, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("starting a private dockerd needs root: run the tests as root (as .ci/run does on its machine)")
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Skip("dockerd is not on PATH: install docker.io (scripts/docker-for-tests.sh does)")
	}
	dockerCLI, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("the docker CLI is not on PATH: install docker.io (scripts/docker-for-tests.sh does)")
	}
	// A short path: the socket's path must fit in sun_path.
	dir, err := os.MkdirTemp("", "amldk")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{t: t, Host: "unix://" + filepath.Join(dir, "sock")}
	d.cmd = exec.Command(dockerd, "--bridge=none", "--iptables=false", "--ip-forward=false",
		"--data-root="+filepath.Join(dir, "data"), "--exec-root="+filepath.Join(dir, "exec"),
		"--pidfile="+filepath.Join(dir, "pid"), "-H", d.Host)
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting dockerd: %v", err)
	}
	t.Cleanup(func() {
		d.Thaw()
		if d.Client != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if list, err := d.Client.ContainerList(ctx, container.ListOptions{All: true}); err == nil {
				for _, c := range list {
					_ = d.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
				}
			}
			cancel()
			d.Client.Close()
		}
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		log.Close()
		_ = exec.Command("umount", "-R", filepath.Join(dir, "data")).Run()
		_ = os.RemoveAll(dir)
	})
	d.Client, err = client.NewClientWithOpts(client.WithHost(d.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.Client.Ping(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, "log"))
			if len(out) > 600 {
				out = out[len(out)-600:]
			}
			t.Skipf("a private dockerd did not start within 60 s (%v); its log ends: %s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, img := range images {
		load := exec.Command("sh", "-c", `"$0" save "$1" | "$0" -H "$2" load`, dockerCLI, img, d.Host)
		if out, err := load.CombinedOutput(); err != nil {
			t.Fatalf("loading %s into the private dockerd: %v: %s", img, err, out)
		}
	}
	return d
}

// Freeze stops the daemon (SIGSTOP) until Thaw or the test's end: it
// keeps its socket, accepts connections and answers nothing, while its
// containers go on running.
func (d *Daemon) Freeze() {
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		d.t.Fatal(err)
	}
}

// Thaw lets a frozen daemon go on (SIGCONT).
func (d *Daemon) Thaw() { _ = d.cmd.Process.Signal(syscall.SIGCONT) }
