// Package remotetest runs remote sandboxes for tests as real containers
// on a Docker engine: Docker implements remote.Service, so that the
// provider's core, and the doubles of the Daytona and Modal services
// behind their own protocols, exercise hydration by tar, processes,
// cancellation and the mirrored release for real. Tests skip, saying what
// is missing, when no engine with the test image answers.
package remotetest

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aml-go/aml/internal/pidline"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// Image is the image the sandboxes run: a static busybox (sh, tar,
// mkdir, rm), which scripts/docker-for-tests.sh imports.
const Image = "aml-test/busybox:1"

// label marks every container of this package, so that tests find and
// remove what they left.
const label = "aml-remotetest"

// Docker is a remote.Service whose sandboxes are containers. It is safe
// for concurrent use.
type Docker struct {
	cli *client.Client
	// Home is the guest directory relative paths resolve against (a
	// Daytona sandbox's user home); "" means "/".
	Home string
	// Image is the containers' image; "" means Image.
	Image string
	// Mark is a label value every container carries (aml-remotetest=Mark)
	// besides the request's labels.
	Mark string
	// Files are executables copied into every new sandbox: guest path to
	// host path (an image with the aml relay, for instance).
	Files map[string]string

	// removals counts the containers being removed after Destroy (a
	// count and a condition rather than a WaitGroup: Destroy adds while
	// Left may be waiting).
	removalsMu   sync.Mutex
	removalsCond *sync.Cond
	removals     int
}

func (d *Docker) removalStarted() {
	d.removalsMu.Lock()
	d.removals++
	d.removalsMu.Unlock()
}

func (d *Docker) removalDone() {
	d.removalsMu.Lock()
	d.removals--
	if d.removals == 0 && d.removalsCond != nil {
		d.removalsCond.Broadcast()
	}
	d.removalsMu.Unlock()
}

// waitRemovals waits until no removal is under way.
func (d *Docker) waitRemovals() {
	d.removalsMu.Lock()
	defer d.removalsMu.Unlock()
	if d.removalsCond == nil {
		d.removalsCond = sync.NewCond(&d.removalsMu)
	}
	for d.removals > 0 {
		d.removalsCond.Wait()
	}
}

var _ remote.Service = (*Docker)(nil)

// New returns a Docker service on the engine DOCKER_HOST names (else the
// local socket), or skips the test saying what is missing. Containers
// left when the test ends are removed.
func New(t testing.TB, home string) *Docker {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err = cli.Ping(ctx); err == nil {
			_, err = cli.ImageInspect(ctx, Image)
		}
	}
	if err != nil {
		t.Skipf("no Docker engine with the image %s (%v): run scripts/docker-for-tests.sh, as .ci/run does", Image, err)
	}
	d := &Docker{cli: cli, Home: home, Mark: fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())}
	t.Cleanup(func() {
		for _, id := range d.Left(t) {
			_ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		cli.Close()
	})
	return d
}

// Left returns the ids of the containers of d that still exist.
func (d *Docker) Left(t testing.TB) []string {
	t.Helper()
	d.waitRemovals()
	list, err := d.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label+"="+d.Mark))})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

// Client is the engine client.
func (d *Docker) Client() *client.Client { return d.cli }

// Name returns "docker-remote".
func (d *Docker) Name() string { return "docker-remote" }

func (d *Docker) home() string {
	if d.Home == "" {
		return "/"
	}
	return d.Home
}

func (d *Docker) image() string {
	if d.Image == "" {
		return Image
	}
	return d.Image
}

// Create implements remote.Service: a container that waits, its home
// directory made by the engine (the container's working directory) and
// d.Files copied in before it starts. The home and /tmp are volumes: a
// plain filesystem, as a remote machine's disk, rather than the
// container's overlay layer.
func (d *Docker) Create(ctx context.Context, req remote.CreateRequest) (remote.Machine, error) {
	labels := maps.Clone(req.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[label] = d.Mark
	volumes := map[string]struct{}{"/tmp": {}}
	if d.home() != "/" {
		volumes[d.home()] = struct{}{}
	}
	init := true
	created, err := d.cli.ContainerCreate(context.WithoutCancel(ctx), &container.Config{
		Image:      d.image(),
		Entrypoint: []string{"/bin/sh", "-c", `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`},
		Cmd:        []string{},
		WorkingDir: d.home(),
		Volumes:    volumes,
		Labels:     labels,
	}, &container.HostConfig{Init: &init, NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return nil, fmt.Errorf("creating a container: %w", err)
	}
	m := &machine{d: d, id: created.ID}
	if err := ctx.Err(); err != nil {
		_ = m.Destroy(context.WithoutCancel(ctx))
		return nil, context.Cause(ctx)
	}
	if err := m.install(ctx); err != nil {
		_ = m.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		_ = m.Destroy(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("starting a container: %w", err)
	}
	return m, nil
}

// List implements remote.Service.
func (d *Docker) List(ctx context.Context, labels map[string]string) ([]remote.Found, error) {
	d.waitRemovals()
	args := filters.NewArgs(filters.Arg("label", label+"="+d.Mark))
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, err
	}
	out := make([]remote.Found, 0, len(list))
	for _, c := range list {
		out = append(out, remote.Found{ID: c.ID, Labels: c.Labels})
	}
	return out, nil
}

// Destroy implements remote.Service as the services do: the sandbox is
// killed before Destroy returns (nothing runs in it any more) and its
// storage is reclaimed afterwards (the container removed in the
// background). Left and List wait for the removals. (Freezing it instead
// would be quicker, but the engine can hang removing a frozen container.)
func (d *Docker) Destroy(ctx context.Context, id string) error {
	err := d.cli.ContainerKill(context.WithoutCancel(ctx), id, "KILL")
	switch {
	case cerrdefs.IsNotFound(err):
		return nil
	case err != nil && !cerrdefs.IsConflict(err): // a conflict: it does not run
		return err
	}
	d.removalStarted()
	go func() {
		defer d.removalDone()
		_ = d.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}()
	return nil
}

// Settle waits until the storage of every destroyed sandbox is reclaimed
// (work a service does on its own machines after Destroy returns).
func (d *Docker) Settle() { d.waitRemovals() }

// Machine returns the sandbox id as a machine (for doubles that keep
// only ids).
func (d *Docker) Machine(id string) remote.Machine { return &machine{d: d, id: id} }

// install copies d.Files into the created container, executable, in one
// archive whose entries make their parent directories.
func (m *machine) install(ctx context.Context) error {
	if len(m.d.Files) == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := func() error {
			for guest, host := range m.d.Files {
				data, err := os.ReadFile(host)
				if err != nil {
					return err
				}
				name := strings.TrimPrefix(path.Clean(guest), "/")
				for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
					if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Now()}); err != nil {
						return err
					}
				}
				if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
					return err
				}
				if _, err := tw.Write(data); err != nil {
					return err
				}
			}
			return tw.Close()
		}()
		pw.CloseWithError(err)
	}()
	if err := m.d.cli.CopyToContainer(ctx, m.id, "/", pr, container.CopyToContainerOptions{}); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("installing %v: %w", maps.Keys(m.d.Files), err)
	}
	return nil
}

type machine struct {
	d  *Docker
	id string

	// killer is a root shell in the container that kills the process
	// groups whose ids it reads, one per line, and acknowledges each by a
	// line: a kill costs a round trip on a stream, as a service's
	// daemon's does, rather than an engine exec.
	killerMu sync.Mutex
	killer   io.WriteCloser
	acks     chan struct{}
}

// kill ends the process group pid leads (or the process alone) and
// returns once it is killed, or after five seconds.
func (m *machine) kill(pid int) error {
	m.killerMu.Lock()
	defer m.killerMu.Unlock()
	for range 2 {
		if m.killer == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ex, err := m.d.cli.ContainerExecCreate(ctx, m.id, container.ExecOptions{User: "0", AttachStdin: true, AttachStdout: true,
				Cmd: []string{"/bin/sh", "-c", `while read -r p; do kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; echo; done`}})
			if err != nil {
				cancel()
				return err
			}
			att, err := m.d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
			cancel()
			if err != nil {
				return err
			}
			acks := make(chan struct{}, 1)
			pr, pw := io.Pipe()
			go func() { _, err := stdcopy.StdCopy(pw, io.Discard, att.Reader); pw.CloseWithError(err) }()
			go func() {
				defer close(acks)
				br := bufio.NewReader(pr)
				for {
					if _, err := br.ReadBytes('\n'); err != nil {
						return
					}
					acks <- struct{}{}
				}
			}()
			m.killer, m.acks = stdin{att}, acks
		}
		if _, err := fmt.Fprintf(m.killer, "%d\n", pid); err == nil {
			select {
			case _, ok := <-m.acks:
				if ok {
					return nil
				}
			case <-time.After(5 * time.Second):
				m.killer.Close()
				m.killer = nil
				return errors.New("the killer shell did not answer")
			}
		}
		m.killer.Close()
		m.killer = nil
	}
	return errors.New("the killer shell does not take ids")
}

func (m *machine) ID() string { return m.id }

func (m *machine) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(m.d.home(), p)
}

func (m *machine) Start(ctx context.Context, c remote.Command) (remote.Process, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("empty argv")
	}
	env := make([]string, 0, len(c.Env))
	for k, v := range c.Env {
		env = append(env, k+"="+v)
	}
	ex, err := m.d.cli.ContainerExecCreate(ctx, m.id, container.ExecOptions{
		Cmd:         append([]string{"/bin/sh", "-c", pidline.Wrapper, "remote-exec"}, c.Args...),
		Env:         env,
		WorkingDir:  m.abs(c.Dir),
		AttachStdin: c.Stdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, err
	}
	att, err := m.d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	if !c.Stdin {
		_ = att.CloseWrite()
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p := &process{m: m, exec: ex.ID, att: att, stdout: outR, stderr: errR, pidc: make(chan int, 1), done: make(chan struct{})}
	go func() {
		pl := &pidline.Writer{Dst: errW, Set: func(line []byte) {
			if pid := pidline.Parse(line); pid > 0 {
				p.pidc <- int(pid)
			}
		}}
		_, err := stdcopy.StdCopy(outW, pl, att.Reader)
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		errW.CloseWithError(err)
		close(p.done)
	}()
	if c.Timeout > 0 {
		go func() {
			select {
			case <-time.After(c.Timeout):
				_ = p.Kill()
			case <-p.done:
			}
		}()
	}
	return p, nil
}

type process struct {
	m              *machine
	exec           string
	att            types.HijackedResponse
	stdout, stderr io.Reader
	pidc           chan int
	pidOnce        sync.Once
	pid            int
	done           chan struct{}
	killOnce       sync.Once
	killed         bool
	waitOnce       sync.Once
	code           int
	err            error
}

func (p *process) Stdin() io.WriteCloser { return stdin{p.att} }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

type stdin struct{ att types.HijackedResponse }

func (s stdin) Write(b []byte) (int, error) { return s.att.Conn.Write(b) }
func (s stdin) Close() error                { return s.att.CloseWrite() }

func (p *process) getPid() int {
	p.pidOnce.Do(func() {
		select {
		case p.pid = <-p.pidc:
		case <-time.After(2 * time.Second):
		}
	})
	return p.pid
}

func (p *process) Kill() error {
	p.killOnce.Do(func() {
		p.killed = true
		if pid := p.getPid(); pid > 0 {
			_ = p.m.kill(pid)
		}
		p.att.Close()
	})
	return nil
}

func (p *process) Wait() (int, error) {
	p.waitOnce.Do(func() {
		<-p.done
		for {
			ins, err := p.m.d.cli.ContainerExecInspect(context.Background(), p.exec)
			if err != nil {
				p.code, p.err = 137, nil
				if !p.killed {
					p.err = err
				}
				return
			}
			if !ins.Running {
				p.code = ins.ExitCode
				if p.killed && p.code == 0 {
					p.code = 137
				}
				// A sandbox destroyed under the process ends it too: a
				// service says so rather than report an exit.
				if c, err := p.m.d.cli.ContainerInspect(context.Background(), p.m.id); !p.killed && (err != nil || c.State == nil || !c.State.Running) {
					p.code, p.err = 137, fmt.Errorf("the sandbox %s was terminated", p.m.id)
				}
				return
			}
			if p.killed {
				p.code = 137
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	return p.code, p.err
}

func (m *machine) Upload(ctx context.Context, p string, r io.Reader) error {
	// The engine takes a tar stream, whose header needs the size: the
	// content goes to a temporary file first.
	f, err := os.CreateTemp("", "remotetest-upload-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	size, err := io.Copy(f, r)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dst := m.abs(p)
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: path.Base(dst), Mode: 0o644, Size: size, Typeflag: tar.TypeReg, ModTime: time.Now()})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return m.d.cli.CopyToContainer(ctx, m.id, path.Dir(dst), pr, container.CopyToContainerOptions{})
}

func (m *machine) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, stat, err := m.d.cli.CopyFromContainer(ctx, m.id, m.abs(p))
	if err != nil {
		return nil, err
	}
	if !stat.Mode.IsRegular() {
		rc.Close()
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		rc.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{tr, rc}, nil
}

func (m *machine) Destroy(ctx context.Context) error { return m.d.Destroy(ctx, m.id) }
