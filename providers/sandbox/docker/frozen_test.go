package docker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/dockertest"
	"github.com/aml-go/aml/providers/sandbox/docker"
)

// TestFrozenDaemon: a dockerd frozen with SIGSTOP before an acquisition,
// during a command and during a release never holds the run for longer
// than the engine timeout (plus the kill wait for a command); every error
// names the call that got no answer, and a command's timeout_ms holds.
func TestFrozenDaemon(t *testing.T) {
	d := dockertest.PrivateDaemon(t, testImage)
	const bound = 2 * time.Second
	// slack covers scheduling on a loaded two-core machine; a hang
	// would be minutes, not seconds.
	const slack = 8 * time.Second
	newP := func(t *testing.T) *docker.Provider {
		p, err := docker.New(docker.Options{Client: d.Client, Image: testImage, EngineTimeout: bound})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	request := func(t *testing.T) *eval.SandboxAcquireRequest {
		return &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: ".", EvaluationID: "frozen",
			Workspace: &eval.WorkspaceMaterialization{Directory: t.TempDir()}}
	}
	timeoutOp := func(t *testing.T, err error, op string) {
		t.Helper()
		var te *docker.EngineTimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("error %v is not an engine timeout", err)
		}
		if te.Op != op || te.After != bound {
			t.Errorf("engine timeout names %q after %v, want %q after %v", te.Op, te.After, op, bound)
		}
		if !strings.Contains(err.Error(), op) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %q does not name %q or does not wrap the deadline", err, op)
		}
	}

	t.Run("before acquisition", func(t *testing.T) {
		p := newP(t)
		d.Freeze()
		defer d.Thaw()
		start := time.Now()
		lease, err := p.Acquire(context.Background(), request(t))
		took := time.Since(start)
		if err == nil {
			lease.Release(context.Background())
			t.Fatal("acquired a sandbox of a frozen daemon")
		}
		timeoutOp(t, err, "inspect image")
		if took > bound+slack {
			t.Errorf("the acquisition took %v, want about %v", took, bound)
		}
		t.Logf("frozen before acquisition: failed after %v: %v", took.Round(time.Millisecond), err)
	})

	t.Run("during a command", func(t *testing.T) {
		p := newP(t)
		lease, err := p.Acquire(context.Background(), request(t))
		if err != nil {
			t.Fatal(err)
		}
		const timeout = 3 * time.Second
		type result struct {
			err  error
			took time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			_, err := lease.Runtime().Exec(context.Background(), "sleep", []string{"600"}, eval.ExecOptions{Timeout: timeout})
			done <- result{err, time.Since(start)}
		}()
		waitRunning(t, lease.Runtime(), "sleep 600")
		d.Freeze()
		defer d.Thaw()
		var r result
		select {
		case r = <-done:
		case <-time.After(timeout + 2*time.Second + slack + time.Minute):
			t.Fatal("the command's timeout_ms did not end it under a frozen daemon")
		}
		if r.err == nil || !errors.Is(r.err, context.DeadlineExceeded) || !strings.Contains(r.err.Error(), "timed out after 3s") {
			t.Errorf("the command ended with %v, want its timeout", r.err)
		}
		if r.took > timeout+2*time.Second+slack {
			t.Errorf("the command ended after %v, want about %v (timeout_ms, then at most 2 s for the kill)", r.took, timeout)
		}
		t.Logf("frozen during a command with timeout_ms = 3000: ended after %v", r.took.Round(time.Millisecond))
		start = time.Now()
		err = lease.Release(context.Background())
		took := time.Since(start)
		timeoutOp(t, err, "remove container")
		if took > bound+slack {
			t.Errorf("the release took %v, want about %v", took, bound)
		}
		t.Logf("then released after %v: %v", took.Round(time.Millisecond), err)
		// What the frozen daemon kept is still there, labelled with this
		// process as its owner: the orphan report and the prune find it.
		d.Thaw()
		left := containersOf(t, d.Client)
		if len(left) != 1 {
			t.Errorf("the frozen daemon keeps %d containers, want the one it could not remove", len(left))
		}
	})

	t.Run("cancelled during a command", func(t *testing.T) {
		p := newP(t)
		lease, err := p.Acquire(context.Background(), request(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := lease.Runtime().Exec(ctx, "sleep", []string{"600"}, eval.ExecOptions{})
			done <- err
		}()
		waitRunning(t, lease.Runtime(), "sleep 600")
		d.Freeze()
		defer d.Thaw()
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("the cancelled command ended with %v", err)
			}
		case <-time.After(2*time.Second + slack + time.Minute):
			t.Fatal("cancelling did not end the command under a frozen daemon")
		}
		if took := time.Since(start); took > 2*time.Second+slack {
			t.Errorf("cancelling took %v, want at most the 2 s kill wait", took)
		}
		err = lease.Release(context.Background())
		timeoutOp(t, err, "remove container")
	})

	t.Run("during release", func(t *testing.T) {
		p := newP(t)
		lease, err := p.Acquire(context.Background(), request(t))
		if err != nil {
			t.Fatal(err)
		}
		res, err := lease.Runtime().Exec(context.Background(), "echo", []string{"ok"}, eval.ExecOptions{})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "ok" {
			t.Fatalf("echo: %v %v", res, err)
		}
		d.Freeze()
		defer d.Thaw()
		start := time.Now()
		err = lease.Release(context.Background())
		took := time.Since(start)
		timeoutOp(t, err, "remove container")
		if took > bound+slack {
			t.Errorf("the release took %v, want about %v", took, bound)
		}
		t.Logf("frozen during release: failed after %v", took.Round(time.Millisecond))
	})

	t.Run("setup past setup_timeout_ms", func(t *testing.T) {
		p, err := docker.New(docker.Options{Client: d.Client, Image: testImage, EngineTimeout: bound, Setup: "sleep 600", SetupTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		lease, err := p.Acquire(context.Background(), request(t))
		took := time.Since(start)
		if err == nil {
			lease.Release(context.Background())
			t.Fatal("a setup past its bound acquired a sandbox")
		}
		if !strings.Contains(err.Error(), "setup did not finish within 2s") || !strings.Contains(err.Error(), "setup_timeout_ms") {
			t.Errorf("error %q does not say that setup passed its bound", err)
		}
		if took > 2*time.Second+slack {
			t.Errorf("the acquisition took %v", took)
		}
		if left := containersOf(t, d.Client); len(left) != 0 {
			t.Errorf("a failed setup left %d containers", len(left))
		}
	})
}

// containersOf lists every container of the provider on cli's engine,
// then removes them so that the next case starts clean.
func containersOf(t *testing.T, cli *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var ids []string
	for _, c := range list {
		if c.Labels[docker.LabelLease] != "" {
			ids = append(ids, c.ID)
		}
	}
	for _, id := range ids {
		_ = cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	}
	return ids
}
