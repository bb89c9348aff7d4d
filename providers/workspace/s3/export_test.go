package s3

import "time"

// SetClock replaces the storage's lock clock and timing (tests).
func (s *Storage) SetClock(now func() time.Time, refresh, stale time.Duration) {
	s.now, s.refresh, s.stale = now, refresh, stale
}

// SetPartSize replaces the multipart part size (tests).
func (s *Storage) SetPartSize(n int64) { s.partSize = n }
