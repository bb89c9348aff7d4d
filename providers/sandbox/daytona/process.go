package daytona

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// killedStatus is the status of a process Kill ended (SIGKILL's).
const killedStatus = 137

// The daemon's labels of a log line's stream.
var (
	stdoutLabel = []byte{1, 1, 1}
	stderrLabel = []byte{2, 2, 2}
)

// Start implements remote.Machine. The process is the one command of a
// session of its own: POST /process/session, then POST
// /process/session/{id}/exec with the script that runs the literal argv
// (see script), asynchronously and without echo of its input. Its output
// is followed over a WebSocket (GET .../command/{cmdId}/logs?follow=true
// with X-Daytona-Split-Output: true), which carries the labelled log;
// Wait takes the exit code from GET .../command/{cmdId} once the log
// ends; the session is then deleted in the background. Kill deletes the session (the daemon
// kills its process group) and Wait then reports 137. Command.Timeout
// is enforced by the client, with Kill.
func (m *machine) Start(ctx context.Context, c remote.Command) (remote.Process, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, errors.New("daytona: empty command")
	}
	dir, err := m.abs(ctx, c.Dir)
	if err != nil {
		return nil, err
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	mark := "aml-end-" + hex.EncodeToString(nonce[:])
	text, err := script(c, dir, mark)
	if err != nil {
		return nil, fmt.Errorf("daytona: %w", err)
	}
	p := &process{m: m, sid: "aml-" + uuid.NewString(), name: c.Args[0], done: make(chan struct{})}
	what := fmt.Sprintf("starting %q in sandbox %s", p.name, m.id)
	if err := m.call(ctx, request{op: what + ": creating its session", method: http.MethodPost, url: m.toolbox + "/process/session", body: map[string]any{"sessionId": p.sid}}, nil); err != nil {
		return nil, err
	}
	var ex struct {
		CmdID string `json:"cmdId"`
	}
	err = m.call(ctx, request{op: what, method: http.MethodPost, url: p.sessionURL() + "/exec",
		body: map[string]any{"command": text, "runAsync": true, "suppressInputEcho": true}}, &ex)
	if err == nil && ex.CmdID == "" {
		err = fmt.Errorf("daytona: %s: the answer has no command id", what)
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.s.opts.RequestTimeout)
		_ = p.deleteSession(dctx)
		cancel()
		return nil, err
	}
	p.cid = ex.CmdID
	p.ctx, p.cancel = context.WithCancel(context.Background())
	end := []byte(mark + "\n")
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p.stdout, p.stderr = outR, errR
	p.demux = &demuxer{out: &tail{w: outW, mark: end}, err: &tail{w: errW, mark: end}}
	if c.Stdin {
		p.stdin = &stdinWriter{p: p}
	}
	go p.run()
	if c.Timeout > 0 {
		t := time.AfterFunc(c.Timeout, func() { _ = p.Kill() })
		go func() { <-p.done; t.Stop() }()
	}
	return p, nil
}

// process is one command in its session.
type process struct {
	m        *machine
	sid, cid string
	name     string
	stdin    *stdinWriter
	stdout   *io.PipeReader
	stderr   *io.PipeReader
	demux    *demuxer
	// ctx lives as long as the process is followed; Kill and the end
	// cancel it.
	ctx    context.Context
	cancel context.CancelFunc

	killOnce sync.Once
	killed   atomic.Bool
	done     chan struct{}
	code     int
	err      error
}

func (p *process) sessionURL() string {
	return p.m.toolbox + "/process/session/" + url.PathEscape(p.sid)
}

func (p *process) commandURL() string {
	return p.sessionURL() + "/command/" + url.PathEscape(p.cid)
}

// Stdin implements remote.Process.
func (p *process) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nil
	}
	return p.stdin
}

// Stdout implements remote.Process.
func (p *process) Stdout() io.Reader { return p.stdout }

// Stderr implements remote.Process.
func (p *process) Stderr() io.Reader { return p.stderr }

// Wait implements remote.Process; repeat-safe.
func (p *process) Wait() (int, error) {
	<-p.done
	return p.code, p.err
}

// Kill implements remote.Process: it deletes the process's session, which
// ends its process group; when that fails (after retries), it destroys
// the sandbox instead, since the process would run on. Repeat-safe.
func (p *process) Kill() error {
	var err error
	p.killOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		p.killed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 2*p.m.s.opts.RequestTimeout)
		defer cancel()
		if err = p.deleteSession(ctx); err != nil && !errors.Is(err, ErrSandboxGone) {
			if derr := p.m.Destroy(ctx); derr != nil {
				err = errors.Join(err, derr)
			} else {
				err = fmt.Errorf("%w; the sandbox was destroyed instead", err)
			}
		}
		p.cancel()
	})
	return err
}

// deleteSession deletes the process's session; one already gone is not
// an error.
func (p *process) deleteSession(ctx context.Context) error {
	err := p.m.call(ctx, request{op: fmt.Sprintf("ending %q in sandbox %s", p.name, p.m.id), method: http.MethodDelete, url: p.sessionURL(), idempotent: true}, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// run follows the output to its end, then learns the exit status and
// deletes the session.
func (p *process) run() {
	defer close(p.done)
	defer p.cancel()
	ferr := p.follow()
	var code int
	var err error
	switch {
	case p.killed.Load():
		code = killedStatus
	case ferr != nil:
		code, err = -1, ferr
	default:
		code, err = p.exitCode()
	}
	outMarked := p.demux.out.finish(err)
	errMarked := p.demux.err.finish(err)
	if err == nil && !p.killed.Load() && (!outMarked || !errMarked) {
		// The script always ends both streams with the mark: a stream
		// without it was cut short.
		code, err = -1, fmt.Errorf("daytona: the output of %q in sandbox %s ended early", p.name, p.m.id)
	}
	if !p.killed.Load() {
		// The session goes once the status is known; the caller does not
		// wait for it (a round trip), and the sandbox's destruction
		// removes whatever a failed deletion leaves.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), p.m.s.opts.RequestTimeout)
			_ = p.deleteSession(ctx)
			cancel()
		}()
	}
	p.code, p.err = code, err
}

// exitCode reads the command's exit code (GET .../command/{cmdId}),
// which the daemon records once the output is flushed.
func (p *process) exitCode() (int, error) {
	for i := 0; ; i++ {
		var c struct {
			ExitCode *int `json:"exitCode"`
		}
		ctx, cancel := context.WithTimeout(p.ctx, 2*p.m.s.opts.RequestTimeout)
		err := p.m.call(ctx, request{op: fmt.Sprintf("reading the exit code of %q in sandbox %s", p.name, p.m.id), method: http.MethodGet, url: p.commandURL(), idempotent: true}, &c)
		cancel()
		switch {
		case p.killed.Load():
			return killedStatus, nil
		case err == nil && c.ExitCode != nil:
			return *c.ExitCode, nil
		case errors.Is(err, ErrSandboxGone):
			return -1, fmt.Errorf("daytona: sandbox %s was destroyed while %q ran: %w", p.m.id, p.name, err)
		case errors.Is(err, ErrNotFound):
			return -1, fmt.Errorf("daytona: the session of %q in sandbox %s was deleted before it exited: %w", p.name, p.m.id, err)
		case err != nil:
			return -1, err
		case i >= 100:
			return -1, fmt.Errorf("daytona: %q in sandbox %s: no exit code after its output ended", p.name, p.m.id)
		}
		select {
		case <-p.ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// follow streams the command's log into the output pipes until the
// stream closes normally (the command ended, or its session was
// deleted). A broken stream is reopened (what was already received is
// skipped, since each stream starts at the log's beginning), unless the
// sandbox is gone.
func (p *process) follow() error {
	var received int64
	for failures := 0; ; {
		err := p.followOnce(&received)
		if err == nil || p.killed.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(p.ctx, 2*p.m.s.opts.RequestTimeout)
		_, gerr := p.m.s.sandbox(ctx, p.m.id)
		cancel()
		if errors.Is(gerr, ErrSandboxGone) {
			return fmt.Errorf("daytona: sandbox %s was destroyed while %q ran: %w", p.m.id, p.name, gerr)
		}
		var apiErr *APIError
		failures++
		if p.killed.Load() {
			return nil
		}
		if (errors.As(err, &apiErr) && apiErr.StatusCode < 500 && apiErr.StatusCode != http.StatusTooManyRequests) || failures > p.m.s.opts.MaxRetries {
			return fmt.Errorf("daytona: following the output of %q in sandbox %s: %w", p.name, p.m.id, err)
		}
		select {
		case <-p.ctx.Done():
			return nil
		case <-time.After(backoff(failures)):
		}
	}
}

// followOnce reads one log stream, skipping its first *received bytes.
func (p *process) followOnce(received *int64) error {
	op := fmt.Sprintf("following the output of %q in sandbox %s", p.name, p.m.id)
	u := p.commandURL() + "/logs?follow=true"
	u = "ws" + strings.TrimPrefix(u, "http")
	h := http.Header{}
	p.m.s.authorize(h)
	h.Set("X-Daytona-Split-Output", "true")
	dctx, cancel := context.WithTimeout(p.ctx, p.m.s.opts.RequestTimeout)
	conn, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPClient: p.m.s.client, HTTPHeader: h})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != 0 {
			if resp.Body != nil {
				return p.m.s.apiError(op, resp, 1)
			}
			return &APIError{Op: op, StatusCode: resp.StatusCode}
		}
		return p.m.s.redactErr(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	// Liveness: a stream may rightly stay silent for hours, so the
	// connection is pinged; a ping unanswered for IdleTimeout while the
	// reader waits on the network ends the connection.
	var waiting atomic.Int64 // when the reader began waiting; 0: not waiting
	pctx, pcancel := context.WithCancel(p.ctx)
	defer pcancel()
	go func() {
		tick := time.NewTicker(p.m.s.opts.IdleTimeout / 2)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			since := waiting.Load()
			if since == 0 || time.Since(time.Unix(0, since)) < p.m.s.opts.IdleTimeout/2 {
				continue
			}
			ctx, cancel := context.WithTimeout(pctx, p.m.s.opts.IdleTimeout)
			err := conn.Ping(ctx)
			cancel()
			if err != nil && pctx.Err() == nil && waiting.Load() == since {
				conn.CloseNow()
				return
			}
		}
	}()
	var seen int64
	for {
		waiting.Store(time.Now().UnixNano())
		_, data, err := conn.Read(p.ctx)
		waiting.Store(0)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return nil
			}
			return fmt.Errorf("%s: %w", op, err)
		}
		if skip := *received - seen; skip > 0 {
			n := min(skip, int64(len(data)))
			seen += n
			data = data[n:]
		}
		seen += int64(len(data))
		*received = max(*received, seen)
		p.demux.write(data)
	}
}

// demuxer splits the daemon's labelled log (records of a 3-byte label,
// then one line through its newline) into the two streams. A line holds
// no newline but its last byte, so the label of the next record is known
// even when a line holds label bytes.
type demuxer struct {
	out, err *tail
	label    []byte
	cur      *tail // the stream of the line being read; nil between lines
}

func (d *demuxer) write(b []byte) {
	for len(b) > 0 {
		if d.cur == nil {
			n := min(3-len(d.label), len(b))
			d.label = append(d.label, b[:n]...)
			b = b[n:]
			if len(d.label) < 3 {
				return
			}
			switch {
			case bytes.Equal(d.label, stdoutLabel):
				d.cur = d.out
			case bytes.Equal(d.label, stderrLabel):
				d.cur = d.err
			default:
				// Not a label: the daemon wrote a line of its own; it is
				// taken for output.
				d.cur = d.out
				d.cur.write(d.label, false)
			}
			d.label = d.label[:0]
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			d.cur.write(b, false)
			return
		}
		d.cur.write(b[:i+1], true)
		b = b[i+1:]
		d.cur = nil
	}
}

// tail writes one stream to its pipe, line by line as the daemon sends
// them, removing the script's end mark (mark and a newline) from the end
// of the line it ends. Within a line it holds back as many bytes as the
// mark has.
type tail struct {
	w      *io.PipeWriter
	mark   []byte
	line   []byte // the held end of the current line
	marked bool
	gone   bool // the reader closed the pipe: output is discarded
}

// write adds bytes of the current line; end says they end it.
func (t *tail) write(b []byte, end bool) {
	t.line = append(t.line, b...)
	if end {
		if bytes.HasSuffix(t.line, t.mark) {
			t.line = t.line[:len(t.line)-len(t.mark)]
			t.marked = true
		}
		t.emit(t.line)
		t.line = t.line[:0]
		return
	}
	if n := len(t.line) - len(t.mark); n > 0 {
		t.emit(t.line[:n])
		t.line = t.line[:copy(t.line, t.line[n:])]
	}
}

func (t *tail) emit(b []byte) {
	if len(b) == 0 || t.gone {
		return
	}
	if _, err := t.w.Write(b); err != nil {
		t.gone = true
	}
}

// finish ends the stream (with err, when not nil) and reports whether the
// mark was seen.
func (t *tail) finish(err error) bool {
	t.emit(t.line)
	t.line = nil
	if err != nil {
		t.w.CloseWithError(err)
	} else {
		t.w.Close()
	}
	return t.marked
}

// stdinWriter feeds a process's standard input through the session API
// (POST .../command/{cmdId}/input): each Write sends its bytes as lines of
// base64, which the script decodes; Close sends the end line ".".
type stdinWriter struct {
	p      *process
	mu     sync.Mutex
	closed bool
}

// stdinChunk is the most bytes one input request carries.
const stdinChunk = 48 << 10

func (w *stdinWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, fmt.Errorf("daytona: the input of %q is closed: %w", w.p.name, io.ErrClosedPipe)
	}
	n := 0
	for len(b) > 0 {
		c := b[:min(len(b), stdinChunk)]
		if err := w.send(base64.StdEncoding.EncodeToString(c) + "\n"); err != nil {
			return n, err
		}
		n += len(c)
		b = b[len(c):]
	}
	return n, nil
}

// Close ends the input; repeat-safe. A process that already exited is not
// an error.
func (w *stdinWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.send(".\n")
	if errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return err
}

func (w *stdinWriter) send(data string) error {
	p := w.p
	for attempt := 0; ; attempt++ {
		if p.killed.Load() || p.ctx.Err() != nil {
			return fmt.Errorf("daytona: %q has ended: %w", p.name, io.ErrClosedPipe)
		}
		err := p.m.s.call(p.ctx, request{op: fmt.Sprintf("writing to the input of %q in sandbox %s", p.name, p.m.id), method: http.MethodPost, url: p.commandURL() + "/input", body: map[string]any{"data": data}}, nil)
		var apiErr *APIError
		switch {
		case err == nil:
			return nil
		case p.ctx.Err() != nil:
			return fmt.Errorf("daytona: %q has ended: %w", p.name, io.ErrClosedPipe)
		case errors.As(err, &apiErr) && (apiErr.StatusCode == http.StatusGone || apiErr.StatusCode == http.StatusNotFound):
			return fmt.Errorf("daytona: %q has ended: %w", p.name, io.ErrClosedPipe)
		case errors.As(err, &apiErr) && apiErr.StatusCode >= 500 && strings.Contains(apiErr.Message, "open input pipe") && attempt < 50:
			// The daemon makes the command's input FIFO as the command
			// starts: input sent before then finds none, and nothing was
			// written.
			select {
			case <-p.ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		default:
			return err
		}
	}
}
