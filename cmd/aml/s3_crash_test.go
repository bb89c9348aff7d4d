//go:build linux

package main

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/tests3"
	aws3 "github.com/aml-go/aml/providers/workspace/s3"
)

// TestS3CrashDuringSave: aml run is SIGKILLed at random points of runs
// that write a generation of files into an S3 workspace and save it (20
// trials against gofakes3 in this process). After every kill the index is
// valid and the current revision loads, and it is one whole generation:
// the last one saved, never a mix.
func TestS3CrashDuringSave(t *testing.T) {
	bin := buildAML(t)
	url, cli := tests3.Server(t, "work")
	ctx := context.Background()
	dir := t.TempDir()
	wf := filepath.Join(dir, "gen.star")
	src := `store = s3_workspace(bucket = "work", endpoint = env("S3_ENDPOINT"), force_path_style = True)

def main():
    return workspace(
        sandbox(script("i=0; while [ $i -lt 40 ]; do head -c 20000 /dev/zero | tr '\\0' \"$GEN\" > f$i.txt; i=$((i+1)); done; echo $GEN", shell = "sh"), provider = local_sandbox(), access = "read-write"),
        id = "crash", provider = store, save = True,
    )
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := aws3.New(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	// current returns the generation the current revision holds ("" for
	// none), failing on a revision that does not load or mixes them.
	current := func(trial int) string {
		t.Helper()
		l, err := reader.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "crash", Load: &eval.WorkspaceLoad{Revision: "current"}})
		if err != nil {
			t.Fatalf("trial %d: the current revision does not load: %v", trial, err)
		}
		defer l.Release(ctx)
		entries, _ := os.ReadDir(l.Directory())
		gen := ""
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(l.Directory(), e.Name()))
			if err != nil || len(b) != 20000 {
				t.Fatalf("trial %d: %s: %d bytes, %v", trial, e.Name(), len(b), err)
			}
			if gen == "" {
				gen = string(b[:1])
			}
			if string(b[:1]) != gen || strings.Trim(string(b), gen) != "" {
				t.Fatalf("trial %d: the current revision mixes generations (%s has %q, others %q)", trial, e.Name(), b[:1], gen)
			}
		}
		if len(entries) != 0 && len(entries) != 40 {
			t.Fatalf("trial %d: the current revision has %d files, want 0 or 40", trial, len(entries))
		}
		return gen
	}
	env := append(append(os.Environ(), "S3_ENDPOINT="+url), tests3.Env(dir)...)
	rng := rand.New(rand.NewPCG(1, 2))
	last, killed, completed := "", 0, 0
	for trial := range 20 {
		gen := string(rune('a' + trial))
		cmd := exec.Command(bin, "run", "--quiet", wf)
		cmd.Dir = dir
		cmd.Env = append(env, "GEN="+gen)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("trial %d: the run failed on its own: %v\n%s", trial, err, stderr.String())
			}
			completed++
		case <-time.After(time.Duration(rng.IntN(250)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed++
		}
		got := current(trial)
		if got != last && got != gen {
			t.Fatalf("trial %d: the current revision holds generation %q, want the last saved %q or this run's %q", trial, got, last, gen)
		}
		last = got
		// A killed writer's lock stays until it is stale (20 minutes):
		// remove it, as the takeover would, for the next trial.
		_, _ = cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("work"), Key: aws.String("aml/workspaces/crash/lock.json")})
	}
	t.Logf("%d runs killed, %d completed; the last saved generation is %q", killed, completed, last)
	if killed == 0 {
		t.Errorf("no run was killed: the trials tested nothing")
	}
}
