package remote

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// exited is a Process that has already ended with code and err, as one
// the service's own timeout (or anything but the provider) ended.
type exited struct {
	code int
	err  error
}

func (exited) Stdin() io.WriteCloser { return nil }
func (exited) Stdout() io.Reader     { return strings.NewReader("") }
func (exited) Stderr() io.Reader     { return strings.NewReader("") }
func (e exited) Wait() (int, error)  { return e.code, e.err }
func (exited) Kill() error           { return nil }

// TestEndedPastItsDeadline: a command that ends after its deadline,
// before the provider's own kill has run (a loaded host schedules the
// timer late, and the service's backstop or a broken stream ended it),
// is reported as timed out, not as whatever the service said; one that
// ends before its deadline keeps its own status.
func TestEndedPastItsDeadline(t *testing.T) {
	r := &runtime{p: &Provider{}, procs: map[*process]struct{}{}}
	timedOut := errors.New("command timed out: " + context.DeadlineExceeded.Error())
	for _, c := range []struct {
		name     string
		deadline time.Time
		proc     exited
		want     error
		code     int
	}{
		{"past, killed by the service", time.Now().Add(-time.Millisecond), exited{code: 137}, timedOut, 137},
		{"past, its stream broken", time.Now().Add(-time.Millisecond), exited{code: -1, err: errors.New("use of closed network connection")}, timedOut, -1},
		{"before, exited", time.Now().Add(time.Hour), exited{code: 3}, nil, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &process{r: r, proc: c.proc, name: "sleep", done: make(chan struct{}), deadline: c.deadline, timedOut: timedOut}
			r.procs[p] = struct{}{}
			code, err := p.Wait()
			if err != c.want || code != c.code {
				t.Errorf("Wait = %d, %v; want %d, %v", code, err, c.code, c.want)
			}
			if _, ok := r.procs[p]; ok {
				t.Error("the process is still counted as running")
			}
		})
	}
}
