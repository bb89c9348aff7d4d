package docker_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
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
// follows the link), and every pid file for a FIFO.
const attacker = `while true; do
  for d in /tmp/aml/s-*; do
    if [ -d "$d" ] && [ ! -L "$d" ]; then rm -rf "$d" && ln -s "$0" "$d" && echo swapped >> /workspace/attacks; fi
  done
  for f in /tmp/aml/.pids/*; do
    if [ -f "$f" ] && [ ! -p "$f" ]; then rm -f "$f" && mkfifo "$f"; fi
  done
done`

// TestPlantedLinks: a process in the container that plants links in place
// of the stagings the host makes, and FIFOs in place of pid files, makes
// the host write, read or chmod nothing outside the staging area, and a
// command's timeout_ms is still honoured.
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
	time.Sleep(2 * time.Second)
	for i, fs := range stagings {
		if err := fs.WriteFile(ctx, "skills/x/SKILL.md", []byte("staged")); err != nil {
			failed++
		}
		if err := fs.Release(ctx); err != nil {
			t.Errorf("staging %d: release: %v", i, err)
		}
	}
	// A command that outlives its timeout ends at it, even when its pid
	// file is a FIFO.
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

// pidAttacks replace every pid file the wrapper writes: with a link to a
// device that never ends, a link to a host file (a path that means
// something only to a host that follows it), a device node the container
// made, or a FIFO.
var pidAttacks = map[string]string{
	"link to /dev/zero":   `ln -sf /dev/zero "$f"`,
	"link to a host file": `ln -sf "$0" "$f"`,
	"device node":         `mknod "$f" c 1 5`,
	"FIFO":                `mkfifo "$f"`,
}

// TestPlantedPidFiles: whatever a container process puts in place of the
// pid files (links to devices and host files, device nodes, FIFOs), every
// command's timeout_ms ends it, the host reads and changes no file
// outside the staging area, and nothing is left after the release.
func TestPlantedPidFiles(t *testing.T) {
	for name, plant := range pidAttacks {
		t.Run(name, func(t *testing.T) {
			p, _ := newProvider(t, docker.Options{})
			dir := t.TempDir()
			lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "run-" + t.Name(),
				Workspace: &eval.WorkspaceMaterialization{Directory: dir}})
			if err != nil {
				t.Fatal(err)
			}
			rt := lease.Runtime()
			shared, _ := rt.(eval.GuestRuntime).SharedDirectory()
			ctx := context.Background()
			secret := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(secret)
			script := `while true; do
  for f in /tmp/aml/.pids/*; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then rm -f "$f" && ` + plant + ` && echo planted >> /workspace/attacks; fi
  done
done`
			attacker, err := rt.Spawn(ctx, "sh", []string{"-c", script, secret}, eval.ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer attacker.Kill()
			// Ten commands at once, each past its timeout.
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
			if _, err := os.Stat(shared); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the staging area %s is left after the release: %v", shared, err)
			}
			t.Logf("%d pid files replaced (%s); 10 commands ended at their 1 s timeout, the slowest after %v; 0 host files read or changed; nothing left",
				planted, name, slowest.Round(time.Millisecond))
		})
	}
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
	time.Sleep(2 * time.Second)
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
