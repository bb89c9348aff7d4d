package s3

import (
	"context"
	"time"
)

// SetClock replaces the storage's lock clock and timing (tests).
func (s *Storage) SetClock(now func() time.Time, refresh, stale time.Duration) {
	s.now, s.refresh, s.stale = now, refresh, stale
}

// SetPartSize replaces the multipart part size (tests).
func (s *Storage) SetPartSize(n int64) { s.partSize = n }

// ProbeConditions runs the check of conditional writes (tests).
func (s *Storage) ProbeConditions(ctx context.Context) (string, error) { return s.probeConditions(ctx) }
