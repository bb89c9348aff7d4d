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
	if err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if err := s.acquire(ctx); err == nil {
		t.Fatal("acquire on a full scheduler with a cancelled context must fail")
	}
	s.release()
	// The slot is free again after release.
	if err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.release()

	var unlimited *scheduler = newScheduler(0)
	if unlimited != nil {
		t.Fatal("limit 0 must disable the scheduler")
	}
	for i := 0; i < 100; i++ {
		if err := unlimited.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	unlimited.release()
}
