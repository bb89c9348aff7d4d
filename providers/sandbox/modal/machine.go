package modal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modal-labs/modal-client/go"

	"github.com/aml-go/aml/internal/pidline"
	"github.com/aml-go/aml/internal/scratch"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// machine is one Modal sandbox.
type machine struct {
	s    *Service
	sb   *sdk.Sandbox
	home string

	// ctx lives until Destroy or Service.Close: the watcher and the
	// processes' waits run under it.
	ctx    context.Context
	cancel context.CancelFunc
	// gone is closed when the sandbox ended under the machine; goneErr is
	// set before.
	gone     chan struct{}
	goneErr  error
	goneOnce sync.Once

	destroyed   atomic.Bool
	destroyOnce sync.Once
	destroyErr  error
}

var _ remote.Machine = (*machine)(nil)

func (s *Service) newMachine(sb *sdk.Sandbox) *machine {
	ctx, cancel := context.WithCancel(s.base)
	m := &machine{s: s, sb: sb, home: s.workdir, ctx: ctx, cancel: cancel, gone: make(chan struct{})}
	go m.watch()
	return m
}

// ID implements remote.Machine: the sandbox id.
func (m *machine) ID() string { return m.sb.SandboxID }

// watch waits for the sandbox's end (Sandbox.Wait long-polls), so that
// commands whose sandbox ended from outside fail with the cause.
func (m *machine) watch() {
	delay := time.Second
	for {
		code, err := m.sb.Wait(m.ctx, nil)
		if m.ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			m.setGone(fmt.Errorf("modal: sandbox %s ended: %s: %w", m.ID(), describeEnd(code), ErrSandboxGone))
			return
		case isNotFound(err):
			m.setGone(fmt.Errorf("modal: sandbox %s no longer exists: %w", m.ID(), ErrSandboxGone))
			return
		}
		// A failed long poll (the network) is tried again.
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (m *machine) setGone(err error) {
	m.goneOnce.Do(func() {
		m.goneErr = err
		close(m.gone)
	})
}

// ended returns why the sandbox no longer runs commands, or nil.
func (m *machine) ended() error {
	select {
	case <-m.gone:
		return m.goneErr
	default:
	}
	if m.destroyed.Load() {
		return fmt.Errorf("modal: sandbox %s was destroyed: %w", m.ID(), ErrSandboxGone)
	}
	return nil
}

// endedNow asks the service whether the sandbox ended (the watcher may
// not have heard yet).
func (m *machine) endedNow() error {
	if err := m.ended(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.s.opts.RequestTimeout)
	defer cancel()
	code, err := m.sb.Poll(ctx, nil)
	switch {
	case err == nil && code != nil:
		m.setGone(fmt.Errorf("modal: sandbox %s ended: %s: %w", m.ID(), describeEnd(*code), ErrSandboxGone))
	case isNotFound(err):
		m.setGone(fmt.Errorf("modal: sandbox %s no longer exists: %w", m.ID(), ErrSandboxGone))
	}
	return m.ended()
}

func (m *machine) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(m.home, p)
}

// Start implements remote.Machine: Sandbox.Exec of the argv under the
// wrapper, in Command.Dir with Command.Env and Modal's exec timeout of
// Command.Timeout rounded up to whole seconds. ctx bounds the start
// (and RequestTimeout).
func (m *machine) Start(ctx context.Context, c remote.Command) (remote.Process, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, errors.New("modal: empty command")
	}
	for k := range c.Env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("modal: the environment variable name %q is refused by Modal (letters, digits and _, not starting with a digit)", k)
		}
	}
	if err := m.ended(); err != nil {
		return nil, err
	}
	params := &sdk.SandboxExecParams{Workdir: m.abs(c.Dir), Env: c.Env}
	if c.Timeout > 0 {
		params.Timeout = (c.Timeout + time.Second - 1) / time.Second * time.Second
	}
	argv := append([]string{"/bin/sh", "-c", pidline.Wrapper, "aml-exec"}, c.Args...)
	var cp *sdk.ContainerProcess
	err := m.s.call(ctx, fmt.Sprintf("starting %q in %s", c.Args[0], m.ID()), m.s.opts.RequestTimeout, func(ctx context.Context) error {
		var err error
		cp, err = m.sb.Exec(ctx, argv, params)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			if gone := m.endedNow(); gone != nil {
				return nil, gone
			}
		}
		return nil, err
	}
	p := newProcess(m, cp, c)
	if !c.Stdin {
		if err := cp.Stdin.Close(); err != nil {
			_ = p.Kill()
			return nil, fmt.Errorf("modal: closing the input of %q: %w", c.Args[0], err)
		}
	} else {
		p.stdin = &stdinWriter{w: cp.Stdin}
	}
	return p, nil
}

// process is one exec.
type process struct {
	m       *machine
	cp      *sdk.ContainerProcess
	name    string
	timeout time.Duration
	stdin   *stdinWriter
	stderr  *io.PipeReader

	pid pidline.ID

	// waited is closed when the exec's wait returned (code, werr).
	waited chan struct{}
	code   int
	werr   error

	killOnce sync.Once
	killed   atomic.Bool

	resultOnce sync.Once
	resCode    int
	resErr     error
}

func newProcess(m *machine, cp *sdk.ContainerProcess, c remote.Command) *process {
	pr, pw := io.Pipe()
	p := &process{m: m, cp: cp, name: c.Args[0], timeout: c.Timeout, stderr: pr, waited: make(chan struct{})}
	go func() {
		// stderr is pumped at once: the wrapper's line (the process id)
		// must be known before the caller reads, for Kill.
		_, err := io.Copy(&pidline.Writer{Dst: pw, Set: p.pid.Set}, cp.Stderr)
		p.pid.Set(nil)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	go func() {
		p.code, p.werr = cp.Wait(m.ctx, nil)
		close(p.waited)
	}()
	return p
}

// Stdin implements remote.Process.
func (p *process) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nil
	}
	return p.stdin
}

// Stdout implements remote.Process.
func (p *process) Stdout() io.Reader { return p.cp.Stdout }

// Stderr implements remote.Process.
func (p *process) Stderr() io.Reader { return p.stderr }

// Wait implements remote.Process: the exit code (128+signal when a signal
// ended it); a sandbox that ended under the command, and Modal's exec
// timeout, are errors that say so. Repeat-safe.
func (p *process) Wait() (int, error) {
	p.resultOnce.Do(func() {
		select {
		case <-p.waited:
		case <-p.m.gone:
			// The exec's own end may still come: it may have exited just
			// before its sandbox.
			select {
			case <-p.waited:
			case <-time.After(2 * time.Second):
				p.resErr = fmt.Errorf("modal: command %q: %w", p.name, p.m.goneErr)
				return
			}
		}
		var timeout sdk.ExecTimeoutError
		switch {
		case p.werr != nil && errors.As(p.werr, &timeout):
			p.resErr = fmt.Errorf("modal: command %q ran past its timeout of %v: %w", p.name, p.timeout, p.werr)
		case p.werr != nil:
			if gone := p.m.endedNow(); gone != nil {
				p.resErr = fmt.Errorf("modal: command %q: %w", p.name, gone)
			} else {
				p.resErr = p.m.s.explain(fmt.Sprintf("waiting for %q", p.name), p.werr)
			}
		case p.code > 128 && !p.killed.Load():
			// A signal it did not get from Kill: its sandbox may have
			// ended.
			if gone := p.m.endedNow(); gone != nil {
				p.resErr = fmt.Errorf("modal: command %q: %w", p.name, gone)
				return
			}
			p.resCode = p.code
		default:
			p.resCode = p.code
		}
	})
	return p.resCode, p.resErr
}

// Kill implements remote.Process: the process group (or the process) is
// killed by an exec of kill in the sandbox; unless it then ends (its id
// never came, or the kill failed), the sandbox is terminated
// (pidline.Kill). Repeat-safe.
func (p *process) Kill() error {
	p.killOnce.Do(func() {
		p.killed.Store(true)
		pidline.Kill(p.waited, &p.pid, p.signal, func() { _ = p.m.Destroy(context.Background()) })
	})
	return nil
}

// signal runs the kill in the sandbox.
func (p *process) signal(pid int64) {
	ctx, cancel := context.WithTimeout(p.m.ctx, p.m.s.opts.RequestTimeout)
	defer cancel()
	k, err := p.m.sb.Exec(ctx, pidline.KillArgv(pid), &sdk.SandboxExecParams{Stdout: sdk.Ignore, Stderr: sdk.Ignore})
	if err != nil {
		return
	}
	_ = k.Stdin.Close()
	_, _ = k.Wait(ctx, nil)
}

// stdinChunk bounds one write of input (one call to the router).
const stdinChunk = 1 << 20

// stdinWriter is a process's input: the SDK's, serialized and cut in
// chunks.
type stdinWriter struct {
	mu     sync.Mutex
	w      io.WriteCloser
	closed bool
}

// Write writes b in chunks.
func (s *stdinWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, os.ErrClosed
	}
	n := 0
	for len(b) > 0 {
		c := b[:min(len(b), stdinChunk)]
		k, err := s.w.Write(c)
		n += k
		if err != nil {
			return n, err
		}
		b = b[len(c):]
	}
	return n, nil
}

// Close ends the input; repeat-safe.
func (s *stdinWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.w.Close()
}

// Upload implements remote.Machine with the SDK's filesystem API
// (CopyFromLocal, which creates missing parents). The data is spooled to
// a private temporary file, as the API reads a local file.
func (m *machine) Upload(ctx context.Context, p string, r io.Reader) error {
	if err := m.ended(); err != nil {
		return err
	}
	dst := m.abs(p)
	dir, err := scratch.MkdirTemp("aml-modal-upload-")
	if err != nil {
		return err
	}
	defer scratch.RemoveAll(dir)
	local := filepath.Join(dir, "data")
	f, err := os.OpenFile(local, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, &ctxReader{ctx: ctx, r: r})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("modal: spooling the upload to %s: %w", dst, err)
	}
	if err := m.sb.Filesystem.CopyFromLocal(ctx, local, dst, nil); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if gone := m.endedNow(); gone != nil {
			return gone
		}
		return m.s.explain("uploading "+dst, err)
	}
	return nil
}

// ctxReader stops reading when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

// Read reads unless ctx is done.
func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(b)
}

// downloadScript prints the segment of the regular file $1 that starts
// at block $2 and holds at most $3 blocks of a MiB (exit 66: it does not
// exist, 67: it is not a regular file, 68: it cannot be read).
const downloadScript = `if [ ! -e "$1" ]; then exit 66; fi
if [ ! -f "$1" ]; then exit 67; fi
if [ ! -r "$1" ]; then exit 68; fi
exec dd if="$1" bs=1048576 skip="$2" count="$3" 2>/dev/null`

// downloadBlocks is the size of a download's segment, in MiB blocks.
// The SDK's router connection lets Modal send up to 64 MiB ahead of the
// reader, so a file is read in segments of one exec each: what is
// received but not yet read stays under one segment, however slow the
// reader.
const downloadBlocks = 8

// Download implements remote.Machine: the file streamed through Exec in
// segments of 8 MiB (dd). It returns once the first bytes came (or the
// file ended), so a file that is missing or not a regular file is an
// error here; cancelling ctx, or closing the reader before its end, kills
// the segment's process.
func (m *machine) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	d := &download{m: m, path: m.abs(p)}
	d.stop = context.AfterFunc(ctx, func() { d.abort(context.Cause(ctx)) })
	if err := d.next(ctx); err != nil {
		d.Close()
		return nil, err
	}
	if _, err := d.r.Peek(1); err != nil {
		if err = d.failure(err); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// download is the reader of one Download. Read is not safe for
// concurrent use; Close and the cancellation may come while it reads.
type download struct {
	m    *machine
	path string
	stop func() bool
	// off is where the current segment starts, got what was read of it.
	off, got int64
	r        *bufio.Reader
	errText  chan string

	mu      sync.Mutex
	cur     *process
	end     error // io.EOF, or why the download failed
	stopErr error // set by Close or the cancellation
}

const segmentSize = downloadBlocks << 20

// next starts the segment at d.off.
func (d *download) next(ctx context.Context) error {
	d.mu.Lock()
	stopErr := d.stopErr
	d.mu.Unlock()
	if stopErr != nil {
		return stopErr
	}
	proc, err := d.m.Start(ctx, remote.Command{Args: []string{"/bin/sh", "-c", downloadScript, "aml-download", d.path,
		strconv.FormatInt(d.off/(1<<20), 10), strconv.Itoa(downloadBlocks)}})
	if err != nil {
		return err
	}
	p := proc.(*process)
	d.mu.Lock()
	d.cur, stopErr = p, d.stopErr
	d.mu.Unlock()
	if stopErr != nil {
		_ = p.Kill()
	}
	d.got = 0
	d.r = bufio.NewReaderSize(p.Stdout(), 64<<10)
	errText := make(chan string, 1)
	d.errText = errText
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, io.LimitReader(p.Stderr(), 4<<10))
		_, _ = io.Copy(io.Discard, p.Stderr())
		errText <- strings.TrimSpace(b.String())
	}()
	return nil
}

// abort stops the download with err (the first one wins) and kills the
// segment's process.
func (d *download) abort(err error) {
	d.mu.Lock()
	if d.stopErr == nil {
		d.stopErr = err
	}
	p := d.cur
	d.mu.Unlock()
	if p != nil {
		select {
		case <-p.waited:
		default:
			_ = p.Kill()
		}
	}
}

// failure is the error of a segment that ended with err (io.EOF when its
// output ended), once its process exited.
func (d *download) failure(err error) error {
	code, werr := d.cur.Wait()
	d.mu.Lock()
	stopErr := d.stopErr
	d.mu.Unlock()
	switch {
	case stopErr != nil:
		return stopErr
	case err != io.EOF:
		return fmt.Errorf("modal: download %s: %w", d.path, err)
	case werr != nil:
		return werr
	case code == 66:
		return fmt.Errorf("modal: download %s: %w", d.path, os.ErrNotExist)
	case code == 67:
		return fmt.Errorf("modal: download %s: not a regular file", d.path)
	case code == 68:
		return fmt.Errorf("modal: download %s: %w", d.path, os.ErrPermission)
	case code != 0:
		return fmt.Errorf("modal: download %s: dd exited %d %s", d.path, code, <-d.errText)
	}
	return nil
}

// Read reads the file, segment after segment.
func (d *download) Read(b []byte) (int, error) {
	if d.end != nil {
		return 0, d.end
	}
	for {
		n, err := d.r.Read(b)
		d.got += int64(n)
		if n > 0 {
			return n, nil
		}
		if err == nil {
			continue
		}
		if err = d.failure(err); err == nil {
			if d.got < segmentSize {
				err = io.EOF // the file ended within the segment
			} else {
				d.off += d.got
				err = d.next(context.Background())
			}
		}
		if err != nil {
			d.end = err
			return 0, err
		}
	}
}

// Close ends the download: a segment still running is killed.
func (d *download) Close() error {
	d.stop()
	d.abort(os.ErrClosed)
	return nil
}

// Destroy implements remote.Machine: the sandbox is terminated (even when
// ctx is cancelled, within RequestTimeout); repeat-safe.
func (m *machine) Destroy(ctx context.Context) error {
	m.destroyOnce.Do(func() {
		m.destroyed.Store(true)
		m.destroyErr = m.s.terminate(ctx, m.sb)
		m.cancel()
	})
	return m.destroyErr
}
