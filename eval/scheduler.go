package eval

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// scheduler is the in-process Semaphore: it bounds concurrent agent
// provider calls of one evaluation domain, and takes the turns of a serial
// workspace. Waiters are served strictly first-in, first-out, so a long
// queue of parallel branches starts in the order the branches asked.
type scheduler struct {
	sem *semaphore.Weighted
}

func newScheduler(limit int) *scheduler {
	return &scheduler{sem: semaphore.NewWeighted(int64(limit))}
}

// Acquire waits for a slot or for ctx to end. Every successful Acquire
// must be paired with exactly one Release.
func (s *scheduler) Acquire(ctx context.Context) error {
	return s.sem.Acquire(ctx, 1)
}

// Release frees a slot taken by Acquire.
func (s *scheduler) Release() { s.sem.Release(1) }
