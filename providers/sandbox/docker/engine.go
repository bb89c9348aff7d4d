package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types"
)

// DefaultEngineTimeout bounds one call to the Docker engine when
// Options.EngineTimeout is 0. A call that gets no answer within it (a
// frozen, overloaded or vanished daemon) fails with an
// *EngineTimeoutError naming the operation, so a run never waits on the
// engine for longer than this at a time.
const DefaultEngineTimeout = 30 * time.Second

// DefaultSetupTimeout bounds Options.Setup when Options.SetupTimeout is
// 0: room for a package install, not for a hang.
const DefaultSetupTimeout = 10 * time.Minute

// killWait is how long ending a command waits for the kill to reach the
// engine before the command's stream is closed anyway: a frozen engine
// never delays a timeout_ms (or a cancellation) by more than this.
const killWait = 2 * time.Second

// EngineTimeoutError is the error of a call to the Docker engine that got
// no answer within the provider's engine timeout. It wraps
// context.DeadlineExceeded.
type EngineTimeoutError struct {
	// Op names the operation, such as "inspect exec" or "remove container".
	Op string
	// After is the bound that passed.
	After time.Duration
}

// Error says which call got no answer and what to check.
func (e *EngineTimeoutError) Error() string {
	return fmt.Sprintf("the Docker engine did not answer %s within %v: the daemon is frozen, overloaded or gone (check it with `docker info`; docker_sandbox(engine_timeout_ms = ...) sets the bound)", e.Op, e.After)
}

// Unwrap returns context.DeadlineExceeded.
func (e *EngineTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// engineCall runs one call to the engine under the provider's engine
// timeout. The Engine API client cancels a plain request with its
// context; when the bound is what ended the call, the error is the
// *EngineTimeoutError that names op.
func engineCall[T any](p *Provider, ctx context.Context, op string, f func(context.Context) (T, error)) (T, error) {
	ectx, cancel := context.WithTimeoutCause(ctx, p.engineTimeout, &EngineTimeoutError{Op: op, After: p.engineTimeout})
	defer cancel()
	v, err := f(ectx)
	if err != nil {
		return v, boundError(ectx, err)
	}
	return v, nil
}

// boundError is err, or the engine timeout that caused it.
func boundError(ectx context.Context, err error) error {
	var te *EngineTimeoutError
	if errors.As(context.Cause(ectx), &te) && ectx.Err() != nil {
		return te
	}
	return engineError(err)
}

// engineDo is engineCall for a call with no result.
func engineDo(p *Provider, ctx context.Context, op string, f func(context.Context) error) error {
	_, err := engineCall(p, ctx, op, func(c context.Context) (struct{}, error) { return struct{}{}, f(c) })
	return err
}

// attach runs a hijacking call (exec attach) under the engine timeout.
// The client does not cancel the upgrade's round trip with its context (a
// frozen daemon accepts the connection and never answers), so the call
// runs on its own goroutine and is abandoned at the bound; a connection it
// returns after that is closed when it comes.
func attach(p *Provider, ctx context.Context, op string, f func(context.Context) (types.HijackedResponse, error)) (types.HijackedResponse, error) {
	ectx, cancel := context.WithTimeoutCause(ctx, p.engineTimeout, &EngineTimeoutError{Op: op, After: p.engineTimeout})
	type result struct {
		resp types.HijackedResponse
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := f(ectx)
		ch <- result{resp, err}
	}()
	select {
	case r := <-ch:
		cancel()
		if r.err != nil {
			return r.resp, boundError(ectx, r.err)
		}
		return r.resp, nil
	case <-ectx.Done():
		err := context.Cause(ectx)
		cancel()
		go func() {
			if r := <-ch; r.err == nil {
				r.resp.Close()
			}
		}()
		var te *EngineTimeoutError
		if errors.As(err, &te) {
			return types.HijackedResponse{}, te
		}
		return types.HijackedResponse{}, err
	}
}

// idleReader fails a read that waits longer than idle for data: a pull
// whose progress stops (a frozen daemon) ends, one that keeps moving is
// not cut. stop is called once when the bound passes (it cancels the
// request, which ends the blocked read).
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func newIdleReader(r io.Reader, idle time.Duration, stop func()) *idleReader {
	return &idleReader{r: r, idle: idle, timer: time.AfterFunc(idle, stop)}
}

func (i *idleReader) Read(b []byte) (int, error) {
	n, err := i.r.Read(b)
	if n > 0 {
		i.timer.Reset(i.idle)
	}
	return n, err
}

func (i *idleReader) close() { i.timer.Stop() }
