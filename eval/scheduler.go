package eval

import (
	"context"
	"sync"

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

// acquire waits for a slot or for ctx to end. The returned release may be
// called any number of times; only the first call frees the slot.
func (s *scheduler) acquire(ctx context.Context) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	if err := s.sem.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { s.sem.Release(1) }) }, nil
}
