package docker_test

import (
	"context"
	"os"
	"path/filepath"
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
