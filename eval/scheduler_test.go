package eval

import (
	"context"
	"errors"
	"testing"
)

// The scheduler's FIFO admission is x/sync/semaphore's documented
// behaviour; the peak-concurrency bound is tested in TestParallelOrderAndErrors.
func TestSchedulerCancel(t *testing.T) {
	s := newScheduler(1)
	if err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if err := s.Acquire(ctx); err == nil {
		t.Fatal("acquire on a full scheduler with a cancelled context must fail")
	}
	s.Release()
	// The slot is free again after release.
	if err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Release()

}
