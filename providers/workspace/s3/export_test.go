package s3

import "time"

// SetClock replaces the storage's lock clock and timing (tests).
func (s *Storage) SetClock(now func() time.Time, refresh, stale time.Duration) {
	s.now, s.refresh, s.stale = now, refresh, stale
}
