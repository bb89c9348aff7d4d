package staged_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/sandbox/staged"
)

// world builds hooks whose runtime comes from a deterministic sandbox and
// which can fail at a chosen stage.
type world struct {
	failAt   string
	releases atomic.Int32
	cleanups atomic.Int32
	inner    *deterministic.Sandbox
}

func (w *world) hooks() staged.Hooks[string, eval.SandboxLease] {
	return staged.Hooks[string, eval.SandboxLease]{
		Name: "staged-test",
		Provision: func(ctx context.Context, req *eval.SandboxAcquireRequest) (staged.Provisioned[string, eval.SandboxLease], error) {
			if w.failAt == "provision" {
				return staged.Provisioned[string, eval.SandboxLease]{}, errors.New("provision failed")
			}
			l, err := w.inner.Acquire(ctx, req)
			if err != nil {
				return staged.Provisioned[string, eval.SandboxLease]{}, err
			}
			return staged.Provisioned[string, eval.SandboxLease]{Handle: "h-" + l.ID(), ID: l.ID(), Resource: l}, nil
		},
		CreateRuntime: func(_ context.Context, p staged.Provisioned[string, eval.SandboxLease], _ *eval.SandboxAcquireRequest) (eval.SandboxRuntime, error) {
			if w.failAt == "runtime" {
				return nil, errors.New("runtime failed")
			}
			return p.Resource.Runtime(), nil
		},
		Initialize: func(context.Context, staged.Provisioned[string, eval.SandboxLease], eval.SandboxRuntime, *eval.SandboxAcquireRequest) error {
			if strings.HasPrefix(w.failAt, "initialize") {
				return errors.New("setup failed")
			}
			return nil
		},
		CleanupProvisioned: func(ctx context.Context, p staged.Provisioned[string, eval.SandboxLease]) error {
			w.cleanups.Add(1)
			if w.failAt == "cleanup" || w.failAt == "initialize+cleanup" {
				return errors.New("cleanup failed")
			}
			return p.Resource.Release(ctx)
		},
		ReleaseResource: func(ctx context.Context, p staged.Provisioned[string, eval.SandboxLease]) error {
			w.releases.Add(1)
			return p.Resource.Release(ctx)
		},
	}
}

func newWorld(t *testing.T, failAt string) (*world, *staged.Provider[string, eval.SandboxLease]) {
	t.Helper()
	inner, err := deterministic.NewSandbox(deterministic.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{failAt: failAt, inner: inner}
	p, err := staged.New(w.hooks())
	if err != nil {
		t.Fatal(err)
	}
	return w, p
}

func TestConformanceAndMemoizedRelease(t *testing.T) {
	w, p := newWorld(t, "")
	providertest.RunSandbox(t, p, providertest.SandboxOptions{Exercise: true})
	lease, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadWrite, Root: ".", Cwd: "."})
	if err != nil {
		t.Fatal(err)
	}
	before := w.releases.Load()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _ = lease.Release(context.Background()) }()
	}
	wg.Wait()
	if got := w.releases.Load() - before; got != 1 {
		t.Fatalf("ReleaseResource ran %d times for one lease", got)
	}
	if h := lease.(*staged.Lease[string, eval.SandboxLease]).Handle(); !strings.HasPrefix(h, "h-") {
		t.Fatalf("handle %q", h)
	}
}

func TestFailuresCleanUpOnce(t *testing.T) {
	for _, stage := range []string{"provision", "runtime", "initialize", "initialize+cleanup"} {
		t.Run(stage, func(t *testing.T) {
			w, p := newWorld(t, stage)
			_, err := p.Acquire(context.Background(), &eval.SandboxAcquireRequest{Access: eval.ReadOnly, Root: ".", Cwd: "."})
			if err == nil {
				t.Fatal("acquisition succeeded")
			}
			wantCleanups := int32(1)
			if stage == "provision" {
				wantCleanups = 0 // nothing was provisioned
			}
			if got := w.cleanups.Load(); got != wantCleanups {
				t.Fatalf("cleanup ran %d times, want %d", got, wantCleanups)
			}
			if stage == "initialize+cleanup" && (!strings.Contains(err.Error(), "setup failed") || !strings.Contains(err.Error(), "cleanup failed")) {
				t.Fatalf("both errors must be kept: %v", err)
			}
		})
	}
}

func TestCancelledBeforeProvisioning(t *testing.T) {
	w, p := newWorld(t, "")
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if _, err := p.Acquire(ctx, &eval.SandboxAcquireRequest{Access: eval.ReadOnly, Root: ".", Cwd: "."}); !errors.Is(err, cause) {
		t.Fatalf("error %v", err)
	}
	if len(w.inner.Acquisitions()) != 0 {
		t.Fatal("a cancelled acquisition provisioned a resource")
	}
}

func TestNewValidatesHooks(t *testing.T) {
	if _, err := staged.New(staged.Hooks[int, int]{Name: "x"}); err == nil {
		t.Fatal("missing hooks accepted")
	}
	if _, err := staged.New(staged.Hooks[int, int]{Name: " x"}); err == nil {
		t.Fatal("untrimmed name accepted")
	}
}
