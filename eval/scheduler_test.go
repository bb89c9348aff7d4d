package eval

import (
	"context"
	"errors"
	"testing"
)

// The scheduler's FIFO admission is x/sync/semaphore's documented
// behaviour; the peak-concurrency bound is tested in TestParallelOrderAndErrors.
func TestSchedulerCancelAndUnlimited(t *testing.T) {
	s := newScheduler(1)
	release, _ := s.acquire(context.Background())
	defer release()
	release()
	// release is idempotent: the slot is free exactly once.
	r2, err := s.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r2()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if _, err := s.acquire(ctx); err == nil {
		t.Fatal("acquire on a full scheduler with a cancelled context must fail")
	}
	unlimited := newScheduler(0)
	for i := 0; i < 100; i++ {
		if _, err := unlimited.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
