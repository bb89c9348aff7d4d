package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// testImage is the busybox image scripts/docker-for-tests.sh imports.
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
	if _, err := cli.ImageInspect(ctx, testImage); err != nil {
		return nil, err
	}
	return cli, nil
})

// engine returns a client of a running Docker engine that has the test
// image, or skips the test saying what is missing.
func engine(t testing.TB) *client.Client {
	t.Helper()
	cli, err := engineOnce()
	if err != nil {
		t.Skipf("no Docker engine with the image %s (%v): run scripts/docker-for-tests.sh (installs docker.io, starts dockerd, imports the image), as .ci/run does", testImage, err)
	}
	return cli
}

// newProvider returns a provider of the test image whose containers carry
// a label unique to the test, and checks at the end that none is left.
func newProvider(t *testing.T, opts docker.Options) (*docker.Provider, string) {
	t.Helper()
	cli := engine(t)
	mark := uuid.NewString()
	opts.Client = cli
	if opts.Image == "" {
		opts.Image = testImage
	}
	opts.Labels = map[string]string{"aml-test": mark}
	p, err := docker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := containers(t, cli, mark); len(left) > 0 {
			t.Errorf("containers left behind: %v", left)
			for _, id := range left {
				_ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
			}
		}
	})
	return p, mark
}

func containers(t testing.TB, cli *client.Client, mark string) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml-test="+mark))})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

func acquire(t *testing.T, p *docker.Provider, dir string, access eval.Access) eval.SandboxLease {
	t.Helper()
	lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: access, Root: ".", Cwd: ".", EvaluationID: "run-" + t.Name(),
		Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}

func TestConformance(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	providertest.RunSandbox(t, p, providertest.SandboxOptions{Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}, Exercise: true})
}

// TestExecAndFiles: commands see the workspace at /workspace, files
// written on either side are seen on the other, exit codes, stdin, env and
// cwd reach the command.
func TestExecAndFiles(t *testing.T) {
	p, _ := newProvider(t, docker.Options{Env: map[string]string{"FROM_PROVIDER": "p"}})
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	lease := acquire(t, p, dir, eval.ReadWrite)
	rt := lease.Runtime()
	ctx := context.Background()
	if err := rt.WriteFile(ctx, "sub/in.txt", []byte("from the host\n")); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Exec(ctx, "sh", []string{"-c", `pwd; cat sub/in.txt; echo "$FROM_PROVIDER $FROM_EXEC"; echo out > sub/out.txt; echo err >&2; exit 3`},
		eval.ExecOptions{Env: map[string]string{"FROM_EXEC": "e"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "/workspace\nfrom the host\np e\n"; got != want || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("Exec = stdout %q (want %q), stderr %q, exit %d", got, want, res.Stderr, res.ExitCode)
	}
	got, err := rt.ReadFile(ctx, "sub/out.txt")
	if err != nil || string(got) != "out\n" {
		t.Errorf("ReadFile of the container's write: %q, %v", got, err)
	}
	res, err = rt.Exec(ctx, "pwd", nil, eval.ExecOptions{Cwd: "sub"})
	if err != nil || string(res.Stdout) != "/workspace/sub\n" {
		t.Errorf("Exec in cwd sub: %+v, %v", res, err)
	}
	res, err = rt.Exec(ctx, "cat", nil, eval.ExecOptions{Stdin: strings.NewReader("piped")})
	if err != nil || string(res.Stdout) != "piped" {
		t.Errorf("Exec with stdin: %+v, %v", res, err)
	}
	// Literal arguments: no shell sees them.
	res, err = rt.Exec(ctx, "echo", []string{"$HOME", "a b", "; rm -rf /"}, eval.ExecOptions{})
	if err != nil || string(res.Stdout) != "$HOME a b ; rm -rf /\n" {
		t.Errorf("Exec with literal arguments: %q, %v", res.Stdout, err)
	}
	if _, err := rt.Exec(ctx, "nosuch-command", nil, eval.ExecOptions{}); err != nil {
		t.Errorf("a missing command is an exit status, got %v", err)
	}
}

// TestReadOnly: a read-only lease mounts the workspace read-only, so the
// container cannot write it, and WriteFile fails with eval.ErrReadOnly.
func TestReadOnly(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	dir := t.TempDir()
	lease := acquire(t, p, dir, eval.ReadOnly)
	rt := lease.Runtime()
	ctx := context.Background()
	res, err := rt.Exec(ctx, "sh", []string{"-c", "echo x > written.txt"}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Read-only file system") {
		t.Errorf("a write in a read-only sandbox: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "written.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file was written: %v", err)
	}
	if err := rt.WriteFile(ctx, "f.txt", []byte("x")); !errors.Is(err, eval.ErrReadOnly) {
		t.Errorf("WriteFile under read-only access: %v", err)
	}
	st, err := rt.CreateFileStaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteFile(ctx, "a/b.txt", []byte("staged")); err != nil {
		t.Fatal(err)
	}
	res, err = rt.Exec(ctx, "cat", []string{st.Root() + "/a/b.txt"}, eval.ExecOptions{})
	if err != nil || string(res.Stdout) != "staged" {
		t.Errorf("the container reads a staged file: %+v, %v", res, err)
	}
	if err := st.Release(ctx); err != nil {
		t.Error(err)
	}
}

// TestEscapes: symbolic links a command plants never lead the runtime's
// file operations outside the root.
func TestEscapes(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	dir := t.TempDir()
	lease := acquire(t, p, dir, eval.ReadWrite)
	rt := lease.Runtime()
	ctx := context.Background()
	if _, err := rt.Exec(ctx, "sh", []string{"-c", "ln -s /etc etc-link && ln -s .. up && ln -s /etc/passwd passwd-link"}, eval.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"etc-link/passwd", "passwd-link", "up/" + filepath.Base(dir), "../x", "/etc/passwd"} {
		if b, err := rt.ReadFile(ctx, path); err == nil {
			t.Errorf("ReadFile(%q) escaped the root: %q", path, b)
		}
	}
	if err := rt.WriteFile(ctx, "etc-link/pwned", []byte("x")); err == nil {
		t.Errorf("WriteFile through a planted link succeeded")
	}
}

// TestOutputBound: output above max_output_bytes kills the command and
// fails the Exec.
func TestOutputBound(t *testing.T) {
	p, _ := newProvider(t, docker.Options{MaxOutputBytes: 1000})
	lease := acquire(t, p, t.TempDir(), eval.ReadWrite)
	_, err := lease.Runtime().Exec(context.Background(), "sh", []string{"-c", "while :; do echo 0123456789; done"}, eval.ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "output exceeded 1000 bytes") {
		t.Fatalf("Exec of endless output: %v", err)
	}
}

// TestKillGroup: a timeout kills the command's whole process group in
// the container.
func TestKillGroup(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	lease := acquire(t, p, t.TempDir(), eval.ReadWrite)
	rt := lease.Runtime()
	ctx := context.Background()
	start := time.Now()
	_, err := rt.Exec(ctx, "sh", []string{"-c", "sleep 300 & sleep 301"}, eval.ExecOptions{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Exec past its timeout: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the timeout took %v", d)
	}
	deadline := time.Now().Add(30 * time.Second) // a busy engine runs kills late
	for {
		res, err := rt.Exec(ctx, "ps", []string{"-o", "args"}, eval.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.Stdout), "sleep 30") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's group survived its timeout:\n%s", res.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Spawn streams, and Kill ends it.
	proc, err := rt.Spawn(ctx, "cat", nil, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(proc.Stdin(), "echoed\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(proc.Stdout(), buf); err != nil || string(buf) != "echoed\n" {
		t.Errorf("Spawn round trip: %q, %v", buf, err)
	}
	go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
	go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()
	_ = proc.Kill()
	if _, err := proc.Wait(); err == nil {
		t.Errorf("Wait after Kill succeeded")
	}
}

// TestAcquireFailures: a failing setup and a missing image fail the
// acquisition with what to check, and leave no container.
func TestAcquireFailures(t *testing.T) {
	p, mark := newProvider(t, docker.Options{Setup: "echo preparing; echo broken >&2; exit 7"})
	_, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "r",
		Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "setup exited with status 7: broken") {
		t.Fatalf("Acquire with a failing setup: %v", err)
	}
	if left := containers(t, engine(t), mark); len(left) > 0 {
		t.Errorf("a failed setup left containers: %v", left)
	}

	missing, _ := newProvider(t, docker.Options{Image: "aml-test/nosuch:0"})
	_, err = missing.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "r",
		Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), `image "aml-test/nosuch:0" is not on the Docker engine and pulling it failed`) {
		t.Fatalf("Acquire of a missing image: %v", err)
	}

	for _, c := range []struct {
		opts docker.Options
		want string
	}{
		{docker.Options{User: "nosuchuser"}, `unable to find user nosuchuser: no matching entries in passwd file; check user =`},
		{docker.Options{Image: noShellImage(t)}, `the image must have /bin/sh`},
	} {
		p, mark := newProvider(t, c.opts)
		_, err = p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "r",
			Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Acquire with %+v: %v, want %q", c.opts, err, c.want)
		}
		if left := containers(t, engine(t), mark); len(left) > 0 {
			t.Errorf("a failed acquisition left containers: %v", left)
		}
	}

	bad, _ := newProvider(t, docker.Options{})
	_, err = bad.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: "nosuch", Cwd: ".", EvaluationID: "r",
		Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}})
	if err == nil {
		t.Fatalf("Acquire with a missing root succeeded")
	}
}

// noShellImage imports (once) an image that holds one file and no shell.
func noShellImage(t *testing.T) string {
	const name = "aml-test/noshell:1"
	cli := engine(t)
	if _, err := cli.ImageInspect(context.Background(), name); err == nil {
		return name
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "file", Mode: 0o644, Size: 1})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	rc, err := cli.ImageImport(context.Background(), image.ImportSource{Source: &buf, SourceName: "-"}, name, image.ImportOptions{})
	if err != nil {
		t.Fatalf("importing %s: %v", name, err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	return name
}

// TestReleaseRemoves: the container carries the run and lease labels
// and is gone after Release, which is idempotent; operations after it
// fail.
func TestReleaseRemoves(t *testing.T) {
	p, mark := newProvider(t, docker.Options{})
	cli := engine(t)
	lease := acquire(t, p, t.TempDir(), eval.ReadWrite)
	ids := containers(t, cli, mark)
	if len(ids) != 1 {
		t.Fatalf("containers while leased: %v", ids)
	}
	info, err := cli.ContainerInspect(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Config.Labels; l[docker.LabelRun] != "run-"+t.Name() || l[docker.LabelLease] != lease.ID() || !strings.HasPrefix(l[docker.LabelOwner], "aml-") {
		t.Errorf("labels %v", l)
	}
	if info.HostConfig.NetworkMode != "none" {
		t.Errorf("network %q, want none by default", info.HostConfig.NetworkMode)
	}
	for range 2 {
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if ids := containers(t, cli, mark); len(ids) != 0 {
		t.Errorf("containers after Release: %v", ids)
	}
	if _, err := lease.Runtime().Exec(context.Background(), "true", nil, eval.ExecOptions{}); !errors.Is(err, docker.ErrReleased) {
		t.Errorf("Exec after Release: %v", err)
	}
}

// BenchmarkAcquireRelease: a busybox container acquired and released.
func BenchmarkAcquireRelease(b *testing.B) {
	cli := engine(b)
	p, err := docker.New(docker.Options{Client: cli, Image: testImage})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	ds := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "bench",
			Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(context.Background()); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	reportMedian(b, ds)
}

// BenchmarkExec: one command's round trip in a running container.
func BenchmarkExec(b *testing.B) {
	cli := engine(b)
	p, err := docker.New(docker.Options{Client: cli, Image: testImage})
	if err != nil {
		b.Fatal(err)
	}
	lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "bench",
		Workspace: &eval.WorkspaceMaterialization{Directory: b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release(context.Background())
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := lease.Runtime().Exec(context.Background(), "echo", []string{"x"}, eval.ExecOptions{})
		if err != nil || string(res.Stdout) != "x\n" {
			b.Fatalf("%+v %v", res, err)
		}
		ds = append(ds, time.Since(start))
	}
	reportMedian(b, ds)
}

func reportMedian(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
}

// TestConcurrentSandboxes: 20 sandboxes acquired, used and released at
// once leave no container, staging or goroutine behind.
func TestConcurrentSandboxes(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the stagings' parent
	p, mark := newProvider(t, docker.Options{})
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := t.TempDir()
			lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "many",
				Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
			if err != nil {
				errs <- err
				return
			}
			defer lease.Release(context.Background())
			res, err := lease.Runtime().Exec(context.Background(), "sh", []string{"-c", "echo $0 > n.txt; cat n.txt", strconv.Itoa(i)}, eval.ExecOptions{})
			if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
				errs <- fmt.Errorf("sandbox %d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if left := containers(t, engine(t), mark); len(left) > 0 {
		t.Errorf("containers left: %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "aml-docker-*")); len(left) > 0 {
		t.Errorf("stagings left: %v", left)
	}
}

// BenchmarkAcquireLargeWorkspace: a read-only 50 MB, 1,000-file
// workspace is mounted, not copied: acquisition costs what it costs for
// an empty one (BenchmarkAcquireRelease).
func BenchmarkAcquireLargeWorkspace(b *testing.B) {
	cli := engine(b)
	p, err := docker.New(docker.Options{Client: cli, Image: testImage})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	chunk := bytes.Repeat([]byte("x"), 50<<10)
	for i := range 1000 {
		sub := filepath.Join(dir, strconv.Itoa(i%10))
		_ = os.MkdirAll(sub, 0o755)
		if err := os.WriteFile(filepath.Join(sub, strconv.Itoa(i)+".txt"), chunk, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadOnly, Root: ".", Cwd: ".", EvaluationID: "bench",
			Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
		if err != nil {
			b.Fatal(err)
		}
		res, err := lease.Runtime().Exec(context.Background(), "sh", []string{"-c", "ls 9 | wc -l"}, eval.ExecOptions{})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "100" {
			b.Fatalf("%+v %v", res, err)
		}
		if err := lease.Release(context.Background()); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	reportMedian(b, ds)
}
