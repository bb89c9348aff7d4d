package eval

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Fan-out execution. parallel() and evaluate_all() do not start one
// goroutine per branch: a branch is data (an index into the fan-out)
// until a goroutine claims it. The goroutine that calls fanOut claims
// branches itself, in authored order, and helpers of the evaluation claim
// the others. Helpers are started while fewer goroutines of the
// evaluation are runnable than GOMAXPROCS: a goroutine that blocks outside
// the evaluator (in an agent provider, a script, a sandbox or workspace
// provider, a wait for a sibling) does not count as runnable, so a
// blocked branch is replaced by a new helper after a short delay (the
// monitor's tick) while the queued branches wait as data. The number of
// goroutines is therefore bounded by what actually runs: the branches
// blocked outside the evaluator (at most the agent limit of them in
// agent providers) plus GOMAXPROCS runnable ones, waiting for an agent
// slot included, not by the number of branches. When runnable goroutines
// make no progress for a millisecond (they block where the evaluator
// cannot see: a Go component body, a builtin of an extension), the
// monitor starts one more helper, and so on every millisecond.

// Monitor timing: the delay before a blocked goroutine is replaced, and
// the longest sleep of a monitor with nothing to do.
const (
	monitorTick    = 50 * time.Microsecond
	monitorMaxIdle = 2 * time.Millisecond
	// stallAfter is how long runnable goroutines must make no progress
	// before the monitor assumes they block unseen.
	stallAfter = time.Millisecond
	// eagerBranches is the size from which a fan-out starts its helpers
	// at once instead of at the monitor's next tick.
	eagerBranches = 8
)

// workers accounts for the goroutines of one evaluation domain and runs
// the monitor that starts helpers. It is safe for concurrent use.
type workers struct {
	// live counts goroutines doing evaluator work: the evaluation's own
	// and the helpers. blocked counts, of all goroutines of the
	// evaluation, those blocked outside the evaluator. Both are
	// estimates (goroutines of providers that call back into the
	// evaluator are not counted live), which can only make helpers more
	// numerous, never stop a fan-out: its caller always makes progress.
	live    atomic.Int64
	blocked atomic.Int64
	// queued counts goroutines waiting for an agent slot: they are
	// runnable (a slot makes them run at once) but make no progress.
	queued atomic.Int64
	// progress counts claims and blocking transitions; a monitor that
	// sees it unchanged while goroutines should be running assumes they
	// block where the evaluator cannot see (a Go component body, a
	// builtin of an extension) and starts a helper anyway.
	progress atomic.Int64
	target   int64
	// limited says agents have a concurrency limit.
	limited bool

	mu      sync.Mutex
	open    []*fan // fan-outs with unclaimed branches, oldest first
	monitor bool
	stop    chan struct{} // closed by close
	exited  chan struct{} // closed by the monitor when it ends
}

func newWorkers(limited bool) *workers {
	w := &workers{target: int64(runtime.GOMAXPROCS(0)), limited: limited, stop: make(chan struct{})}
	w.live.Store(1) // the goroutine of Evaluate
	return w
}

// close ends the monitor, if it runs, and waits for it: when Evaluate
// returns, no goroutine of the evaluation is left.
func (w *workers) close() {
	w.mu.Lock()
	close(w.stop)
	exited := w.exited
	if !w.monitor {
		exited = nil
	}
	w.mu.Unlock()
	if exited != nil {
		<-exited
	}
}

// runnable estimates the goroutines of the evaluation that can run now.
func (w *workers) runnable() int64 { return w.live.Load() - w.blocked.Load() }

// block marks the calling goroutine blocked outside the evaluator until
// the returned function is called. On a nil *workers (another Executor
// runs the evaluation) it does nothing.
func (w *workers) block() func() {
	if w == nil {
		return noop
	}
	w.blocked.Add(1)
	w.progress.Add(1)
	return w.unblock
}

func (w *workers) unblock() {
	w.blocked.Add(-1)
	w.progress.Add(1)
}

func noop() {}

// queue marks the calling goroutine waiting for an agent slot until the
// returned function is called; it does nothing on a nil *workers.
func (w *workers) queue() func() {
	if w == nil {
		return noop
	}
	w.queued.Add(1)
	return w.unqueue
}

func (w *workers) unqueue() {
	w.queued.Add(-1)
	w.progress.Add(1)
}

// fan is one fan-out: n branches claimed in order.
type fan struct {
	w      *workers
	ctx    context.Context
	n      int64
	next   atomic.Int64
	branch func(ctx context.Context, i int) error
	wg     sync.WaitGroup

	mu       sync.Mutex
	failures []BranchFailure
	// closed is set (under mu) when the caller has claimed its last
	// branch and is about to wait: no helper starts after it, so every
	// wg.Add happens before the caller's wg.Wait.
	closed bool
}

// claim returns the next unclaimed branch, or -1 when none is left.
func (f *fan) claim() int64 {
	if f.next.Load() >= f.n {
		return -1
	}
	i := f.next.Add(1) - 1
	if i >= f.n {
		return -1
	}
	f.w.progress.Add(1)
	return i
}

func (f *fan) remaining() bool { return f.next.Load() < f.n }

// run runs branch i and records its failure.
func (f *fan) run(i int64) {
	if err := f.branch(f.ctx, int(i)); err != nil {
		f.mu.Lock()
		f.failures = append(f.failures, BranchFailure{Index: int(i), Err: err})
		f.mu.Unlock()
	}
}

// cancelled stops claiming once the fan-out's context is done: the branch
// claimed last runs (and fails with the cancellation), the others never
// start.
func (f *fan) cancelled() bool {
	if f.ctx.Err() == nil {
		return false
	}
	f.next.Store(f.n)
	return true
}

// help claims and runs branches of f on a helper goroutine. It stops when
// none is left or when twice as many goroutines are runnable as wanted.
func (f *fan) help() {
	w := f.w
	defer func() {
		w.live.Add(-1)
		f.wg.Done()
	}()
	for {
		i := f.claim()
		if i < 0 {
			return
		}
		f.run(i)
		// Twice the target before leaving, so that helpers are not
		// started and ended at every change of the count.
		if f.cancelled() || w.runnable() > 2*w.target {
			return
		}
	}
}

// observeLive is a test hook (see export_test.go).
var observeLive func(live int64)

// spawn starts k helpers of f, unless its caller has stopped claiming.
func (w *workers) spawn(f *fan, k int64) {
	for range k {
		f.mu.Lock()
		if f.closed || !f.remaining() {
			f.mu.Unlock()
			return
		}
		f.wg.Add(1)
		f.mu.Unlock()
		live := w.live.Add(1)
		if observeLive != nil {
			observeLive(live)
		}
		go f.help()
	}
}

// fanOut runs branch(ctx, 0..n-1), its caller and helpers claiming them
// in order (or the Executor running them), waits for all of them, and
// reports every failure in authored order as a *ParallelError. Once ctx
// is done no further branch starts.
func (d *domain) fanOut(ctx context.Context, n int, pos Position, branch func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	if d.exec != nil {
		failures := d.exec.FanOut(ctx, n, branch)
		if len(failures) == 0 {
			return nil
		}
		slices.SortFunc(failures, func(a, b BranchFailure) int { return a.Index - b.Index })
		return &ParallelError{Branches: n, Pos: pos, Failures: failures}
	}
	w := d.workers
	f := &fan{w: w, ctx: ctx, n: int64(n), branch: branch}
	if n > 1 {
		w.mu.Lock()
		w.open = append(w.open, f)
		if !w.monitor {
			w.monitor = true
			w.exited = make(chan struct{})
			go w.watch(w.exited)
		}
		w.mu.Unlock()
		if n >= eagerBranches {
			if k := w.target - w.runnable(); k > 0 {
				w.spawn(f, k)
			}
		}
	}
	for {
		i := f.claim()
		if i < 0 {
			break
		}
		f.run(i)
		if f.cancelled() {
			break
		}
	}
	// No helper starts from here on (the monitor may still hold f): the
	// ones started are all the wait needs to join.
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	unblock := w.block()
	f.wg.Wait()
	unblock()
	if len(f.failures) == 0 {
		return nil
	}
	slices.SortFunc(f.failures, func(a, b BranchFailure) int { return a.Index - b.Index })
	return &ParallelError{Branches: n, Pos: pos, Failures: f.failures}
}

// watch is the monitor: while fan-outs have unclaimed branches, every
// tick it starts helpers for the newest of them until GOMAXPROCS
// goroutines of the evaluation are runnable. It sleeps longer while there
// is nothing to do and ends when no fan-out has unclaimed branches.
func (w *workers) watch(exited chan struct{}) {
	defer close(exited)
	sleep := monitorTick
	burst := int64(1)
	seen, seenAt := w.progress.Load(), time.Now()
	timer := time.NewTimer(sleep)
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			w.mu.Lock()
			w.monitor = false
			w.mu.Unlock()
			return
		case <-timer.C:
		}
		w.mu.Lock()
		open := w.open[:0]
		for _, f := range w.open {
			if f.remaining() {
				open = append(open, f)
			}
		}
		clear(w.open[len(open):])
		w.open = open
		if len(open) == 0 {
			w.monitor = false
			w.mu.Unlock()
			return
		}
		f := open[len(open)-1]
		w.mu.Unlock()
		stalled := false
		if p := w.progress.Load(); p != seen {
			seen, seenAt = p, time.Now()
		} else if time.Since(seenAt) >= stallAfter && w.runnable()-w.queued.Load() > 0 {
			stalled, seenAt = true, time.Now()
		}
		switch k := w.target - w.runnable(); {
		case k > 0:
			// Blocked branches are replaced in growing bursts, so that a
			// fan-out of agents that all block starts them quickly; under
			// an agent limit more would only wait for a slot.
			if w.limited {
				burst = 1
			}
			w.spawn(f, max(k, burst))
			burst = min(burst*2, 1024)
			sleep = monitorTick
		case stalled:
			// Runnable goroutines made no progress for a whole tick.
			w.spawn(f, 1)
			burst = 1
			sleep = min(sleep*2, monitorMaxIdle)
		default:
			burst = 1
			sleep = min(sleep*2, monitorMaxIdle)
		}
		timer.Reset(sleep)
	}
}

// newSemaphore returns a FIFO semaphore of n slots from the Executor, or
// the in-process one.
func (d *domain) newSemaphore(ctx context.Context, n int) Semaphore {
	if d.exec != nil {
		return d.exec.NewSemaphore(ctx, n)
	}
	return newScheduler(n)
}

// withTimeoutCause is context.WithTimeoutCause, or the Executor's.
func (d *domain) withTimeoutCause(ctx context.Context, dur time.Duration, cause error) (context.Context, context.CancelFunc) {
	if d.exec != nil {
		return d.exec.WithTimeoutCause(ctx, dur, cause)
	}
	return context.WithTimeoutCause(ctx, dur, cause)
}
