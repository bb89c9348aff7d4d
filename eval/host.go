package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// HostOutputLimit bounds each output stream of an unsandboxed script.
const HostOutputLimit = 4 << 20

// errOutputLimit is the cause of a command killed for printing too much.
var errOutputLimit = errors.New("output limit exceeded")

// boundedBuffer keeps at most limit bytes and reports overflow once.
type boundedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	limit    int
	overflow func()
	over     bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over {
		return len(p), nil
	}
	if b.buf.Len()+len(p) > b.limit {
		b.buf.Write(p[:b.limit-b.buf.Len()])
		b.over = true
		if b.overflow != nil {
			go b.overflow()
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

// runHost runs one trusted host process in its own process group with
// literal arguments. Cancellation, the timeout and output overflow kill
// the whole group. A non-zero exit is reported in the result, not as an
// error.
func runHost(ctx context.Context, dir, command string, args []string, timeout time.Duration) (*ExecResult, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %s", timeout))
		defer cancel()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cmd := exec.Command(command, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	cmd.Stdin = nil
	setProcessGroup(cmd)
	overflow := func() { cancel(errOutputLimit) }
	stdout := &boundedBuffer{limit: HostOutputLimit, overflow: overflow}
	stderr := &boundedBuffer{limit: HostOutputLimit, overflow: overflow}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Pipes stay open while any process of the group holds them: bound
	// the wait for output after the main process exits.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			killProcessGroup(cmd)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	// Kill anything the command left behind in its group.
	killProcessGroup(cmd)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	res := &ExecResult{Stdout: stdout.bytes(), Stderr: stderr.bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if sig, ok := signalled(ee); ok {
			res.ExitCode = 128 + sig
		}
	case errors.Is(err, exec.ErrWaitDelay):
	default:
		return nil, err
	}
	return res, nil
}
