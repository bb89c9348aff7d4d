package eval

import (
	"sync"
	"time"
)

// DefaultCommitWindow is how long the record of a completed effect that
// reached outside the process (an agent session, a script, a tool call,
// an answer, an acquisition) may wait before the journal makes it
// durable, when EvaluateOptions.CommitWindow is 0. Records completed
// within one window share one Journal.Sync (one fsync of the file
// journal).
const DefaultCommitWindow = 10 * time.Millisecond

// committer is the group commit of one journaled evaluation: the first
// external record after a commit arms a timer, and when it fires one
// Sync makes every record appended so far durable. A failed Sync is kept
// and reported when the evaluation ends (the journal also fails the
// next Record or Sync). It is safe for concurrent use; a nil committer
// does nothing.
type committer struct {
	j      Journal
	window time.Duration

	mu     sync.Mutex
	timer  *time.Timer
	armed  bool
	closed bool
	err    error
	// flushing counts Syncs in progress, so that stop waits for them.
	flushing sync.WaitGroup
}

func newCommitter(j Journal, window time.Duration) *committer {
	if window == 0 {
		window = DefaultCommitWindow
	}
	if window < 0 {
		window = 0
	}
	return &committer{j: j, window: window}
}

// soon makes the records appended so far durable within the window.
func (c *committer) soon() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed || c.closed {
		return
	}
	c.armed = true
	if c.timer == nil {
		c.timer = time.AfterFunc(c.window, c.flush)
	} else {
		c.timer.Reset(c.window)
	}
}

// flush is the timer's Sync.
func (c *committer) flush() {
	c.mu.Lock()
	if c.closed || !c.armed {
		c.mu.Unlock()
		return
	}
	c.armed = false
	c.flushing.Add(1)
	c.mu.Unlock()
	defer c.flushing.Done()
	if err := c.j.Sync(); err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
}

// stop ends the group commit: no Sync starts after it returns, and a
// Sync in progress has finished. It returns the first failed Sync.
func (c *committer) stop() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.flushing.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
