package docker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// attacker runs in the container for the whole test: it swaps every new
// staging directory for a link to a host directory (target, a path that
// means nothing inside the container but everything to a host that
// follows the link).
const attacker = `while true; do
  for d in /tmp/aml/s-*; do
    if [ -d "$d" ] && [ ! -L "$d" ]; then rm -rf "$d" && ln -s "$0" "$d" && echo swapped >> /workspace/attacks; fi
  done
done`

// TestPlantedLinks: a process in the container that plants links in place
// of the stagings the host makes makes the host write, read or chmod
// nothing outside the staging area, and a command's timeout_ms is still
// honoured.
func TestPlantedLinks(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	dir := t.TempDir()
	rt := acquire(t, p, dir, eval.ReadWrite).Runtime()
	ctx := context.Background()
	target := t.TempDir() // a host directory the container must not reach
	if err := os.Chmod(target, 0o700); err != nil {
		t.Fatal(err)
	}
	proc, err := rt.Spawn(ctx, "sh", []string{"-c", attacker, target}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Kill()
	// Stagings made, left for the attacker to swap, then written to and
	// released, as an agent's staging is filled while its prompt renders.
	failed := 0
	var stagings []eval.FileStaging
	for range 100 {
		fs, err := rt.CreateFileStaging(ctx)
		if err != nil {
			failed++
			continue
		}
		stagings = append(stagings, fs)
	}
	waitAttacks(t, dir, "swapped", len(stagings))
	for i, fs := range stagings {
		if err := fs.WriteFile(ctx, "skills/x/SKILL.md", []byte("staged")); err != nil {
			failed++
		}
		if err := fs.Release(ctx); err != nil {
			t.Errorf("staging %d: release: %v", i, err)
		}
	}
	// A command that outlives its timeout ends at it.
	start := time.Now()
	_, err = rt.Exec(ctx, "sleep", []string{"60"}, eval.ExecOptions{Timeout: 2 * time.Second})
	if err == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("a command with timeout 2 s under attack: %v after %s", err, time.Since(start))
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 || info.Mode().Perm() != 0o700 {
		t.Fatalf("the host wrote %d entries into %s (mode %v) through planted links", len(entries), target, info.Mode().Perm())
	}
	attacks, _ := os.ReadFile(filepath.Join(dir, "attacks"))
	planted := len(attacks) / len("swapped\n")
	if planted == 0 {
		t.Fatal("the attacker planted no link: the test proved nothing")
	}
	t.Logf("100 stagings: %d links planted in their place, %d writes refused, 0 host files written; the timeout ended the command after %s",
		planted, failed, time.Since(start).Round(time.Millisecond))
}

// plants fill the shared staging area with what once made a host hang or
// read without end: links to a device and to host files, device nodes and
// FIFOs, under every name a host file could have had there.
var plants = map[string]string{
	"links to /dev/zero":  `ln -sf /dev/zero "$f"`,
	"links to host files": `ln -sf "$0" "$f"`,
	"device nodes":        `mknod "$f" c 1 5`,
	"FIFOs":               `mkfifo "$f"`,
}

// TestPlantedFiles: whatever a container process plants in the staging
// area, ten commands at once still end at their timeout_ms (the process id
// the host kills by comes in the exec's stream, not from a file there),
// the host reads and changes no file outside the staging area, and
// nothing is left after the release.
func TestPlantedFiles(t *testing.T) {
	for name, plant := range plants {
		t.Run(name, func(t *testing.T) {
			p, _ := newProvider(t, docker.Options{})
			dir := t.TempDir()
			lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "run-" + t.Name(),
				Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
			if err != nil {
				t.Fatal(err)
			}
			rt := lease.Runtime()
			ctx := context.Background()
			secret := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(secret)
			script := `mkdir -p /tmp/aml/.pids; i=0
while true; do
  i=$((i+1))
  for f in /tmp/aml/.pids/x$i /tmp/aml/p$i; do ` + plant + ` 2>/dev/null && echo planted >> /workspace/attacks; done
  if [ $i -ge 100 ]; then i=0; rm -rf /tmp/aml/.pids/* /tmp/aml/p*; fi
done`
			attacker, err := rt.Spawn(ctx, "sh", []string{"-c", script, secret}, eval.ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer attacker.Kill()
			waitAttacks(t, dir, "planted", 1)
			const timeout = time.Second
			var wg sync.WaitGroup
			errs := make([]error, 10)
			took := make([]time.Duration, 10)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					_, errs[i] = rt.Exec(ctx, "sleep", []string{"60"}, eval.ExecOptions{Timeout: timeout})
					took[i] = time.Since(start)
				}()
			}
			wg.Wait()
			slowest := time.Duration(0)
			for i, err := range errs {
				if err == nil || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("command %d under attack: %v, want its timeout", i, err)
				}
				slowest = max(slowest, took[i])
			}
			// The killed commands are gone from the container (a busy
			// engine may take a moment to run the kills, which go on
			// after the commands returned).
			if n := running(t, rt, "sleep 60"); n != 0 {
				t.Errorf("%d timed-out commands still run in the container", n)
			}
			// timeout_ms, the 2 s kill wait, and room for a loaded machine;
			// a blocked read would be minutes.
			if slowest > timeout+2*time.Second+10*time.Second {
				t.Errorf("the slowest command ended after %v", slowest)
			}
			attacks, _ := os.ReadFile(filepath.Join(dir, "attacks"))
			planted := strings.Count(string(attacks), "planted")
			if planted == 0 {
				t.Fatal("the attacker planted nothing: the test proved nothing")
			}
			attacker.Kill()
			if err := lease.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			after, err := os.Stat(secret)
			if err != nil || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("the host file changed: %v %v → %v", err, before.Mode(), after.Mode())
			}
			if data, _ := os.ReadFile(secret); string(data) != "host secret" {
				t.Errorf("the host file now holds %q", data)
			}
			t.Logf("%d %s planted; 10 commands ended at their 1 s timeout, the slowest after %v; 0 host files read or changed",
				planted, name, slowest.Round(time.Millisecond))
		})
	}
}

// TestPidInTheStream: the process id the host kills by is the wrapper's
// line, which comes before anything the command writes: a command that
// prints other ids first is still the one killed at its timeout, and its
// own stderr reaches the caller byte for byte.
func TestPidInTheStream(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	rt := acquire(t, p, t.TempDir(), eval.ReadWrite).Runtime()
	ctx := context.Background()
	res, err := rt.Exec(ctx, "sh", []string{"-c", `echo 1 >&2; printf 'partial'>&2; echo out; exit 3`}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stderr) != "1\npartial" || string(res.Stdout) != "out\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3, \"out\\n\", \"1\\npartial\"", res.ExitCode, res.Stdout, res.Stderr)
	}
	start := time.Now()
	_, err = rt.Exec(ctx, "sh", []string{"-c", `echo 1 >&2; echo 7 >&2; sleep 60`}, eval.ExecOptions{Timeout: time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the command ended with %v, want its timeout", err)
	}
	if n := running(t, rt, "sleep 60"); n != 0 {
		t.Errorf("the timed-out command still runs in the container")
	}
	t.Logf("ended %v after it started", time.Since(start).Round(time.Millisecond))
}

// TestPlantedStagingLinkToFile: a staging swapped for a link to a 0600
// host file never makes the host change that file's mode or content.
func TestPlantedStagingLinkToFile(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	dir := t.TempDir()
	rt := acquire(t, p, dir, eval.ReadWrite).Runtime()
	ctx := context.Background()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	proc, err := rt.Spawn(ctx, "sh", []string{"-c", attacker, secret}, eval.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Kill()
	var stagings []eval.FileStaging
	for range 50 {
		if fs, err := rt.CreateFileStaging(ctx); err == nil {
			stagings = append(stagings, fs)
		}
	}
	waitAttacks(t, dir, "swapped", len(stagings))
	for _, fs := range stagings {
		_ = fs.WriteFile(ctx, "SKILL.md", []byte("staged"))
		_ = fs.Release(ctx)
	}
	attacks, _ := os.ReadFile(filepath.Join(dir, "attacks"))
	if len(attacks) == 0 {
		t.Fatal("the attacker planted no link: the test proved nothing")
	}
	info, err := os.Stat(secret)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the host file's mode is now %v (%v), want 0600", info.Mode().Perm(), err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "host secret" {
		t.Fatalf("the host file now holds %q", data)
	}
	t.Logf("50 stagings, %d swapped for links to a 0600 host file: its mode and content unchanged", strings.Count(string(attacks), "swapped"))
}

// TestSocketDirectoryReadOnly: the directory where the host serves the
// container its unix sockets is one the container cannot write: it can
// neither replace a socket nor plant a link there, yet it sees the
// socket (agents in containers connect to the tool bridge's through it:
// the Codex and OpenCode container tests).
func TestSocketDirectoryReadOnly(t *testing.T) {
	p, _ := newProvider(t, docker.Options{})
	rt := acquire(t, p, t.TempDir(), eval.ReadWrite).Runtime()
	host, guest := rt.(eval.GuestRuntime).SharedDirectory()
	if guest != docker.SocketMount || strings.HasPrefix(guest, docker.StagingMount) {
		t.Fatalf("sockets are served at %s, want %s, apart from the staging mount", guest, docker.SocketMount)
	}
	ln, err := net.Listen("unix", filepath.Join(host, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(filepath.Join(host, "s.sock"), 0o777); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, attack := range []string{
		`rm -f /opt/aml/run/s.sock`,
		`ln -s /etc/passwd /opt/aml/run/planted`,
		`mkfifo /opt/aml/run/fifo`,
		`touch /opt/aml/run/file`,
	} {
		res, err := rt.Exec(ctx, "sh", []string{"-c", attack}, eval.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 {
			t.Errorf("%q succeeded in the socket directory", attack)
		}
	}
	entries, _ := os.ReadDir(host)
	if len(entries) != 1 || entries[0].Name() != "s.sock" {
		t.Errorf("the socket directory holds %v, want only the host's socket", entries)
	}
	res, err := rt.Exec(ctx, "sh", []string{"-c", `test -S /opt/aml/run/s.sock`}, eval.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the container does not see the socket: %v %v", res, err)
	}
}

// waitAttacks waits until the attacker in the container has logged word
// to /workspace/attacks n times: until it swapped every staging made, or
// planted its first file. Should it never get there, it fails if the
// attacker did nothing at all, and else lets the test go on with what it
// did.
func waitAttacks(t *testing.T, dir, word string, n int) {
	t.Helper()
	count := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "attacks"))
		return strings.Count(string(b), word)
	}
	deadline := time.Now().Add(30 * time.Second)
	for count() < n {
		if time.Now().After(deadline) {
			if count() == 0 {
				t.Fatalf("the attacker logged no %q within 30 s", word)
			}
			t.Logf("the attacker logged %q %d times of %d within 30 s", word, count(), n)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRunning waits until a process whose command line is args runs in
// the container.
func waitRunning(t *testing.T, rt eval.SandboxRuntime, args string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := rt.Exec(context.Background(), "sh", []string{"-c", "ps -o args | grep -cx \"$0\" || true", args}, eval.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q did not start in the container within 30 s", args)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running counts the processes in the container whose command line is
// args, waiting up to thirty seconds (a busy engine runs kills late) for
// it to become 0.
func running(t *testing.T, rt eval.SandboxRuntime, args string) int {
	t.Helper()
	n := -1
	for range 300 {
		res, err := rt.Exec(context.Background(), "sh", []string{"-c", "ps -o args | grep -cx \"$0\" || true", args}, eval.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, err = strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err != nil {
			t.Fatalf("ps: %q", res.Stdout)
		}
		if n == 0 {
			return 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}
