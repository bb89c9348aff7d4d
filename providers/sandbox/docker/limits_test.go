package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestLimits: a fork loop stops at the default pid limit and a memory hog
// at memory=, inside the container, while the host and the lease go on;
// read_only_rootfs keeps the image read-only but /workspace and /tmp
// writable; cap_drop takes capabilities away.
func TestLimits(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, rt eval.SandboxRuntime, script string) *eval.ExecResult {
		t.Helper()
		r, err := rt.Exec(ctx, "sh", []string{"-c", script}, eval.ExecOptions{Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		return r
	}

	t.Run("fork loop", func(t *testing.T) {
		p, _ := newProvider(t, docker.Options{PidsLimit: 64})
		dir := t.TempDir()
		rt := acquire(t, p, dir, eval.ReadWrite).Runtime()
		// Start processes until the kernel refuses one, noting the
		// count after each: with the bound it stops near it, not at the
		// host's limit (the shell may die when a fork fails).
		rt.Exec(ctx, "sh", []string{"-c", `i=0; while [ $i -lt 500 ]; do sleep 3 & i=$((i+1)); echo $i > /workspace/n; done`}, eval.ExecOptions{Timeout: 2 * time.Minute})
		data, err := os.ReadFile(filepath.Join(dir, "n"))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(string(data)), &n); err != nil {
			t.Fatalf("count %q: %v", data, err)
		}
		if n >= 500 || n < 10 {
			t.Fatalf("a shell started %d processes under pids_limit 64", n)
		}
		// The lease works again once they are gone (each sleeps 3 s).
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			r, err := rt.Exec(ctx, "echo", []string{"alive"}, eval.ExecOptions{Timeout: 2 * time.Minute})
			if err == nil && r.ExitCode == 0 && strings.TrimSpace(string(r.Stdout)) == "alive" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lease a minute after the fork loop: %v %+v", err, r)
			}
		}
		t.Logf("the fork loop stopped after %d processes", n)
	})

	t.Run("default pid limit", func(t *testing.T) {
		p, _ := newProvider(t, docker.Options{})
		rt := acquire(t, p, t.TempDir(), eval.ReadWrite).Runtime()
		r := run(t, rt, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max")
		if got := strings.TrimSpace(string(r.Stdout)); got != fmt.Sprint(docker.DefaultPidsLimit) {
			t.Fatalf("pids.max in a default container: %q, want %d", got, docker.DefaultPidsLimit)
		}
	})

	t.Run("memory hog", func(t *testing.T) {
		p, _ := newProvider(t, docker.Options{Memory: 32 << 20})
		rt := acquire(t, p, t.TempDir(), eval.ReadWrite).Runtime()
		// Hold 256 MiB in the shell's memory: the container's bound ends
		// it (the kernel's OOM killer, exit 137).
		r, err := rt.Exec(ctx, "sh", []string{"-c", `x=$(head -c 268435456 /dev/zero | tr '\0' x); echo survived ${#x}`}, eval.ExecOptions{Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode == 0 || strings.Contains(string(r.Stdout), "survived") {
			t.Fatalf("256 MiB held under memory=32m: exit %d, %q", r.ExitCode, r.Stdout)
		}
		if r := run(t, rt, "echo alive"); strings.TrimSpace(string(r.Stdout)) != "alive" {
			t.Fatalf("the lease after the memory hog: %q", r.Stdout)
		}
		// Commands are the OOM killer's first choice, the keeper its last.
		adj := strings.Fields(string(run(t, rt, "cat /proc/self/oom_score_adj /proc/1/oom_score_adj").Stdout))
		if len(adj) != 2 || adj[0] != "1000" || adj[1] == "1000" {
			t.Fatalf("oom_score_adj of a command and of the container's init: %q, want 1000 and lower", adj)
		}
		t.Logf("the memory hog ended with exit %d", r.ExitCode)
	})

	t.Run("read-only root and dropped capabilities", func(t *testing.T) {
		p, _ := newProvider(t, docker.Options{ReadOnlyRootFS: true, CapDrop: []string{"ALL"}})
		dir := t.TempDir()
		rt := acquire(t, p, dir, eval.ReadWrite).Runtime()
		r := run(t, rt, `touch /etc/x 2>/dev/null && echo root-writable; echo w > /workspace/w && echo workspace-ok; echo t > /tmp/t && echo tmp-ok; chown 1:1 /workspace/w 2>/dev/null && echo chown-ok; true`)
		out := string(r.Stdout)
		if strings.Contains(out, "root-writable") || !strings.Contains(out, "workspace-ok") || !strings.Contains(out, "tmp-ok") || strings.Contains(out, "chown-ok") {
			t.Fatalf("read_only_rootfs with cap_drop ALL: %q", out)
		}
	})
}
