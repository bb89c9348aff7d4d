package eval

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// scheduler bounds concurrent agent provider calls of one evaluation
// domain. Waiters are served strictly first-in, first-out, so a long queue
// of parallel branches starts in the order the branches asked. A nil
// scheduler (limit 0) admits everyone at once.
type scheduler struct {
	sem *semaphore.Weighted
}

func newScheduler(limit int) *scheduler {
	if limit <= 0 {
		return nil
	}
	return &scheduler{sem: semaphore.NewWeighted(int64(limit))}
}

// acquire waits for a slot or for ctx to end. Every successful acquire
// must be paired with exactly one release.
func (s *scheduler) acquire(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return s.sem.Acquire(ctx, 1)
}

// release frees a slot taken by acquire.
func (s *scheduler) release() {
	if s != nil {
		s.sem.Release(1)
	}
}
