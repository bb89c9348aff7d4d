package daytona

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/daytonadouble"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// newService returns a client of the double, with short polls and
// deadlines; mod changes its options.
func newService(t testing.TB, dbl *daytonadouble.Server, mod func(*Options)) *Service {
	t.Helper()
	for _, v := range []string{"DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_ORGANIZATION_ID", "DAYTONA_TARGET"} {
		t.Setenv(v, "")
	}
	opts := Options{
		APIKey:         dbl.APIKey,
		APIURL:         dbl.URL,
		PollInterval:   20 * time.Millisecond,
		RequestTimeout: 20 * time.Second,
		IdleTimeout:    20 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// create makes a sandbox that is destroyed when the test ends.
func create(t *testing.T, s *Service, labels map[string]string) remote.Machine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := s.Create(ctx, remote.CreateRequest{Labels: labels})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = m.Destroy(context.Background()) })
	return m
}

// result is what a process did.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

// run starts cmd, feeds it stdin (when not nil) and waits for it.
func run(t *testing.T, m remote.Machine, cmd remote.Command, stdin []byte) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if stdin != nil {
		cmd.Stdin = true
	}
	p, err := m.Start(ctx, cmd)
	if err != nil {
		t.Fatalf("Start %q: %v", cmd.Args, err)
	}
	return finish(t, p, stdin)
}

func finish(t *testing.T, p remote.Process, stdin []byte) result {
	t.Helper()
	if stdin != nil {
		go func() {
			_, _ = p.Stdin().Write(stdin)
			_ = p.Stdin().Close()
		}()
	}
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	var outErr, errErr error
	wg.Add(2)
	go func() { defer wg.Done(); _, outErr = io.Copy(&stdout, p.Stdout()) }()
	go func() { defer wg.Done(); _, errErr = io.Copy(&stderr, p.Stderr()) }()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the process's output did not end")
	}
	code, err := p.Wait()
	if err == nil {
		err = errors.Join(outErr, errErr)
	}
	return result{stdout.String(), stderr.String(), code, err}
}

// TestCreateListDestroy creates sandboxes with labels, finds them by
// label (across pages) and destroys them.
func TestCreateListDestroy(t *testing.T) {
	dbl := daytonadouble.New(t)
	dbl.PageSize(1)
	s := newService(t, dbl, func(o *Options) { o.Target = "eu" })
	a := create(t, s, map[string]string{"aml.owner": "test", "aml.run": "a"})
	b := create(t, s, map[string]string{"aml.owner": "test", "aml.run": "b"})
	create(t, s, map[string]string{"aml.owner": "other"})

	box := dbl.Sandbox(a.ID())
	if box == nil || box.State() != "started" {
		t.Fatalf("the double's sandbox %s: %+v", a.ID(), box)
	}
	if got := box.Image(); got != DefaultImage {
		t.Errorf("image %q, want the default %q", got, DefaultImage)
	}
	if got := box.Dockerfile(); got != "FROM "+DefaultImage+"\n" {
		t.Errorf("Dockerfile %q", got)
	}
	req := box.Request()
	if _, ok := req["image"]; ok {
		t.Errorf("the create request has an image field: %v", req)
	}
	if req["target"] != "eu" || !strings.HasPrefix(box.Name(), "aml-") {
		t.Errorf("create request %v, name %q", req, box.Name())
	}
	if box.Labels()["aml.run"] != "a" || box.Labels()["aml.owner"] != "test" {
		t.Errorf("labels %v", box.Labels())
	}

	ctx := context.Background()
	ids := func(labels map[string]string) []string {
		t.Helper()
		found, err := s.List(ctx, labels)
		if err != nil {
			t.Fatalf("List(%v): %v", labels, err)
		}
		var out []string
		for _, f := range found {
			out = append(out, f.ID)
		}
		return out
	}
	if got := ids(map[string]string{"aml.owner": "test"}); len(got) != 2 || got[0] != a.ID() || got[1] != b.ID() {
		t.Errorf("List(owner=test) = %v, want [%s %s]", got, a.ID(), b.ID())
	}
	if got := ids(map[string]string{"aml.owner": "test", "aml.run": "b"}); len(got) != 1 || got[0] != b.ID() {
		t.Errorf("List(owner=test, run=b) = %v", got)
	}
	if got := ids(map[string]string{"aml.owner": "nobody"}); len(got) != 0 {
		t.Errorf("List(owner=nobody) = %v", got)
	}
	pages := 0
	for _, r := range dbl.Requests() {
		if r.Operation == "listSandboxes" && strings.Contains(r.RawQuery, "cursor=") {
			pages++
		}
	}
	if pages == 0 {
		t.Error("List never asked for a second page")
	}

	if err := s.Destroy(ctx, a.ID()); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := a.Destroy(ctx); err != nil {
		t.Fatalf("Destroy again: %v", err)
	}
	if got := ids(map[string]string{"aml.owner": "test"}); len(got) != 1 || got[0] != b.ID() {
		t.Errorf("List after Destroy = %v", got)
	}
	if n := len(dbl.Docker().Left(t)); n != 2 {
		t.Errorf("%d containers left, want 2", n)
	}
}

// TestSnapshot creates from a snapshot, and names a missing one.
func TestSnapshot(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, func(o *Options) { o.Snapshot = daytonadouble.DefaultSnapshot })
	m := create(t, s, nil)
	if box := dbl.Sandbox(m.ID()); box.Snapshot() != daytonadouble.DefaultSnapshot || box.Dockerfile() != "" {
		t.Errorf("snapshot %q, Dockerfile %q", box.Snapshot(), box.Dockerfile())
	}

	s = newService(t, dbl, func(o *Options) { o.Snapshot = "no-such-snapshot" })
	_, err := s.Create(context.Background(), remote.CreateRequest{})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `snapshot "no-such-snapshot" was not found`) {
		t.Fatalf("Create from a missing snapshot: %v", err)
	}
}

// TestOptions covers the options New refuses, the environment, and the
// headers every request carries.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no key", Options{}, "no API key"},
		{"image and snapshot", Options{APIKey: "k", Image: "a", Snapshot: "b"}, "mutually exclusive"},
		{"image in create", Options{APIKey: "k", Create: map[string]any{"image": "x"}}, `cannot hold "image"`},
		{"snapshot in create", Options{APIKey: "k", Create: map[string]any{"snapshot": "x"}}, `cannot hold "snapshot"`},
		{"bad url", Options{APIKey: "k", APIURL: "ftp://x"}, "not an http(s) URL"},
		{"bad labels", Options{APIKey: "k", Create: map[string]any{"labels": map[string]any{"a": 1}}}, "not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DAYTONA_API_KEY", "")
			if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}

	dbl := daytonadouble.New(t)
	t.Setenv("DAYTONA_API_KEY", dbl.APIKey)
	t.Setenv("DAYTONA_API_URL", dbl.URL)
	t.Setenv("DAYTONA_ORGANIZATION_ID", "org-42")
	t.Setenv("DAYTONA_TARGET", "us")
	s, err := New(Options{PollInterval: 20 * time.Millisecond, Image: "alpine:3", Create: map[string]any{"cpu": 2, "labels": map[string]string{"team": "x"}, "autoStopInterval": 0}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Create(context.Background(), remote.CreateRequest{Labels: map[string]string{"aml.run": "r"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer m.Destroy(context.Background())
	box := dbl.Sandbox(m.ID())
	if box.Image() != "alpine:3" || box.Labels()["team"] != "x" || box.Labels()["aml.run"] != "r" {
		t.Errorf("image %q, labels %v", box.Image(), box.Labels())
	}
	if req := box.Request(); req["cpu"] != float64(2) || req["target"] != "us" || req["autoStopInterval"] != float64(0) {
		t.Errorf("create request %v", req)
	}
	for _, r := range dbl.Requests() {
		if r.Header.Get("X-Daytona-Organization-ID") != "org-42" {
			t.Errorf("%s %s without the organization header", r.Method, r.Path)
		}
	}
}

// TestProcesses runs commands: separate streams, exact output, exit
// codes, environment, directories, standard input, killing, timeouts.
func TestProcesses(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, nil)
	m := create(t, s, nil)

	t.Run("streams", func(t *testing.T) {
		r := run(t, m, remote.Command{Args: []string{"sh", "-c", "echo out; echo err >&2; echo out2; printf 'no newline'; printf 'err2' >&2"}}, nil)
		if r.err != nil || r.code != 0 || r.stdout != "out\nout2\nno newline" || r.stderr != "err\nerr2" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("empty output", func(t *testing.T) {
		r := run(t, m, remote.Command{Args: []string{"true"}}, nil)
		if r.err != nil || r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("labels in output", func(t *testing.T) {
		// Output that holds the daemon's own labels, blank lines and
		// control bytes comes back as written.
		want := "\x01\x01\x01x\x02\x02\x02y\n\n\x01\x01\x01\n\x02\x02\x02\r\x7f\xff\n\n"
		r := run(t, m, remote.Command{Args: []string{"printf", "%s", want}}, nil)
		if r.err != nil || r.stdout != want || r.stderr != "" {
			t.Errorf("stdout %q, want %q (%+v)", r.stdout, want, r)
		}
	})
	t.Run("exit codes", func(t *testing.T) {
		if r := run(t, m, remote.Command{Args: []string{"sh", "-c", "exit 3"}}, nil); r.code != 3 || r.err != nil {
			t.Errorf("exit 3: %+v", r)
		}
		if r := run(t, m, remote.Command{Args: []string{"no-such-command"}}, nil); r.code != 127 || r.err != nil {
			t.Errorf("a missing command: %+v", r)
		}
		if r := run(t, m, remote.Command{Args: []string{"sh", "-c", "kill -TERM $$"}}, nil); r.code != 128+15 || r.err != nil {
			t.Errorf("a signal: %+v", r)
		}
	})
	t.Run("env and dir", func(t *testing.T) {
		if r := run(t, m, remote.Command{Args: []string{"mkdir", "-p", "work/sub dir"}}, nil); r.code != 0 {
			t.Fatalf("mkdir: %+v", r)
		}
		env := map[string]string{"A": "two words", "B": "$(echo no) `echo no` 'q' \"d\"\nline", "C": "\xff\xfe"}
		r := run(t, m, remote.Command{Args: []string{"sh", "-c", `printf '%s|%s|%s|%s' "$PWD" "$A" "$B" "$C"`}, Dir: "work/sub dir", Env: env}, nil)
		want := daytonadouble.Home + "/work/sub dir|two words|" + env["B"] + "|" + env["C"]
		if r.err != nil || r.code != 0 || r.stdout != want {
			t.Errorf("stdout %q, want %q (%+v)", r.stdout, want, r)
		}
		// A name the shell cannot export still reaches the process (a
		// shell in between would drop it).
		r = run(t, m, remote.Command{Args: []string{"env"}, Env: map[string]string{"MY-VAR": "dash", "PLAIN": "x"}}, nil)
		if !strings.Contains(r.stdout, "\nMY-VAR=dash\n") || !strings.Contains(r.stdout, "\nPLAIN=x\n") {
			t.Errorf("env: %+v", r)
		}
		if r := run(t, m, remote.Command{Args: []string{"pwd"}, Dir: "/tmp"}, nil); r.stdout != "/tmp\n" {
			t.Errorf("pwd in /tmp: %+v", r)
		}
		if r := run(t, m, remote.Command{Args: []string{"pwd"}}, nil); r.stdout != daytonadouble.Home+"\n" {
			t.Errorf("pwd in the home: %+v", r)
		}
		if r := run(t, m, remote.Command{Args: []string{"pwd"}, Dir: "missing"}, nil); r.code == 0 || !strings.Contains(r.stderr, "missing") {
			t.Errorf("pwd in a missing directory: %+v", r)
		}
	})
	t.Run("hostile argv", func(t *testing.T) {
		all := append(append([]string(nil), hostile...), "\xff\xfe not UTF-8\n", "a\x80'b")
		args := append([]string{"sh", "-c", `for a in "$@"; do printf '%s\036' "$a"; done`, "sh"}, all...)
		r := run(t, m, remote.Command{Args: args}, nil)
		want := strings.Join(all, "\x1e") + "\x1e"
		if r.err != nil || r.code != 0 || r.stdout != want {
			t.Errorf("stdout %q\nwant   %q (%+v)", r.stdout, want, r)
		}
		if r := run(t, m, remote.Command{Args: []string{"test", "-e", "/tmp/aml-pwned"}}, nil); r.code == 0 {
			t.Error("an argument ran a command")
		}
	})
	t.Run("stdin", func(t *testing.T) {
		var in []byte
		for i := range 3 * stdinChunk {
			in = append(in, byte(i*7+i/256))
		}
		in = append(in, "last line without newline"...)
		r := run(t, m, remote.Command{Args: []string{"sh", "-c", "cat; echo done >&2"}}, in)
		// NUL bytes are lost on the way out, not on the way in: wc
		// counts them in the sandbox.
		want := string(bytes.ReplaceAll(in, []byte{0}, nil))
		if r.err != nil || r.code != 0 || r.stdout != want || r.stderr != "done\n" {
			t.Errorf("cat: %d bytes out (want %d), stderr %q, %v", len(r.stdout), len(want), r.stderr, r.err)
		}
		r = run(t, m, remote.Command{Args: []string{"wc", "-c"}}, in)
		if strings.TrimSpace(r.stdout) != "147481" {
			t.Errorf("wc -c: %+v, want %d", r, len(in))
		}
		// Input closed at once.
		if r := run(t, m, remote.Command{Args: []string{"cat"}}, []byte{}); r.stdout != "" || r.code != 0 {
			t.Errorf("cat of nothing: %+v", r)
		}
		// A process that does not read its input exits without waiting
		// for it to be closed.
		ctx := context.Background()
		p, err := m.Start(ctx, remote.Command{Args: []string{"echo", "hi"}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if r := finish(t, p, nil); r.stdout != "hi\n" || r.code != 0 {
			t.Errorf("echo with open input: %+v", r)
		}
		if _, err := p.Stdin().Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("writing to an exited process: %v", err)
		}
		if err := p.Stdin().Close(); err != nil {
			t.Errorf("closing the input of an exited process: %v", err)
		}
		// Without Stdin, the input is empty.
		p, err = m.Start(ctx, remote.Command{Args: []string{"cat"}})
		if err != nil {
			t.Fatal(err)
		}
		if p.Stdin() != nil {
			t.Error("Stdin() is not nil without Command.Stdin")
		}
		if r := finish(t, p, nil); r.stdout != "" || r.code != 0 {
			t.Errorf("cat without input: %+v", r)
		}
	})
	t.Run("interactive", func(t *testing.T) {
		p, err := m.Start(context.Background(), remote.Command{Args: []string{"sh", "-c", `while read -r l; do echo "got $l"; done`}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, p.Stderr())
		out := make([]byte, 64)
		for _, l := range []string{"one", "two"} {
			if _, err := p.Stdin().Write([]byte(l + "\n")); err != nil {
				t.Fatal(err)
			}
			n, err := io.ReadAtLeast(p.Stdout(), out, len("got "+l+"\n"))
			if err != nil || string(out[:n]) != "got "+l+"\n" {
				t.Fatalf("read %q, %v", out[:n], err)
			}
		}
		_ = p.Stdin().Close()
		if rest, _ := io.ReadAll(p.Stdout()); len(rest) != 0 {
			t.Errorf("more output: %q", rest)
		}
		if code, err := p.Wait(); code != 0 || err != nil {
			t.Errorf("Wait: %d, %v", code, err)
		}
	})
	t.Run("kill", func(t *testing.T) {
		p, err := m.Start(context.Background(), remote.Command{Args: []string{"sh", "-c", "echo started; sleep 300 & sleep 301; echo never"}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 8)
		if _, err := io.ReadFull(p.Stdout(), line); err != nil || string(line) != "started\n" {
			t.Fatalf("read %q, %v", line, err)
		}
		start := time.Now()
		if err := p.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		r := finish(t, p, nil)
		if r.code != 137 || r.err != nil || strings.Contains(r.stdout, "never") {
			t.Errorf("after Kill: %+v", r)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Kill took %v", d)
		}
		if err := p.Kill(); err != nil {
			t.Errorf("Kill again: %v", err)
		}
		if r := run(t, m, remote.Command{Args: []string{"sh", "-c", "ps -o args | grep -c '[s]leep 30'"}}, nil); strings.TrimSpace(r.stdout) != "0" {
			t.Errorf("processes left after Kill: %+v", r)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		r := run(t, m, remote.Command{Args: []string{"sleep", "300"}, Timeout: 300 * time.Millisecond}, nil)
		if r.code != 137 || r.err != nil {
			t.Errorf("after the timeout: %+v", r)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the timeout took %v", d)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		for _, r := range dbl.Requests() {
			if strings.HasSuffix(r.Path, "/process/execute") {
				t.Errorf("%s %s: the client used /process/execute", r.Method, r.Path)
			}
		}
		if n := len(dbl.Sandbox(m.ID()).Sessions()); n != 0 {
			t.Errorf("%d sessions left", n)
		}
	})
}

// TestDestroyedMidCommand destroys the sandbox from outside while a
// command runs: the command's streams and Wait fail, naming the cause.
func TestDestroyedMidCommand(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, nil)
	m := create(t, s, nil)
	p, err := m.Start(context.Background(), remote.Command{Args: []string{"sh", "-c", "echo started; sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 8)
	if _, err := io.ReadFull(p.Stdout(), line); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dbl.DestroyFromOutside(m.ID())
	r := finish(t, p, nil)
	if !errors.Is(r.err, ErrSandboxGone) || !strings.Contains(r.err.Error(), "destroyed while") {
		t.Errorf("after the sandbox went: %+v", r)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("noticed after %v", d)
	}
	_, err = m.Start(context.Background(), remote.Command{Args: []string{"true"}})
	if !errors.Is(err, ErrSandboxGone) {
		t.Errorf("Start in a destroyed sandbox: %v", err)
	}
	if err := m.Upload(context.Background(), "/tmp/x", strings.NewReader("x")); !errors.Is(err, ErrSandboxGone) {
		t.Errorf("Upload to a destroyed sandbox: %v", err)
	}
}

// TestCredentials covers refused credentials (whose errors never show
// the key, even when the service echoes it).
func TestCredentials(t *testing.T) {
	dbl := daytonadouble.New(t)
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		dbl.FailAuth(status)
		s := newService(t, dbl, nil)
		_, err := s.Create(context.Background(), remote.CreateRequest{})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("Create with refused credentials (%d): %v", status, err)
		}
		if strings.Contains(err.Error(), dbl.APIKey) {
			t.Errorf("the error shows the key: %v", err)
		}
		if !strings.Contains(err.Error(), http.StatusText(status)) && !strings.Contains(err.Error(), "403") {
			t.Errorf("the error does not say %d: %v", status, err)
		}
		_, err = s.List(context.Background(), nil)
		if !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), dbl.APIKey) {
			t.Errorf("List: %v", err)
		}
	}
	dbl.FailAuth(0)
	s := newService(t, dbl, func(o *Options) { o.APIKey = "dtn_wrong_key" })
	if _, err := s.List(context.Background(), nil); !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), "dtn_wrong_key") {
		t.Errorf("List with a wrong key: %v", err)
	}
	if len(dbl.Sandboxes()) != 0 {
		t.Errorf("sandboxes were created: %v", dbl.Sandboxes())
	}
}

// TestRateLimit honours Retry-After, within bounds.
func TestRateLimit(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, nil)

	dbl.RateLimit(2, "1")
	start := time.Now()
	if _, err := s.List(context.Background(), nil); err != nil {
		t.Fatalf("List after two 429s: %v", err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("List returned after %v: Retry-After: 1 was not waited for twice", d)
	}
	var statuses []int
	for _, r := range dbl.Requests() {
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 3 || statuses[0] != 429 || statuses[1] != 429 || statuses[2] != 200 {
		t.Errorf("statuses %v", statuses)
	}

	// Bounded: at most MaxRetries retries, each wait at most MaxRetryWait.
	s = newService(t, dbl, func(o *Options) { o.MaxRetries = 2; o.MaxRetryWait = 100 * time.Millisecond })
	dbl.RateLimit(10, "3600")
	start = time.Now()
	_, err := s.Create(context.Background(), remote.CreateRequest{})
	var apiErr *APIError
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &apiErr) || apiErr.Attempts != 3 {
		t.Fatalf("Create under a long rate limit: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v", d)
	}
	dbl.RateLimit(0, "")
	if len(dbl.Sandboxes()) != 0 {
		t.Errorf("sandboxes were created: %v", dbl.Sandboxes())
	}
}

// TestBuildFailure reports the service's reason and leaves nothing.
func TestBuildFailure(t *testing.T) {
	dbl := daytonadouble.New(t)
	dbl.FailBuilds("failed to pull image nosuch/image:1: manifest unknown")
	s := newService(t, dbl, func(o *Options) { o.Image = "nosuch/image:1" })
	_, err := s.Create(context.Background(), remote.CreateRequest{})
	if !errors.Is(err, ErrBuildFailed) || !strings.Contains(err.Error(), "manifest unknown") || !strings.Contains(err.Error(), "build_failed") {
		t.Fatalf("Create: %v", err)
	}
	if len(dbl.Sandboxes()) != 0 || len(dbl.Docker().Left(t)) != 0 {
		t.Errorf("left: %v sandboxes, %v containers", dbl.Sandboxes(), dbl.Docker().Left(t))
	}
}

// TestCreateCancelled cancels a creation mid-way, and lets one time out:
// the sandbox the service made is destroyed before Create returns.
func TestCreateCancelled(t *testing.T) {
	dbl := daytonadouble.New(t)
	dbl.CreateDelay(3 * time.Second)
	s := newService(t, dbl, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := s.Create(ctx, remote.CreateRequest{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create: %v", err)
	}
	if n := len(dbl.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left after a cancelled Create", n)
	}

	s = newService(t, dbl, func(o *Options) { o.CreateTimeout = 500 * time.Millisecond })
	_, err = s.Create(context.Background(), remote.CreateRequest{})
	if err == nil || !strings.Contains(err.Error(), "did not start within 500ms") || !strings.Contains(err.Error(), "last state pending_build") {
		t.Fatalf("Create: %v", err)
	}
	if n := len(dbl.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left after a Create that timed out", n)
	}
	time.Sleep(3 * time.Second) // past the double's 3 s create delay: a sandbox it made late would show
	if left := dbl.Docker().Left(t); len(left) != 0 {
		t.Errorf("containers left: %v", left)
	}
}

// noise is a reproducible stream of n pseudo-random bytes, made as it is
// read.
type noise struct {
	n, x uint64
}

func (r *noise) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(uint64(len(p)), r.n)]
	for i := range p {
		r.x ^= r.x << 13
		r.x ^= r.x >> 7
		r.x ^= r.x << 17
		p[i] = byte(r.x)
	}
	r.n -= uint64(len(p))
	return len(p), nil
}

// TestFilesStreamed uploads and downloads a 20 MB file, checking that
// neither is held in memory, and the errors of missing files.
func TestFilesStreamed(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, nil)
	m := create(t, s, nil)
	ctx := context.Background()
	const size = 20 << 20

	// Warm up the connections, so that their buffers are not counted.
	if err := m.Upload(ctx, "warm", strings.NewReader("x")); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if rc, err := m.Download(ctx, "warm"); err != nil {
		t.Fatalf("Download: %v", err)
	} else {
		_, _ = io.Copy(io.Discard, rc)
		rc.Close()
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sent := sha256.New()
	if err := m.Upload(ctx, "big.bin", io.TeeReader(&noise{n: size, x: 42}, sent)); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	rc, err := m.Download(ctx, daytonadouble.Home+"/big.bin")
	if err != nil {
		t.Fatalf("Download: %v", err)
	}
	got := sha256.New()
	n, err := io.Copy(got, rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	runtime.ReadMemStats(&after)
	if err != nil || n != size {
		t.Fatalf("Download: %d bytes, %v", n, err)
	}
	if !bytes.Equal(sent.Sum(nil), got.Sum(nil)) {
		t.Fatal("the downloaded file differs from the uploaded one")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d MB uploaded and downloaded with %.1f MB allocated", size>>20, float64(alloc)/(1<<20))
	if alloc > size/4 {
		t.Errorf("%d bytes allocated to move %d bytes each way: the file was buffered", alloc, size)
	}
	if r := run(t, m, remote.Command{Args: []string{"sh", "-c", "wc -c < big.bin"}}, nil); strings.TrimSpace(r.stdout) != "20971520" {
		t.Errorf("the size in the sandbox: %+v", r)
	}

	// Replacing a file, and errors.
	if err := m.Upload(ctx, "/tmp/f", strings.NewReader("first")); err != nil {
		t.Fatal(err)
	}
	if err := m.Upload(ctx, "/tmp/f", strings.NewReader("second")); err != nil {
		t.Fatal(err)
	}
	if rc, err := m.Download(ctx, "/tmp/f"); err != nil {
		t.Fatal(err)
	} else if b, _ := io.ReadAll(rc); string(b) != "second" {
		t.Errorf("replaced file: %q", b)
	}
	if _, err := m.Download(ctx, "no-such-file"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Download of a missing file: %v", err)
	}
	if _, err := m.Download(ctx, "/tmp"); err == nil {
		t.Error("Download of a directory succeeded")
	}
	if err := m.Upload(ctx, "/no/such/dir/f", strings.NewReader("x")); err == nil {
		t.Error("Upload into a missing directory succeeded")
	}
}

// TestDoubleRejectsMalformedRequests sends requests that do not match
// the published API straight to the double, which refuses and records
// them: the client's tests would fail on such a request.
func TestDoubleRejectsMalformedRequests(t *testing.T) {
	dbl := daytonadouble.New(t)
	s := newService(t, dbl, nil)
	m := create(t, s, nil)
	send := func(method, url, body string, header map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+dbl.APIKey)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, method, url, body string
		header                  map[string]string
		want                    string
	}{
		{"label not a string", "POST", dbl.URL + "/sandbox", `{"labels": {"a": 1}}`, nil, "labels"},
		{"cpu not an integer", "POST", dbl.URL + "/sandbox", `{"cpu": "two"}`, nil, "cpu"},
		{"no body", "POST", dbl.URL + "/sandbox", ``, nil, "body"},
		{"no credentials", "GET", dbl.URL + "/sandbox", ``, map[string]string{"Authorization": "Basic eDp5"}, "security"},
		{"limit out of range", "GET", dbl.URL + "/sandbox?limit=1000", ``, nil, "limit"},
		{"exec without command", "POST", dbl.ToolboxURL() + "/" + m.ID() + "/process/session/s/exec", `{"runAsync": true}`, nil, "command"},
		{"session id not a string", "POST", dbl.ToolboxURL() + "/" + m.ID() + "/process/session", `{"sessionId": 7}`, nil, "sessionId"},
		{"no such operation", "POST", dbl.URL + "/sandbox/x/teleport", `{}`, nil, "no operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status := send(tc.method, tc.url, tc.body, tc.header); status < 400 {
				t.Errorf("status %d", status)
			}
			errs := dbl.TakeErrors()
			if len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
				t.Fatalf("recorded %q, want one error about %q", errs, tc.want)
			}
			t.Logf("recorded: %.300s", errs[0])
		})
	}
	// The client's own requests passed.
	if errs := dbl.Errors(); len(errs) != 0 {
		t.Errorf("errors: %q", errs)
	}
}

// TestNetworkFailures covers requests that get no answer, downloads
// that stall, output streams that break and create answers that come
// after the caller gave up.
func TestNetworkFailures(t *testing.T) {
	dbl := daytonadouble.New(t)
	ctx := context.Background()

	t.Run("no answer", func(t *testing.T) {
		s := newService(t, dbl, func(o *Options) { o.RequestTimeout = 300 * time.Millisecond; o.MaxRetries = 1 })
		dbl.Stall(1)
		if _, err := s.List(ctx, nil); err != nil {
			t.Errorf("List after one stalled request: %v", err)
		}
		dbl.Stall(2)
		start := time.Now()
		_, err := s.List(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
			t.Errorf("List with every request stalled: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("gave up after %v", d)
		}
		// A create is not repeated (it may have been carried out); a
		// sandbox of its name would be destroyed.
		dbl.Stall(1)
		if _, err := s.Create(ctx, remote.CreateRequest{}); err == nil || !strings.Contains(err.Error(), "no answer within") {
			t.Errorf("Create with its request stalled: %v", err)
		}
		dbl.Stall(0)
		if n := len(dbl.Sandboxes()); n != 0 {
			t.Errorf("%d sandboxes left", n)
		}
	})

	// The upload that prepares the stalled download runs under the
	// default idle bound, so that a loaded machine cannot stall it; from
	// then on the bound is 500 ms.
	s := newService(t, dbl, nil)
	m := create(t, s, nil)
	if err := m.Upload(ctx, "f", io.LimitReader(&noise{n: 1 << 20, x: 1}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	s.opts.IdleTimeout = 500 * time.Millisecond

	t.Run("download stalls", func(t *testing.T) {
		dbl.StallDownloads(1000)
		defer dbl.StallDownloads(-1)
		rc, err := m.Download(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		start := time.Now()
		n, err := io.Copy(io.Discard, rc)
		if n != 1000 || err == nil || !strings.Contains(err.Error(), "no progress for 500ms") {
			t.Errorf("read %d bytes, %v", n, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("gave up after %v", d)
		}
	})

	t.Run("output stream breaks", func(t *testing.T) {
		p, err := m.Start(ctx, remote.Command{Args: []string{"sh", "-c", "echo one; echo err1 >&2; read -r x; echo two; echo err2 >&2"}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		// Both streams are drained at once, as the contract asks: a
		// stream nobody reads holds the other.
		var stderr bytes.Buffer
		errDone := make(chan error, 1)
		go func() { _, err := io.Copy(&stderr, p.Stderr()); errDone <- err }()
		line := make([]byte, 4)
		if _, err := io.ReadFull(p.Stdout(), line); err != nil || string(line) != "one\n" {
			t.Fatalf("read %q, %v", line, err)
		}
		// Go on once the double has ended the open log stream: a
		// WebSocket upgrade is recorded when its stream ends.
		streamsEnded := func() (n int) {
			for _, r := range dbl.Requests() {
				if r.Status == http.StatusSwitchingProtocols && strings.HasSuffix(r.Path, "/logs") {
					n++
				}
			}
			return n
		}
		before := streamsEnded()
		dbl.CutLogStreams()
		for deadline := time.Now().Add(30 * time.Second); streamsEnded() == before; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the double did not end the command's log stream within 30 s")
			}
		}
		if _, err := p.Stdin().Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		_, outErr := io.Copy(&stdout, p.Stdout())
		errErr := <-errDone
		code, err := p.Wait()
		if err == nil {
			err = errors.Join(outErr, errErr)
		}
		r := result{"one\n" + stdout.String(), stderr.String(), code, err}
		if r.err != nil || r.code != 0 || r.stdout != "one\ntwo\n" || r.stderr != "err1\nerr2\n" {
			t.Errorf("after the stream broke: %+v", r)
		}
		// The double records a request when its handler returns, which
		// for the second stream can come after the client saw its end.
		reopened := 0
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			reopened = 0
			for _, rq := range dbl.Requests() {
				if rq.Operation == "GetSessionCommandLogs" && strings.Contains(rq.Path, "/command/") {
					reopened++
				}
			}
			if reopened >= 2 || time.Now().After(deadline) {
				break
			}
		}
		if reopened < 2 {
			t.Errorf("the log stream was opened %d times", reopened)
		}
	})

	t.Run("create answer too late", func(t *testing.T) {
		dbl.CreateAnswerDelay(time.Second)
		defer dbl.CreateAnswerDelay(0)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, cancel)
		before := len(dbl.Sandboxes())
		if _, err := s.Create(cctx, remote.CreateRequest{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Create: %v", err)
		}
		if n := len(dbl.Sandboxes()); n != before {
			t.Errorf("%d sandboxes, want %d: the one made for a cancelled Create is left", n, before)
		}
	})
}
