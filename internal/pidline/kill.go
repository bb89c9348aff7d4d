package pidline

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// killScript kills the process group whose leader's id is $0 or, when
// the id leads no group, the process itself.
const killScript = `kill -KILL -"$0" 2>/dev/null || kill -KILL "$0"`

// KillArgv is the argv that kills the group of the command whose id is
// pid (the wrapper runs each command as its group's leader), or the
// command alone when it leads none, run by a second exec in the same
// sandbox.
func KillArgv(pid int64) []string {
	return []string{"/bin/sh", "-c", killScript, strconv.FormatInt(pid, 10)}
}

// ID is a command's process id as the wrapper's line gives it. Set is
// called by the stream's reader; Ready and Load by anyone. The zero ID is
// ready to use; it is safe for concurrent use.
type ID struct {
	once  sync.Once
	ready chan struct{}
	init  sync.Once
	v     atomic.Int64
}

func (id *ID) ch() chan struct{} {
	id.init.Do(func() { id.ready = make(chan struct{}) })
	return id.ready
}

// Set records the wrapper's line (nil when it never came: the id is then
// 0) and releases Ready's waiters; the first call wins.
func (id *ID) Set(line []byte) {
	id.once.Do(func() {
		id.v.Store(Parse(line))
		close(id.ch())
	})
}

// Ready is closed once Set was called.
func (id *ID) Ready() <-chan struct{} { return id.ch() }

// Load returns the id, 0 while it is not known or when there is none.
func (id *ID) Load() int64 { return id.v.Load() }

// Timings of Kill (variables for the package's tests).
var (
	// idWait bounds how long Kill waits for the wrapper's line.
	idWait = 5 * time.Second
	// grace is how long Kill gives the command to end before each step.
	grace = 2 * time.Second
)

// Kill ends a command whose end closes done. It waits for the command's
// id (five seconds at most) and signal kills its group in the sandbox; then,
// unless the command ends within two seconds, the first of escalate runs
// (closing the stream, say), and so on, each step given as long to end
// the command before the next (deleting the sandbox, say). The grace
// before each step also spares the sandbox of a command that ended by
// itself as it was killed. Kill returns as soon as done is closed; it is
// called once per command (callers guard it with a sync.Once).
func Kill(done <-chan struct{}, id *ID, signal func(pid int64), escalate ...func()) {
	t := time.NewTimer(idWait)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-id.Ready():
	case <-t.C:
	}
	if pid := id.Load(); pid > 0 {
		signal(pid)
	}
	for _, step := range escalate {
		if ended(done, grace) {
			return
		}
		step()
	}
}

// ended reports whether done closes within d.
func ended(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
