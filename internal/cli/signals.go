package cli

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// arrival is a signal and the time it reached aml.
type arrival struct {
	sig os.Signal
	at  time.Time
}

// listen passes SIGINT and SIGTERM on to dst, each stamped as soon as the
// runtime delivers it, until the returned stop is called (once). The stamp
// is taken by a goroutine that does nothing else, not where the signal is
// handled: on a loaded machine the handler of a first signal can run late
// enough that a second, distinct one looks like the same signal delivered
// twice (see repeatedSignal). A signal dst has no room for waits until
// there is room or stop is called.
func listen(dst chan<- arrival) (stop func()) {
	raw := make(chan os.Signal, 4)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	signal.Notify(raw, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer wg.Done()
		for {
			select {
			case s := <-raw:
				select {
				case dst <- arrival{sig: s, at: time.Now()}:
				case <-quit:
					return
				}
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(raw)
			close(quit)
			wg.Wait()
		})
	}
}

// signalRepeatWindow is how soon after a signal the same signal counts
// as the same one delivered again, not as a second request: GNU timeout
// signals the child and then its group microseconds apart, while a
// person's quickest second Ctrl-C comes later than this.
const signalRepeatWindow = 100 * time.Millisecond

// repeatedSignal reports whether again is the delivery of first once
// more: the same signal arriving within signalRepeatWindow of it. Both
// times are arrival stamps (listen), never the times they were handled.
func repeatedSignal(first, again arrival) bool {
	return again.sig == first.sig && again.at.Sub(first.at) < signalRepeatWindow
}
