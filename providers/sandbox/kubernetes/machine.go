package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/aml-go/aml/internal/pidline"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// machine is one sandbox's pod.
type machine struct {
	s   *Service
	ref objectRef
	pod string
	// uid is the pod's: a pod of the same name that the controller made
	// after this one was deleted is not this sandbox (its tree is not the
	// lease's, and mirroring it would lose the source's files).
	uid types.UID

	// ctx lives until Destroy: the processes' streams run under it.
	ctx    context.Context
	cancel context.CancelFunc

	destroyOnce sync.Once
	destroyErr  error
	destroyed   atomic.Bool
}

var _ remote.Machine = (*machine)(nil)

func (s *Service) newMachine(ref objectRef, pod string, uid types.UID) *machine {
	ctx, cancel := context.WithCancel(context.Background())
	return &machine{s: s, ref: ref, pod: pod, uid: uid, ctx: ctx, cancel: cancel}
}

// ID implements remote.Machine: "namespace/kind/name" of the Sandbox or
// SandboxClaim.
func (m *machine) ID() string { return m.ref.id() }

// Destroy implements remote.Machine: the streams end, the object and its
// pod are deleted. Repeat-safe.
func (m *machine) Destroy(ctx context.Context) error {
	m.destroyOnce.Do(func() {
		m.destroyed.Store(true)
		m.cancel()
		m.destroyErr = m.s.delete(context.WithoutCancel(ctx), m.ref, m.pod)
	})
	return m.destroyErr
}

// wrapper is the shell source every command runs under ("sh -c wrapper
// aml-exec DIR N NAME=VALUE... ARGV..."): it enters DIR, exports the N
// variables and starts the argv as its child, in a session of its own
// (setsid, where the image has it, so that the kill reaches what the
// command starts), with the exec's input; the child says its process id
// on stderr first (internal/pidline), then becomes the argv. The shell
// waits for it and exits with its status.
//
// The shell stays, rather than exec the argv itself: the container
// runtime (containerd's CRI, seen with 1.6) ends the input of an exec
// whose first process replaced itself and writes nothing, after the first
// chunk, so that "exec cat > file" would get a part of its input.
const wrapper = `cd -- "$1" && n=$2 && shift 2 && while [ "$n" -gt 0 ]; do export "$1" && shift && n=$((n - 1)); done || exit 126
s=
command -v setsid >/dev/null 2>&1 && s=setsid
exec 3<&0
$s sh -c 'echo $$ >&2 && exec "$@"' aml-exec "$@" <&3 3<&- &
exec 3<&-
wait $!`

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (m *machine) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join("/", p)
}

// executor is the exec of argv in the pod's sandbox container, over
// WebSocket (the v5 protocol, which can close the input), else SPDY.
func (m *machine) executor(argv []string, stdin bool) (remotecommand.Executor, error) {
	req := m.s.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(m.ref.namespace).Name(m.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: m.container(), Command: argv, Stdin: stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(m.s.cfg, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(m.s.cfg, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// container is the container commands run in: the provider's own for an
// image, else the pod's first (a template's, a pool's), named by exec's
// default.
func (m *machine) container() string {
	if m.s.opts.Image != "" {
		return containerName
	}
	return ""
}

// ended says why the pod no longer runs commands, or nil.
func (m *machine) ended(ctx context.Context) error {
	if m.destroyed.Load() {
		return fmt.Errorf("kubernetes sandbox %s was destroyed: %w", m.ID(), ErrPodGone)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.s.opts.RequestTimeout)
	defer cancel()
	p, err := m.s.pod(ctx, m.ref.namespace, m.pod)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes sandbox %s: pod %s was deleted: %w", m.ID(), m.pod, ErrPodGone)
	case err != nil:
		return nil // cannot tell
	case p.UID != m.uid:
		return fmt.Errorf("kubernetes sandbox %s: pod %s was deleted (the one of that name now is another, made after it): %w", m.ID(), m.pod, ErrPodGone)
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("kubernetes sandbox %s: pod %s is being deleted: %w", m.ID(), m.pod, ErrPodGone)
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		why := string(p.Status.Phase)
		if p.Status.Reason != "" {
			why += ", " + p.Status.Reason // Evicted
		}
		if p.Status.Message != "" {
			why += ": " + p.Status.Message
		}
		return fmt.Errorf("kubernetes sandbox %s: pod %s stopped (%s): %w", m.ID(), m.pod, why, ErrPodGone)
	}
	return nil
}

// Start implements remote.Machine: an exec of the argv under wrapper.
// The stream is opened in the background: ctx is not needed past the
// checks, and a stream that cannot be opened fails Wait.
func (m *machine) Start(ctx context.Context, c remote.Command) (remote.Process, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, errors.New("kubernetes sandbox: empty command")
	}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("kubernetes sandbox: the environment variable name %q cannot be exported (letters, digits and _, not starting with a digit)", k)
		}
		keys = append(keys, k)
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if err := m.ended(ctx); err != nil {
		return nil, err
	}
	argv := []string{"/bin/sh", "-c", wrapper, "aml-exec", m.abs(c.Dir), strconv.Itoa(len(keys))}
	for _, k := range sortStrings(keys) {
		argv = append(argv, k+"="+c.Env[k])
	}
	argv = append(argv, c.Args...)
	ex, err := m.executor(argv, c.Stdin)
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	p := newProcess(m, c)
	var stdin io.Reader
	if c.Stdin {
		pr, pw := io.Pipe()
		p.stdin = pw
		stdin = pr
	}
	go p.run(ex, stdin)
	return p, nil
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// process is one exec.
type process struct {
	m       *machine
	name    string
	timeout time.Duration

	stdin          *io.PipeWriter
	stdout, stderr *io.PipeReader
	outW, errW     *io.PipeWriter

	// ctx ends the stream: Kill cancels it once the process is killed,
	// or when it cannot be.
	ctx    context.Context
	cancel context.CancelFunc

	pid pidline.ID

	// done is closed when the stream ended with err.
	done chan struct{}
	err  error

	killOnce sync.Once
	killed   atomic.Bool

	resultOnce sync.Once
	code       int
	resErr     error
}

func newProcess(m *machine, c remote.Command) *process {
	p := &process{m: m, name: c.Args[0], timeout: c.Timeout, done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(m.ctx)
	p.stdout, p.outW = io.Pipe()
	p.stderr, p.errW = io.Pipe()
	return p
}

// run streams the exec until it ends.
func (p *process) run(ex remotecommand.Executor, stdin io.Reader) {
	defer p.cancel()
	errOut := &pidline.Writer{Dst: p.errW, Set: p.pid.Set}
	err := ex.StreamWithContext(p.ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: p.outW, Stderr: errOut})
	p.pid.Set(nil)
	if stdin != nil {
		stdin.(*io.PipeReader).CloseWithError(errors.New("the command ended"))
	}
	p.err = err
	close(p.done)
	end := err
	if end == nil || isExit(err) {
		end = io.EOF
	}
	p.outW.CloseWithError(end)
	p.errW.CloseWithError(end)
}

func isExit(err error) bool {
	var ce utilexec.CodeExitError
	return errors.As(err, &ce)
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

// Wait implements remote.Process: the exit code (128+signal when a signal
// ended it); a pod that went away under the command is an error that
// says so (ErrPodGone). Repeat-safe.
func (p *process) Wait() (int, error) {
	p.resultOnce.Do(func() {
		<-p.done
		var ce utilexec.CodeExitError
		switch {
		case p.err == nil:
		case errors.As(p.err, &ce):
			p.code = ce.ExitStatus()
			if p.code > 128 && !p.killed.Load() {
				// A signal it did not get from Kill: its pod may have
				// gone.
				if gone := p.m.ended(context.Background()); gone != nil {
					p.resErr = fmt.Errorf("kubernetes sandbox: command %q: %w", p.name, gone)
				}
			}
		case p.killed.Load():
			p.code = 137
		default:
			if gone := p.m.ended(context.Background()); gone != nil {
				p.resErr = fmt.Errorf("kubernetes sandbox: command %q: %w", p.name, gone)
			} else {
				p.resErr = fmt.Errorf("kubernetes sandbox: command %q in pod %s: %w", p.name, p.m.pod, p.m.s.explain("create", "pods/exec", p.err))
			}
		}
	})
	return p.code, p.resErr
}

// Kill implements remote.Process: the process group (or the process) is
// killed by a second exec; unless it then ends, the stream is closed,
// and then the pod deleted (pidline.Kill). Repeat-safe.
func (p *process) Kill() error {
	p.killOnce.Do(func() {
		p.killed.Store(true)
		pidline.Kill(p.done, &p.pid, p.signal, p.cancel, func() { _ = p.m.Destroy(context.Background()) })
	})
	return nil
}

// signal runs the kill in the pod.
func (p *process) signal(pid int64) {
	ctx, cancel := context.WithTimeout(p.m.ctx, p.m.s.opts.RequestTimeout)
	defer cancel()
	_ = p.m.run(ctx, pidline.KillArgv(pid), nil, io.Discard, io.Discard)
}

// run is one exec to its end, with the streams given.
func (m *machine) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	ex, err := m.executor(argv, stdin != nil)
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// transferError explains a failed cat: the pod's end, the command's
// words, or the stream's error.
func (m *machine) transferError(ctx context.Context, what string, err error, stderr *lockedBuffer) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if gone := m.ended(ctx); gone != nil {
		return fmt.Errorf("%s: %w", what, gone)
	}
	if isExit(err) {
		return fmt.Errorf("%s: %s: %w", what, strings.TrimSpace(stderr.String()), err)
	}
	return fmt.Errorf("%s in pod %s: %w", what, m.pod, m.s.explain("create", "pods/exec", err))
}

// Upload implements remote.Machine: cat into the file, its input
// streamed.
func (m *machine) Upload(ctx context.Context, p string, r io.Reader) error {
	if err := m.ended(ctx); err != nil {
		return err
	}
	dst := m.abs(p)
	var stderr lockedBuffer
	// The reader is wrapped so that the stream cannot close the
	// caller's.
	// The shell outlives cat: see wrapper.
	if err := m.run(ctx, []string{"/bin/sh", "-c", `cat > "$1"; s=$?; exit $s`, "aml-upload", dst}, io.MultiReader(r), io.Discard, &stderr); err != nil {
		return m.transferError(ctx, "uploading "+dst, err, &stderr)
	}
	return nil
}

// Download implements remote.Machine: cat of the file, streamed.
func (m *machine) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := m.ended(ctx); err != nil {
		return nil, err
	}
	src := m.abs(p)
	pr, pw := io.Pipe()
	go func() {
		var stderr lockedBuffer
		err := m.run(ctx, []string{"cat", "--", src}, nil, pw, &stderr)
		if err != nil {
			err = m.transferError(ctx, "downloading "+src, err, &stderr)
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// lockedBuffer is a buffer of a stream's output that may be read while
// the stream's copier still writes: an exec ended by its context returns
// before its copiers do.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
