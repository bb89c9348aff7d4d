package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// machine is one started sandbox, reached through its toolbox.
type machine struct {
	s       *Service
	id      string
	toolbox string // {toolboxProxyUrl}/{sandboxId}

	homeMu sync.Mutex
	home   string
}

var _ remote.Machine = (*machine)(nil)

func (s *Service) machine(sb sandboxJSON) *machine {
	return &machine{s: s, id: sb.ID, toolbox: strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + url.PathEscape(sb.ID)}
}

// ID implements remote.Machine.
func (m *machine) ID() string { return m.id }

// Destroy implements remote.Machine; repeat-safe.
func (m *machine) Destroy(ctx context.Context) error { return m.s.Destroy(ctx, m.id) }

// call makes a toolbox request; a failure is explained by the sandbox's
// own state when the sandbox is gone.
func (m *machine) call(ctx context.Context, rq request, out any) error {
	return m.explain(ctx, m.s.call(ctx, rq, out))
}

// explain turns a toolbox failure of a sandbox that no longer exists into
// ErrSandboxGone.
func (m *machine) explain(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrRateLimited) {
		return err
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode < 500 && apiErr.StatusCode != http.StatusNotFound && apiErr.StatusCode != http.StatusGone {
		return err
	}
	if _, gerr := m.s.sandbox(ctx, m.id); errors.Is(gerr, ErrSandboxGone) {
		return fmt.Errorf("%w (%v)", gerr, err)
	}
	return err
}

// homeDir is the sandbox user's home (GET /user-home-dir), asked once.
func (m *machine) homeDir(ctx context.Context) (string, error) {
	m.homeMu.Lock()
	defer m.homeMu.Unlock()
	if m.home != "" {
		return m.home, nil
	}
	var v struct {
		Dir string `json:"dir"`
	}
	if err := m.call(ctx, request{op: "reading the home directory of sandbox " + m.id, method: http.MethodGet, url: m.toolbox + "/user-home-dir", idempotent: true}, &v); err != nil {
		return "", err
	}
	if !path.IsAbs(v.Dir) {
		return "", fmt.Errorf("daytona: sandbox %s: the home directory %q is not absolute", m.id, v.Dir)
	}
	m.home = path.Clean(v.Dir)
	return m.home, nil
}

// abs resolves a guest path against the home.
func (m *machine) abs(ctx context.Context, p string) (string, error) {
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	home, err := m.homeDir(ctx)
	if err != nil {
		return "", err
	}
	return path.Join(home, p), nil
}

// Upload implements remote.Machine: POST /files/upload?path=, the content
// streamed as the multipart part "file" (never held whole). The upload is
// bounded by IdleTimeout without progress, not by its length; a request
// answered 429 is not retried (its body is spent).
func (m *machine) Upload(ctx context.Context, p string, r io.Reader) error {
	dst, err := m.abs(ctx, p)
	if err != nil {
		return err
	}
	op := "uploading " + dst + " to sandbox " + m.id
	uctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wd := newWatchdog(m.s.opts.IdleTimeout, func() {
		cancel(fmt.Errorf("daytona: %s: no progress for %v", op, m.s.opts.IdleTimeout))
	})
	defer wd.stop()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", path.Base(dst))
		if err == nil {
			_, err = io.Copy(part, &producerReader{r: r, wd: wd})
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(uctx, http.MethodPost, m.toolbox+"/files/upload?"+url.Values{"path": {dst}}.Encode(), pr)
	if err != nil {
		pr.CloseWithError(err)
		return err
	}
	m.s.authorize(req.Header)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	resp, err := m.s.client.Do(req)
	pr.CloseWithError(errors.New("the upload ended"))
	if err != nil {
		if c := context.Cause(uctx); c != nil && ctx.Err() == nil {
			return c
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return m.explain(ctx, fmt.Errorf("daytona: %s: %w", op, m.s.redactErr(err)))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return m.explain(ctx, m.s.apiError(op, resp, 1))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return nil
}

// Download implements remote.Machine: GET /files/download?path=,
// streamed. Reading it is bounded by IdleTimeout without progress; Close
// ends the request.
func (m *machine) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	src, err := m.abs(ctx, p)
	if err != nil {
		return nil, err
	}
	op := "downloading " + src + " from sandbox " + m.id
	resp, err := m.s.send(ctx, request{op: op, method: http.MethodGet, url: m.toolbox + "/files/download?" + url.Values{"path": {src}}.Encode(), idempotent: true,
		header: http.Header{"Accept": {"application/octet-stream"}}})
	if err != nil {
		return nil, m.explain(ctx, err)
	}
	cb := resp.Body.(*cancelBody)
	if !cb.takeOver() {
		cb.Close()
		return nil, fmt.Errorf("daytona: %s: no answer within %v", op, m.s.opts.RequestTimeout)
	}
	d := &download{cb: cb, op: op}
	d.wd = newWatchdog(m.s.opts.IdleTimeout, func() {
		d.idle.Store(true)
		cb.cancel()
	})
	d.wd.pause() // armed only while a Read waits for the network
	return d, nil
}

// download is a streamed file.
type download struct {
	cb   *cancelBody
	op   string
	wd   *watchdog
	idle atomic.Bool
}

func (d *download) Read(p []byte) (int, error) {
	d.wd.resume()
	n, err := d.cb.ReadCloser.Read(p)
	d.wd.pause()
	if err != nil && err != io.EOF && d.idle.Load() {
		err = fmt.Errorf("daytona: %s: no progress for %v: %w", d.op, d.wd.d, err)
	}
	return n, err
}

func (d *download) Close() error {
	d.wd.stop()
	return d.cb.Close()
}

// watchdog calls fire when it has run for d without a reset; pause and
// resume stop and restart its clock.
type watchdog struct {
	d     time.Duration
	mu    sync.Mutex
	t     *time.Timer
	ended bool
}

func newWatchdog(d time.Duration, fire func()) *watchdog {
	return &watchdog{d: d, t: time.AfterFunc(d, fire)}
}

// pause stops the clock.
func (w *watchdog) pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Stop()
}

// resume restarts the clock from zero.
func (w *watchdog) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Reset(w.d)
	}
}

// stop ends the watchdog.
func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	w.t.Stop()
}

// producerReader is an upload's source: the watchdog's clock runs while
// the transport sends (between reads) and stops while the source
// produces (in a read).
type producerReader struct {
	r  io.Reader
	wd *watchdog
}

func (p *producerReader) Read(b []byte) (int, error) {
	p.wd.pause()
	n, err := p.r.Read(b)
	p.wd.resume()
	return n, err
}
