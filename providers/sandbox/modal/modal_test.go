package modal_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modal-labs/modal-client/go"

	"github.com/aml-go/aml/internal/modaldouble"
	"github.com/aml-go/aml/providers/sandbox/modal"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// newService returns a Service that reaches d, made with opts (d's
// credentials unless opts gives a client or a token) in d's environment
// plus env.
func newService(t testing.TB, d *modaldouble.Double, opts modal.Options, env map[string]string) *modal.Service {
	t.Helper()
	if opts.Client == nil && opts.TokenID == "" {
		opts.TokenID, opts.TokenSecret = d.TokenID, d.TokenSecret
	}
	vars := d.Env()
	maps.Copy(vars, env)
	var s *modal.Service
	var err error
	modaldouble.WithEnv(vars, func() { s, err = modal.New(opts) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// run runs argv in m with stdin (nil: none) and returns its outputs and
// exit code.
func run(t *testing.T, m remote.Machine, c remote.Command, stdin string) (stdout, stderr string, code int, err error) {
	t.Helper()
	if stdin != "" {
		c.Stdin = true
	}
	p, err := m.Start(testContext(t), c)
	if err != nil {
		return "", "", 0, err
	}
	if c.Stdin {
		go func() {
			_, _ = io.WriteString(p.Stdin(), stdin)
			_ = p.Stdin().Close()
		}()
	}
	var wg sync.WaitGroup
	var errOut []byte
	wg.Add(1)
	go func() { defer wg.Done(); errOut, _ = io.ReadAll(p.Stderr()) }()
	out, _ := io.ReadAll(p.Stdout())
	wg.Wait()
	code, err = p.Wait()
	return string(out), string(errOut), code, err
}

// A sandbox carries its labels as tags: List finds it by any of them
// with all of them, and Destroy terminates it (twice is fine).
func TestCreateListDestroy(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{Create: sdk.SandboxCreateParams{Tags: map[string]string{"team": "a", "aml.run": "tag-loses"}}}, nil)
	ctx := testContext(t)
	m1, err := s.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelRun: "r1", remote.LabelLease: "l1", remote.LabelOwner: "o"}})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := s.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelRun: "r2", remote.LabelLease: "l2", remote.LabelOwner: "o"}})
	if err != nil {
		t.Fatal(err)
	}
	found, err := s.List(ctx, map[string]string{remote.LabelRun: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ID != m1.ID() {
		t.Fatalf("List(run r1) = %+v, want %s", found, m1.ID())
	}
	want := map[string]string{remote.LabelRun: "r1", remote.LabelLease: "l1", remote.LabelOwner: "o", "team": "a", modal.CreateTag: found[0].Labels[modal.CreateTag]}
	if !maps.Equal(found[0].Labels, want) || found[0].Labels[modal.CreateTag] == "" {
		t.Fatalf("labels %v, want %v", found[0].Labels, want)
	}
	found, err = s.List(ctx, map[string]string{remote.LabelOwner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{found[0].ID, found[1].ID}
	if len(found) != 2 || !slices.Contains(ids, m1.ID()) || !slices.Contains(ids, m2.ID()) {
		t.Fatalf("List(owner) = %+v", found)
	}
	if err := s.Destroy(ctx, m1.ID()); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(ctx, m1.ID()); err != nil {
		t.Fatalf("destroying a terminated sandbox: %v", err)
	}
	if err := s.Destroy(ctx, "sb-doesNotExist0000000000"); err != nil {
		t.Fatalf("destroying an unknown sandbox: %v", err)
	}
	if err := m2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if found, err := s.List(ctx, map[string]string{remote.LabelOwner: "o"}); err != nil || len(found) != 0 {
		t.Fatalf("List after Destroy = %+v, %v", found, err)
	}
	if r := d.Running(); len(r) != 0 {
		t.Fatalf("still running: %v", r)
	}
	// A service whose app does not exist lists nothing.
	other := newService(t, d, modal.Options{AppName: "never-used"}, nil)
	if found, err := other.List(ctx, nil); err != nil || len(found) != 0 {
		t.Fatalf("List of a missing app = %+v, %v", found, err)
	}
}

// Processes: the literal argv, separate streams, exit codes, the
// environment, working directories, input, Modal's timeout and Kill.
func TestProcesses(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{Create: sdk.SandboxCreateParams{Workdir: "/workspace"}}, nil)
	m, err := s.Create(testContext(t), remote.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Destroy(context.Background()) })

	t.Run("streams and exit code", func(t *testing.T) {
		out, errOut, code, err := run(t, m, remote.Command{Args: []string{"sh", "-c", `echo out; echo err >&2; printf '%s|' "$@"; exit 7`, "x", "a b", "$HOME", "'q'"}}, "")
		if err != nil || code != 7 || out != "out\na b|$HOME|'q'|" || errOut != "err\n" {
			t.Fatalf("code %d, err %v, stdout %q, stderr %q", code, err, out, errOut)
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, _, code, err := run(t, m, remote.Command{Args: []string{"no-such-command"}}, "")
		if err != nil || code != 127 {
			t.Fatalf("code %d, err %v", code, err)
		}
	})
	t.Run("environment", func(t *testing.T) {
		out, _, code, err := run(t, m, remote.Command{Args: []string{"sh", "-c", `printf '%s/%s' "$A" "$B"`}, Env: map[string]string{"A": "1 2", "B": "$A"}}, "")
		if err != nil || code != 0 || out != "1 2/$A" {
			t.Fatalf("code %d, err %v, stdout %q", code, err, out)
		}
		if _, err := m.Start(testContext(t), remote.Command{Args: []string{"true"}, Env: map[string]string{"a.b": "1"}}); err == nil || !strings.Contains(err.Error(), `"a.b"`) {
			t.Fatalf("a name Modal refuses: %v", err)
		}
	})
	t.Run("working directory", func(t *testing.T) {
		if _, _, _, err := run(t, m, remote.Command{Args: []string{"mkdir", "-p", "/workspace/sub"}}, ""); err != nil {
			t.Fatal(err)
		}
		for dir, want := range map[string]string{"": "/workspace", "sub": "/workspace/sub", "/tmp": "/tmp"} {
			out, _, _, err := run(t, m, remote.Command{Args: []string{"pwd"}, Dir: dir}, "")
			if err != nil || out != want+"\n" {
				t.Fatalf("Dir %q: pwd %q, %v", dir, out, err)
			}
		}
	})
	t.Run("stdin", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", 200<<10) // 3.2 MB, several chunks
		out, _, code, err := run(t, m, remote.Command{Args: []string{"sh", "-c", "wc -c; echo done"}}, big)
		if err != nil || code != 0 || strings.Fields(out)[0] != "3276800" {
			t.Fatalf("code %d, err %v, stdout %q", code, err, out)
		}
		// Without Stdin the input is empty: cat ends at once.
		out, _, code, err = run(t, m, remote.Command{Args: []string{"cat"}}, "")
		if err != nil || code != 0 || out != "" {
			t.Fatalf("cat without input: code %d, err %v, stdout %q", code, err, out)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		_, _, code, err := run(t, m, remote.Command{Args: []string{"sleep", "60"}, Timeout: 1500 * time.Millisecond}, "")
		if took := time.Since(start); took > 15*time.Second || (err == nil && code == 0) {
			t.Fatalf("code %d, err %v after %v", code, err, took)
		}
		t.Logf("timed out: code %d, err %v after %v", code, err, time.Since(start))
		if out, _, _, _ := run(t, m, remote.Command{Args: []string{"sh", "-c", "ps -o args | grep -c '^sleep 60' || true"}}, ""); strings.TrimSpace(out) != "0" {
			t.Fatalf("sleeps left after the timeout: %s", out)
		}
	})
	t.Run("kill", func(t *testing.T) {
		p, err := m.Start(testContext(t), remote.Command{Args: []string{"sh", "-c", "sleep 1001 & sleep 1002 & echo started >&2; wait; echo never"}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		outc := make(chan string, 1)
		go func() { b, _ := io.ReadAll(p.Stdout()); outc <- string(b) }()
		// Kill once both sleeps run.
		stderr := bufio.NewReader(p.Stderr())
		if line, err := stderr.ReadString('\n'); line != "started\n" {
			t.Fatalf("the command did not start its sleeps: %q, %v", line, err)
		}
		go io.Copy(io.Discard, stderr)
		start := time.Now()
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		code, err := p.Wait()
		if err != nil || code != 137 {
			t.Fatalf("after Kill: code %d, err %v", code, err)
		}
		if out := <-outc; out != "" {
			t.Fatalf("stdout %q", out)
		}
		t.Logf("killed in %v", time.Since(start))
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		if c2, err2 := p.Wait(); c2 != code || err2 != err {
			t.Fatal("Wait is not repeat-safe")
		}
		out, _, _, _ := run(t, m, remote.Command{Args: []string{"sh", "-c", "ps -o args | grep -c '^sleep 100' || true"}}, "")
		if strings.TrimSpace(out) != "0" {
			t.Fatalf("the killed command's children are left: %s", out)
		}
		// The sandbox still runs commands.
		if out, _, _, err := run(t, m, remote.Command{Args: []string{"echo", "alive"}}, ""); err != nil || out != "alive\n" {
			t.Fatalf("after Kill: %q, %v", out, err)
		}
	})
}

// When the kill cannot be run in the sandbox, Kill terminates the
// sandbox: the command ends killed, and the sandbox runs nothing more.
func TestKillFallsBackToTerminate(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{}, nil)
	ctx := testContext(t)
	m, err := s.Create(ctx, remote.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Start(ctx, remote.Command{Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	d.RefuseExec("kill -KILL")
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 137 && !errors.Is(err, modal.ErrSandboxGone) {
		t.Fatalf("Wait after the fallback: %d, %v", code, err)
	}
	if r := d.Running(); len(r) != 0 {
		t.Fatalf("running: %v", r)
	}
	if _, err := m.Start(ctx, remote.Command{Args: []string{"true"}}); !errors.Is(err, modal.ErrSandboxGone) {
		t.Fatalf("Start after the fallback: %v", err)
	}
	if err := m.Destroy(ctx); err != nil {
		t.Fatalf("Destroy after the fallback: %v", err)
	}
}

// gen is a deterministic stream of n pseudo-random bytes.
type gen struct {
	r *rand.ChaCha8
	n int64
}

func (g *gen) Read(b []byte) (int, error) {
	if g.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > g.n {
		b = b[:g.n]
	}
	_, _ = g.r.Read(b)
	g.n -= int64(len(b))
	return len(b), nil
}

// liveHeap returns the live heap as of the last garbage collection.
func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// peakHeap samples the live heap until stop is closed and returns the
// largest value seen.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		for {
			peak = max(peak, liveHeap())
			select {
			case <-stop:
				out <- peak
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return out
}

// A 20 MB file goes up and comes back streamed: the live heap of the
// test process (client and double together) grows by well under its
// size. A download is read in segments of 8 MiB, one exec each, so that
// what Modal sends ahead of a slow reader stays within one segment (the
// SDK lets 64 MiB come ahead); the slow reader's heap is logged, not
// asserted, as the double's share of it varies with the load.
func TestTransfer20MB(t *testing.T) {
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{}, nil)
	ctx := testContext(t)
	m, err := s.Create(ctx, remote.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Destroy(context.Background()) })
	const size = 20 << 20
	seed := [32]byte{1, 2, 3}
	want := sha256.New()
	_, _ = io.Copy(want, &gen{rand.NewChaCha8(seed), size})
	// A first small transfer pays the one-time costs (the SDK's lazily
	// read protocol descriptors, connections, buffer pools).
	if err := m.Upload(ctx, "/tmp/warm", strings.NewReader("warm")); err != nil {
		t.Fatal(err)
	}
	if rc, err := m.Download(ctx, "/tmp/warm"); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.Copy(io.Discard, rc)
		rc.Close()
	}
	// Garbage is collected early, so that the heap in use is about what
	// is live.
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	measure := func(name string, bound int64, f func()) {
		t.Helper()
		runtime.GC()
		base := liveHeap()
		stop := make(chan struct{})
		peak := peakHeap(stop)
		start := time.Now()
		f()
		close(stop)
		grew := int64(<-peak) - int64(base)
		t.Logf("%s: %v, heap grew by at most %.1f MB", name, time.Since(start), float64(grew)/(1<<20))
		if bound > 0 && grew > bound {
			t.Fatalf("%s: the heap grew by %d bytes for a %d byte transfer", name, grew, size)
		}
	}
	measure("upload", 10<<20, func() {
		if err := m.Upload(ctx, "/workspace/big.bin", &gen{rand.NewChaCha8(seed), size}); err != nil {
			t.Fatal(err)
		}
	})
	download := func(pause time.Duration) {
		rc, err := m.Download(ctx, "/workspace/big.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got := sha256.New()
		buf := make([]byte, 256<<10)
		n := 0
		for {
			k, err := rc.Read(buf)
			got.Write(buf[:k])
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(pause) // the stimulus: a slow reader
		}
		if n != size || string(got.Sum(nil)) != string(want.Sum(nil)) {
			t.Fatalf("downloaded %d bytes, same content %v", n, string(got.Sum(nil)) == string(want.Sum(nil)))
		}
	}
	execs := d.Calls("TaskExecStart")
	measure("download", 10<<20, func() { download(0) })
	if n := d.Calls("TaskExecStart") - execs; n != 3 {
		t.Fatalf("a 20 MiB download took %d execs, want 3 segments", n)
	}
	measure("slow download", 0, func() { download(5 * time.Millisecond) })

	// Missing files and directories are errors of Download itself.
	if _, err := m.Download(ctx, "/workspace/missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := m.Download(ctx, "/workspace"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	// An empty file, and a relative path (the home is /).
	if err := m.Upload(ctx, "tmp/empty", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	rc, err := m.Download(ctx, "/tmp/empty")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(rc); err != nil || len(b) != 0 {
		t.Fatalf("empty file: %q, %v", b, err)
	}
	rc.Close()
	// Closing a download early kills its segment's dd.
	rc, err = m.Download(ctx, "/workspace/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	out, _, _, _ := run(t, m, remote.Command{Args: []string{"sh", "-c", "ps -o args | grep -c '^dd if=/workspace/big.bin' || true"}}, "")
	if strings.TrimSpace(out) != "0" {
		t.Fatalf("dd left after Close: %s", out)
	}
}

// Refused and missing credentials are ErrUnauthorized, and no secret
// appears in the error.
func TestCredentials(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	ctx := testContext(t)
	s := newService(t, d, modal.Options{TokenID: d.TokenID, TokenSecret: "as-wrong-secret-value"}, nil)
	_, err := s.Create(ctx, remote.CreateRequest{})
	if !errors.Is(err, modal.ErrUnauthorized) || strings.Contains(err.Error(), "as-wrong-secret-value") || strings.Contains(err.Error(), d.TokenSecret) {
		t.Fatalf("wrong secret: %v", err)
	}
	t.Log(err)
	// Credentials from the environment, as the SDK reads them.
	s = newService(t, d, modal.Options{Client: nil, TokenID: ""}, map[string]string{"MODAL_TOKEN_ID": d.TokenID, "MODAL_TOKEN_SECRET": d.TokenSecret})
	if found, err := s.List(ctx, nil); err != nil || len(found) != 0 {
		t.Fatalf("credentials from the environment: %v %v", found, err)
	}
	// None at all.
	var none *modal.Service
	modaldouble.WithEnv(d.Env(), func() { none, err = modal.New(modal.Options{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if _, err := none.List(ctx, nil); !errors.Is(err, modal.ErrUnauthorized) || !strings.Contains(err.Error(), "none were found") {
		t.Fatalf("no credentials: %v", err)
	}
}

// Rate limits: the SDK follows Modal's retry hints, and gives up after
// MaxThrottleWait with ErrRateLimited.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	ctx := testContext(t)
	s := newService(t, d, modal.Options{}, nil)
	d.Throttle("SandboxCreateV2", 2, 400*time.Millisecond)
	start := time.Now()
	m, err := s.Create(ctx, remote.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 800*time.Millisecond || d.Calls("SandboxCreateV2") != 3 {
		t.Fatalf("the retry hints were not followed: %v, %d calls", took, d.Calls("SandboxCreateV2"))
	}
	_ = m.Destroy(ctx)

	bounded := newService(t, d, modal.Options{MaxThrottleWait: 1500 * time.Millisecond}, nil)
	d.Throttle("SandboxListV2", -1, 500*time.Millisecond)
	start = time.Now()
	_, err = bounded.List(ctx, nil)
	if !errors.Is(err, modal.ErrRateLimited) || !strings.Contains(err.Error(), "retry after 500ms") {
		t.Fatalf("bounded wait: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %v", took)
	}
	t.Log(err)
}

// An image that fails to build is ErrBuildFailed with Modal's message,
// and leaves no sandbox.
func TestImageBuildFails(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	d.FailImage("registry.example/broken:1", "manifest for registry.example/broken:1 not found")
	s := newService(t, d, modal.Options{Image: "registry.example/broken:1"}, nil)
	_, err := s.Create(testContext(t), remote.CreateRequest{})
	if !errors.Is(err, modal.ErrBuildFailed) || !strings.Contains(err.Error(), "manifest for registry.example/broken:1 not found") {
		t.Fatalf("err %v", err)
	}
	t.Log(err)
	if len(d.Sandboxes()) != 0 {
		t.Fatalf("sandboxes: %+v", d.Sandboxes())
	}
}

// A sandbox terminated from outside while a command runs: the command's
// Wait says so (ErrSandboxGone), and so do later commands.
func TestTerminatedFromOutside(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{}, nil)
	ctx := testContext(t)
	m, err := s.Create(ctx, remote.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Start(ctx, remote.Command{Args: []string{"sh", "-c", "echo started; exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	// Terminate once the command runs.
	stdout := bufio.NewReader(p.Stdout())
	if line, err := stdout.ReadString('\n'); line != "started\n" {
		t.Fatalf("the command did not start: %q, %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	if err := d.Terminate(m.ID()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Wait()
	if !errors.Is(err, modal.ErrSandboxGone) || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("Wait: %v", err)
	}
	t.Logf("%v (after %v)", err, time.Since(start))
	if _, err := m.Start(ctx, remote.Command{Args: []string{"true"}}); !errors.Is(err, modal.ErrSandboxGone) {
		t.Fatalf("Start after the end: %v", err)
	}
	if err := m.Destroy(ctx); err != nil {
		t.Fatalf("Destroy after the end: %v", err)
	}
}

// Network failures end within bounds: an API that does not listen, and
// one that never answers.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	ctx := testContext(t)
	lost := newService(t, d, modal.Options{}, map[string]string{"MODAL_SERVER_URL": "http://127.0.0.1:1"})
	start := time.Now()
	_, err := lost.Create(ctx, remote.CreateRequest{})
	if !errors.Is(err, modal.ErrUnavailable) || time.Since(start) > 20*time.Second {
		t.Fatalf("no server: %v after %v", err, time.Since(start))
	}
	t.Log(err)

	s := newService(t, d, modal.Options{RequestTimeout: time.Second}, nil)
	d.Stall("AppGetOrCreate")
	start = time.Now()
	_, err = s.List(ctx, nil)
	if !errors.Is(err, modal.ErrUnavailable) || time.Since(start) > 10*time.Second {
		t.Fatalf("no answer: %v after %v", err, time.Since(start))
	}
	t.Log(err)
}

// A Create cancelled while the image builds returns at once; one
// cancelled while the sandbox is provisioned waits for the service's
// answer and terminates what it made; when the answer does not come
// within RequestTimeout, the sandbox is found by its CreateTag and
// terminated. None leaves a sandbox or a container.
func TestCreateCancelled(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
	}{{"v2", nil}, {"v1", map[string]string{"MODAL_SANDBOX_V2": "false"}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := modaldouble.New(t)
			s := newService(t, d, modal.Options{RequestTimeout: 2 * time.Second}, c.env)
			nothingLeft := func(when string) {
				t.Helper()
				if r := d.Running(); len(r) != 0 {
					t.Fatalf("%s: running: %v", when, r)
				}
				// A terminated sandbox's container goes soon after.
				for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					left := d.Docker().Left(t)
					if len(left) == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: containers: %v", when, left)
					}
				}
			}
			// cancelOnce cancels as soon as the double has a sandbox (or
			// after a pause, with none).
			cancelOnce := func(pause time.Duration) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				n := len(d.Sandboxes())
				go func() {
					for len(d.Sandboxes()) == n && pause == 0 {
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(pause) // the stimulus: the cancel comes this late
					cancel()
				}()
				return ctx
			}

			d.BuildDelay(3 * time.Second)
			start := time.Now()
			_, err := s.Create(cancelOnce(300*time.Millisecond), remote.CreateRequest{})
			if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
				t.Fatalf("cancelled during the build: %v after %v", err, time.Since(start))
			}
			nothingLeft("cancelled during the build")
			d.BuildDelay(0)

			d.CreateDelay(500 * time.Millisecond)
			_, err = s.Create(cancelOnce(0), remote.CreateRequest{})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled during provisioning: %v", err)
			}
			nothingLeft("cancelled during provisioning")

			d.CreateDelay(10 * time.Second)
			start = time.Now()
			_, err = s.Create(cancelOnce(0), remote.CreateRequest{})
			if took := time.Since(start); !errors.Is(err, context.Canceled) || took < 2*time.Second || took > 8*time.Second {
				t.Fatalf("cancelled, unanswered: %v after %v", err, took)
			}
			if sbs := d.Sandboxes(); len(sbs) != 2 || sbs[1].Tags[modal.CreateTag] == "" {
				t.Fatalf("sandboxes: %+v", sbs)
			}
			nothingLeft("cancelled, unanswered")
		})
	}
}

// The first sandbox backend (MODAL_SANDBOX_V2=false) is served too.
func TestFirstBackend(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	s := newService(t, d, modal.Options{}, map[string]string{"MODAL_SANDBOX_V2": "false"})
	ctx := testContext(t)
	m, err := s.Create(ctx, remote.CreateRequest{Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code, err := run(t, m, remote.Command{Args: []string{"sh", "-c", "cat; exit 3"}}, "in")
	if err != nil || code != 3 || out != "in" {
		t.Fatalf("code %d, err %v, out %q", code, err, out)
	}
	if err := m.Upload(ctx, "/tmp/f", strings.NewReader("file")); err != nil {
		t.Fatal(err)
	}
	rc, err := m.Download(ctx, "/tmp/f")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(rc); err != nil || string(b) != "file" {
		t.Fatalf("%q, %v", b, err)
	}
	rc.Close()
	found, err := s.List(ctx, map[string]string{"k": "v"})
	if err != nil || len(found) != 1 || found[0].ID != m.ID() {
		t.Fatalf("List = %+v, %v", found, err)
	}
	if err := s.Destroy(ctx, m.ID()); err != nil {
		t.Fatal(err)
	}
	if r := d.Running(); len(r) != 0 {
		t.Fatalf("running: %v", r)
	}
}

// An injected client is used as it is, and excludes the options that
// would make one.
func TestInjectedClient(t *testing.T) {
	t.Parallel()
	d := modaldouble.New(t)
	client := d.Client(t, nil, nil)
	if _, err := modal.New(modal.Options{Client: client, TokenID: "x", TokenSecret: "y"}); err == nil {
		t.Fatal("a client and a token were accepted together")
	}
	s, err := modal.New(modal.Options{Client: client, AppName: "injected"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Create(testContext(t), remote.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _, err := run(t, m, remote.Command{Args: []string{"echo", "hi"}}, ""); err != nil || out != "hi\n" {
		t.Fatalf("%q, %v", out, err)
	}
	if err := m.Destroy(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for _, sb := range d.Sandboxes() {
		if sb.Running {
			t.Fatalf("running: %+v", sb)
		}
	}
}
