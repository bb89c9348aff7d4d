//go:build linux

package cli

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
	"github.com/aml-go/aml/internal/s3test"
	aws3 "github.com/aml-go/aml/providers/workspace/s3"
)

// TestS3CrashDuringSave: aml run is SIGKILLed at random points of runs
// that write a generation of files into an S3 workspace and save it (20
// trials against gofakes3 in this process). After every kill the index is
// valid and the current revision loads, and it is one whole generation:
// the last one saved, never a mix.
func TestS3CrashDuringSave(t *testing.T) {
	t.Parallel() // its own S3 server, directory and workspace
	bin := buildAML(t)
	url, cli := s3test.Server(t, "work")
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
	env := append(append(os.Environ(), "S3_ENDPOINT="+url), s3test.Env(dir)...)
	// The kills land in the time an uninterrupted run takes (and a bit
	// more).
	ref := exec.Command(bin, "run", "--quiet", wf)
	ref.Dir, ref.Env = dir, append(env, "GEN=z")
	started := time.Now()
	if out, err := ref.CombinedOutput(); err != nil {
		t.Fatalf("the uninterrupted run: %v\n%s", err, out)
	}
	full := time.Since(started)
	if got := current(-1); got != "z" {
		t.Fatalf("the uninterrupted run saved generation %q", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	last, killed, completed := "z", 0, 0
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
		// Every fifth run is not killed, so that saves complete after
		// killed ones whatever the machine's load makes a run take.
		killAfter := time.Duration(rng.Int64N(int64(full) * 6 / 5))
		if trial%5 == 4 {
			killAfter = 10 * time.Minute
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("trial %d: the run failed on its own: %v\n%s", trial, err, stderr.String())
			}
			completed++
		case <-time.After(killAfter):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed++
		}
		got := current(trial)
		if got != last && got != gen {
			t.Fatalf("trial %d: the current revision holds generation %q, want the last saved %q or this run's %q", trial, got, last, gen)
		}
		last = got
		// A killed writer's lock stays behind; its holder is gone, so the
		// next trial's run takes it over at once.
	}
	t.Logf("an uninterrupted run takes %s; %d runs killed, %d completed; the last saved generation is %q", full, killed, completed, last)
	if killed == 0 || completed == 0 {
		t.Errorf("%d runs killed and %d completed: the trials should do both", killed, completed)
	}
}

// TestS3KilledMultipartUploads: runs SIGKILLed in the middle of a
// multipart save (a 40 MB incompressible workspace, in 16 MiB parts)
// leave incomplete uploads, invisible to listings. The next acquisition,
// which takes the dead writer's lock over at once, aborts them, and so
// does aml workspace prune s3://.
func TestS3KilledMultipartUploads(t *testing.T) {
	t.Parallel() // its own S3 server and directory
	bin := buildAML(t)
	url, cli := s3test.Server(t, "work")
	ctx := context.Background()
	dir := t.TempDir()
	wf := filepath.Join(dir, "big.star")
	src := `store = s3_workspace(bucket = "work", endpoint = env("S3_ENDPOINT"), force_path_style = True)

def main():
    return workspace(
        sandbox(script("head -c 40000000 /dev/urandom > big.bin; echo ok", shell = "sh"), provider = local_sandbox(), access = "read-write"),
        id = "big", provider = store, save = True,
    )
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(append(os.Environ(), "S3_ENDPOINT="+url), s3test.Env(dir)...)
	uploads := func() int {
		t.Helper()
		out, err := cli.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("work")})
		if err != nil {
			if strings.Contains(err.Error(), "NoSuchUpload") {
				return 0 // gofakes3's answer when there is none
			}
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	provider, err := aws3.New(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	trials := 4
	for trial := range trials {
		cmd := exec.Command(bin, "run", "--quiet", wf)
		cmd.Dir, cmd.Env = dir, env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Kill once an upload is under way.
		deadline := time.Now().Add(60 * time.Second)
		for uploads() == 0 {
			select {
			case err := <-done:
				t.Fatalf("trial %d: the run ended before its upload started: %v\n%s", trial, err, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: no multipart upload started within 60 s\n%s", trial, stderr.String())
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if n := uploads(); n == 0 {
			t.Fatalf("trial %d: the killed save left no incomplete upload: the trial tests nothing", trial)
		}
		if trial%2 == 0 {
			// The next acquisition of the workspace.
			l, err := provider.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "big", Lock: true, EvaluationID: "next"})
			if err != nil {
				t.Fatalf("trial %d: acquiring after the kill: %v", trial, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			prune := exec.Command(bin, "workspace", "prune", "s3://work", "--endpoint", url)
			prune.Dir, prune.Env = dir, env
			out, err := prune.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "incomplete upload of revisions/") {
				t.Fatalf("trial %d: aml workspace prune s3://work: %v\n%s", trial, err, out)
			}
		}
		if n := uploads(); n != 0 {
			t.Fatalf("trial %d: %d incomplete uploads of the killed writer remain", trial, n)
		}
	}
}
