package deterministic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/option"
)

// DefaultSandboxName is the name of a Sandbox whose options name none.
const DefaultSandboxName = "deterministic-sandbox"

// ErrReleased is wrapped by the errors of operations on a released lease:
// a Sandbox lease's runtime and stagings, or a Workspace lease's Save.
var ErrReleased = errors.New("deterministic lease released")

// errKilled is the cancellation cause of a killed process.
var errKilled = errors.New("deterministic process killed")

// ExecFunc computes the outcome of one command. It receives the literal
// command and arguments and the options the caller passed, with Cwd
// resolved to the effective logical directory (relative to the runtime's
// root). A returned *eval.ExecResult with a non-zero ExitCode is a normal
// outcome; a returned error is a failure to run the command. It may be
// called from several goroutines at once.
type ExecFunc func(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error)

// SandboxOptions configure a Sandbox.
type SandboxOptions struct {
	// Name is the provider name; "" means DefaultSandboxName. It must equal
	// its trimmed form.
	Name string
	// Exec computes command results for Exec and Spawn; nil means
	// EchoCommand.
	Exec ExecFunc
	// Release, when non-nil, is called once per lease, on its first
	// Release, with the lease id; its error is the result of that and
	// every later Release of the lease. It may be called from several
	// goroutines at once.
	Release func(ctx context.Context, leaseID string) error
}

// Command is one recorded Exec or Spawn.
type Command struct {
	// LeaseID is the lease the command ran in.
	LeaseID string
	// Command and Args are the literal executable and arguments.
	Command string
	Args    []string
	// Cwd is the effective logical working directory, relative to the
	// runtime's root.
	Cwd string
}

// FileWrite is one recorded successful write.
type FileWrite struct {
	// LeaseID is the lease written through.
	LeaseID string
	// Path is the logical path relative to the lease's root for runtime
	// writes, and the absolute staging path (the staging Root joined with
	// the relative path) for staging writes.
	Path string
	// Content is a copy of the written bytes.
	Content []byte
}

// Sandbox is a deterministic eval.SandboxProvider. It creates no process,
// container or host file: every lease owns an invocation-local in-memory
// filesystem that starts empty (a WorkspaceMaterialization in the request
// is recorded but not copied in), and commands are answered by the
// configured ExecFunc.
//
// Logical paths must be relative, forward-slash separated, without "..",
// backslashes, NUL bytes or drive letters; they are relative to the
// lease's root. WriteFile under read-only access fails with an error
// wrapping eval.ErrReadOnly; Exec and Spawn are allowed under read-only
// access because nothing real runs. File staging is in memory too, below
// "/deterministic-staging/<n>", and is writable under either access.
//
// Release of a lease kills its running processes (cancelling their
// ExecFunc context) and waits for their ExecFunc calls to return, releases
// its stagings, and makes every later runtime operation fail with
// ErrReleased.
//
// A Sandbox and its leases, runtimes, processes and stagings are safe for
// concurrent use (a process's Stdout and Stderr readers, like any
// io.Reader, are read by one goroutine at a time).
type Sandbox struct {
	name    string
	exec    ExecFunc
	release func(context.Context, string) error

	mu           sync.Mutex
	leases       int
	stagings     int
	acquisitions []eval.SandboxAcquireRequest
	commands     []Command
	releases     []string
	writes       []FileWrite
}

// NewSandbox returns a Sandbox for opts, or an error for an invalid name.
func NewSandbox(opts SandboxOptions) (*Sandbox, error) {
	name := opts.Name
	if name == "" {
		name = DefaultSandboxName
	}
	if err := checkName("sandbox", name); err != nil {
		return nil, err
	}
	return &Sandbox{name: name, exec: opts.Exec, release: opts.Release}, nil
}

// checkName validates a provider name.
func checkName(kind, name string) error {
	return option.CheckGiven("deterministic "+kind, "name", name, false)
}

// EchoCommand returns the default ExecFunc: exit code 0, the command and
// its arguments joined by spaces on stdout, and empty stderr.
func EchoCommand() ExecFunc {
	return func(_ context.Context, command string, args []string, _ eval.ExecOptions) (*eval.ExecResult, error) {
		return &eval.ExecResult{Stdout: []byte(strings.Join(append([]string{command}, args...), " "))}, nil
	}
}

// Name implements eval.SandboxProvider.
func (s *Sandbox) Name() string { return s.name }

// Acquire implements eval.SandboxProvider. It validates the access, root
// and cwd of req, records a copy of it and returns a lease with id
// "<name>-<n>" (n counts accepted acquisitions from 1). A context that is
// already done is rejected with its cause before anything is recorded.
func (s *Sandbox) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if req == nil {
		return nil, errors.New("deterministic sandbox: nil acquire request")
	}
	if req.Access != eval.ReadOnly && req.Access != eval.ReadWrite {
		return nil, fmt.Errorf("deterministic sandbox: access %q is neither %q nor %q", req.Access, eval.ReadOnly, eval.ReadWrite)
	}
	root, err := logicalPath(req.Root)
	if err != nil {
		return nil, fmt.Errorf("deterministic sandbox: root: %w", err)
	}
	if _, err := logicalPath(req.Cwd); err != nil {
		return nil, fmt.Errorf("deterministic sandbox: cwd: %w", err)
	}
	rec := *req
	if req.Workspace != nil {
		w := *req.Workspace
		rec.Workspace = &w
	}
	s.mu.Lock()
	s.leases++
	id := s.name + "-" + strconv.Itoa(s.leases)
	s.acquisitions = append(s.acquisitions, rec)
	s.mu.Unlock()
	l := &sandboxLease{p: s, id: id, files: map[string][]byte{}}
	l.rt = &sandboxRuntime{lease: l, access: req.Access, root: req.Root, cwd: req.Cwd, base: root}
	return l, nil
}

// Acquisitions returns copies of the accepted acquire requests in
// acquisition order.
func (s *Sandbox) Acquisitions() []eval.SandboxAcquireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.acquisitions)
	for i := range out {
		if out[i].Workspace != nil {
			w := *out[i].Workspace
			out[i].Workspace = &w
		}
	}
	return out
}

// Commands returns copies of the recorded Exec and Spawn calls in the
// order they started.
func (s *Sandbox) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.commands)
	for i := range out {
		out[i].Args = slices.Clone(out[i].Args)
	}
	return out
}

// Releases returns the released lease ids in release order; a lease
// appears once however often it was released.
func (s *Sandbox) Releases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.releases)
}

// Writes returns copies of the successful runtime and staging writes in
// the order they happened.
func (s *Sandbox) Writes() []FileWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.writes)
	for i := range out {
		out[i].Content = bytes.Clone(out[i].Content)
	}
	return out
}

// Files returns a copy of a lease's in-memory files (logical path relative
// to the lease's root → content), or nil for an unknown lease id. The
// files of a released lease remain readable here.
func (s *Sandbox) Files(leaseID string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[string]string
	for _, w := range s.writes {
		if w.LeaseID != leaseID || strings.HasPrefix(w.Path, "/") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[w.Path] = string(w.Content)
	}
	return out
}

func (s *Sandbox) record(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
}

// sandboxLease is one lease of a Sandbox.
type sandboxLease struct {
	p  *Sandbox
	id string
	rt *sandboxRuntime

	mu       sync.Mutex
	released bool
	relErr   error
	files    map[string][]byte // key: path relative to the provider's "."
	procs    []*process
	nproc    int
	stagings []*staging
}

func (l *sandboxLease) ID() string                   { return l.id }
func (l *sandboxLease) Runtime() eval.SandboxRuntime { return l.rt }

// Release kills the lease's processes, releases its stagings, records the
// release once and calls the Release hook once; later calls return the
// first call's result.
func (l *sandboxLease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		err := l.relErr
		l.mu.Unlock()
		return err
	}
	l.released = true
	procs, stagings := l.procs, l.stagings
	l.procs, l.stagings = nil, nil
	l.mu.Unlock()

	for _, p := range procs {
		_ = p.Kill()
		_, _ = p.Wait()
	}
	for _, st := range stagings {
		_ = st.Release(ctx)
	}
	l.p.record(func() { l.p.releases = append(l.p.releases, l.id) })
	var err error
	if l.p.release != nil {
		err = l.p.release(ctx, l.id)
	}
	l.mu.Lock()
	l.relErr = err
	l.mu.Unlock()
	return err
}

func (l *sandboxLease) alive() error {
	if l.released {
		return fmt.Errorf("deterministic sandbox lease %s: %w", l.id, ErrReleased)
	}
	return nil
}

// sandboxRuntime is the runtime of a sandboxLease.
type sandboxRuntime struct {
	lease     *sandboxLease
	access    eval.Access
	root, cwd string
	base      string // cleaned root
}

func (r *sandboxRuntime) Access() eval.Access { return r.access }
func (r *sandboxRuntime) Root() string        { return r.root }
func (r *sandboxRuntime) Cwd() string         { return r.cwd }

// key maps a logical path relative to the root onto a filesystem key.
func (r *sandboxRuntime) key(p string) (rel, key string, err error) {
	rel, err = logicalPath(p)
	if err != nil {
		return "", "", err
	}
	return rel, path.Join(r.base, rel), nil
}

func (r *sandboxRuntime) begin(ctx context.Context, command string, args []string, opts eval.ExecOptions) (eval.ExecOptions, error) {
	if ctx.Err() != nil {
		return opts, context.Cause(ctx)
	}
	if command == "" {
		return opts, errors.New("deterministic sandbox: empty command")
	}
	cwd := r.cwd
	if opts.Cwd != "" {
		cwd = opts.Cwd
	}
	cwd, err := logicalPath(cwd)
	if err != nil {
		return opts, fmt.Errorf("deterministic sandbox: cwd: %w", err)
	}
	opts.Cwd = cwd
	r.lease.mu.Lock()
	err = r.lease.alive()
	r.lease.mu.Unlock()
	if err != nil {
		return opts, err
	}
	c := Command{LeaseID: r.lease.id, Command: command, Args: slices.Clone(args), Cwd: cwd}
	r.lease.p.record(func() { r.lease.p.commands = append(r.lease.p.commands, c) })
	return opts, nil
}

func (r *sandboxRuntime) execFunc() ExecFunc {
	if r.lease.p.exec != nil {
		return r.lease.p.exec
	}
	return EchoCommand()
}

// Exec records the command and returns the ExecFunc's result. It is
// allowed under read-only access.
func (r *sandboxRuntime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	opts, err := r.begin(ctx, command, args, opts)
	if err != nil {
		return nil, err
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	res, err := r.execFunc()(ctx, command, slices.Clone(args), opts)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("deterministic sandbox: exec returned no result")
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return res, nil
}

// Spawn records the command and runs the ExecFunc in the background. When
// opts.Stdin is nil, the process's Stdin feeds the ExecFunc's stdin;
// otherwise opts.Stdin does and writes to Stdin fail. Stdout and Stderr
// block until the ExecFunc returns and then yield its output.
func (r *sandboxRuntime) Spawn(ctx context.Context, command string, args []string, opts eval.ExecOptions) (eval.SandboxProcess, error) {
	opts, err := r.begin(ctx, command, args, opts)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancelCause(ctx)
	var timeoutCancel context.CancelFunc = func() {}
	if opts.Timeout > 0 {
		pctx, timeoutCancel = context.WithTimeout(pctx, opts.Timeout)
	}
	p := &process{cancel: cancel, done: make(chan struct{})}
	var stdinR *io.PipeReader
	if opts.Stdin == nil {
		stdinR, p.stdin = io.Pipe()
		opts.Stdin = stdinR
	} else {
		p.stdin = closedWriter{}
	}
	p.stdout = &resultReader{done: p.done, pick: func() []byte { return p.res.Stdout }}
	p.stderr = &resultReader{done: p.done, pick: func() []byte { return p.res.Stderr }}

	l := r.lease
	l.mu.Lock()
	if err := l.alive(); err != nil {
		l.mu.Unlock()
		timeoutCancel()
		cancel(err)
		return nil, err
	}
	l.nproc++
	p.id = l.id + "-proc-" + strconv.Itoa(l.nproc)
	l.procs = append(l.procs, p)
	l.mu.Unlock()

	fn := r.execFunc()
	args = slices.Clone(args)
	go func() {
		defer close(p.done)
		defer timeoutCancel()
		res, err := fn(pctx, command, args, opts)
		switch {
		case pctx.Err() != nil:
			p.res, p.err = &eval.ExecResult{ExitCode: -1}, context.Cause(pctx)
		case err != nil:
			p.res, p.err = &eval.ExecResult{ExitCode: -1}, err
		case res == nil:
			p.res, p.err = &eval.ExecResult{ExitCode: -1}, errors.New("deterministic sandbox: exec returned no result")
		default:
			p.res = res
		}
		if stdinR != nil {
			stdinR.CloseWithError(io.ErrClosedPipe)
		}
	}()
	return p, nil
}

// OpenFile implements eval.FileOpener: a reader of a file of the lease's
// in-memory filesystem as it is now (a later write replaces the file, not
// what the reader reads).
func (r *sandboxRuntime) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	data, err := r.file(ctx, p, "open")
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

var _ eval.FileOpener = (*sandboxRuntime)(nil)

// ReadFile returns a copy of a file of the lease's in-memory filesystem.
func (r *sandboxRuntime) ReadFile(ctx context.Context, p string) ([]byte, error) {
	data, err := r.file(ctx, p, "read")
	if err != nil {
		return nil, err
	}
	return bytes.Clone(data), nil
}

// file returns the content of a file of the lease's in-memory filesystem
// (never written to in place: a write replaces it); op names the
// operation in its errors.
func (r *sandboxRuntime) file(ctx context.Context, p, op string) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	rel, key, err := r.key(p)
	if err != nil {
		return nil, err
	}
	l := r.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.alive(); err != nil {
		return nil, err
	}
	data, ok := l.files[key]
	if !ok {
		if isDir(l.files, key) {
			return nil, &fs.PathError{Op: op, Path: rel, Err: errors.New("is a directory")}
		}
		return nil, &fs.PathError{Op: op, Path: rel, Err: fs.ErrNotExist}
	}
	return data, nil
}

// Stat describes a file or an implied directory (every parent of a file,
// and "."). ModTime is always the zero time.
func (r *sandboxRuntime) Stat(ctx context.Context, p string) (eval.FileInfo, error) {
	if ctx.Err() != nil {
		return eval.FileInfo{}, context.Cause(ctx)
	}
	rel, key, err := r.key(p)
	if err != nil {
		return eval.FileInfo{}, err
	}
	l := r.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.alive(); err != nil {
		return eval.FileInfo{}, err
	}
	if data, ok := l.files[key]; ok {
		return eval.FileInfo{Kind: "file", Size: int64(len(data))}, nil
	}
	if key == r.base || isDir(l.files, key) {
		return eval.FileInfo{Kind: "directory"}, nil
	}
	return eval.FileInfo{}, &fs.PathError{Op: "stat", Path: rel, Err: fs.ErrNotExist}
}

// WriteFile replaces a file, implicitly creating its parents. It fails
// with an error wrapping eval.ErrReadOnly under read-only access, and
// rejects directories and paths below an existing file.
func (r *sandboxRuntime) WriteFile(ctx context.Context, p string, data []byte) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	rel, key, err := r.key(p)
	if err != nil {
		return err
	}
	if r.access != eval.ReadWrite {
		return &fs.PathError{Op: "write", Path: rel, Err: eval.ErrReadOnly}
	}
	l := r.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.alive(); err != nil {
		return err
	}
	if key == r.base || isDir(l.files, key) {
		return &fs.PathError{Op: "write", Path: rel, Err: errors.New("is a directory")}
	}
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if _, ok := l.files[dir]; ok {
			return &fs.PathError{Op: "write", Path: rel, Err: errors.New("a parent is a file")}
		}
	}
	l.files[key] = bytes.Clone(data)
	w := FileWrite{LeaseID: l.id, Path: rel, Content: bytes.Clone(data)}
	l.p.record(func() { l.p.writes = append(l.p.writes, w) })
	return nil
}

// CreateFileStaging returns a new in-memory staging directory rooted at
// "/deterministic-staging/<n>" (n counts stagings of the provider from 1).
// It works under read-only access.
func (r *sandboxRuntime) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	l := r.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.alive(); err != nil {
		return nil, err
	}
	l.p.mu.Lock()
	l.p.stagings++
	n := l.p.stagings
	l.p.mu.Unlock()
	st := &staging{lease: l, root: "/deterministic-staging/" + strconv.Itoa(n), files: map[string][]byte{}}
	l.stagings = append(l.stagings, st)
	return st, nil
}

// isDir reports whether key is a strict parent of some file.
func isDir(files map[string][]byte, key string) bool {
	prefix := key + "/"
	if key == "." {
		return len(files) > 0
	}
	for k := range files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// logicalPath validates and cleans a logical path: relative, forward-slash
// separated, without "..", backslashes, NUL bytes or drive letters; "" and
// "." both mean the root.
func logicalPath(p string) (string, error) {
	switch {
	case p == "" || p == ".":
		return ".", nil
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("logical path %q is absolute", p)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("logical path %q contains a backslash", p)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("logical path %q contains a NUL byte", p)
	case len(p) >= 2 && p[1] == ':' && (p[0]|0x20) >= 'a' && (p[0]|0x20) <= 'z':
		return "", fmt.Errorf("logical path %q starts with a drive letter", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("logical path %q escapes its root", p)
		}
	}
	return path.Clean(p), nil
}

// staging is an in-memory eval.FileStaging.
type staging struct {
	lease *sandboxLease
	root  string

	mu       sync.Mutex
	released bool
	files    map[string][]byte
}

func (st *staging) Root() string { return st.root }

func (st *staging) WriteFile(ctx context.Context, rel string, data []byte) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	clean, err := logicalPath(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &fs.PathError{Op: "write", Path: rel, Err: errors.New("is a directory")}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.released {
		return fmt.Errorf("deterministic staging %s: %w", st.root, ErrReleased)
	}
	st.files[clean] = bytes.Clone(data)
	w := FileWrite{LeaseID: st.lease.id, Path: st.root + "/" + clean, Content: bytes.Clone(data)}
	st.lease.p.record(func() { st.lease.p.writes = append(st.lease.p.writes, w) })
	return nil
}

func (st *staging) Release(context.Context) error {
	st.mu.Lock()
	st.released = true
	clear(st.files)
	st.mu.Unlock()
	return nil
}

// process is a deterministic eval.SandboxProcess.
type process struct {
	id     string
	cancel context.CancelCauseFunc
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader

	done chan struct{}
	res  *eval.ExecResult // set before done closes
	err  error
}

func (p *process) ID() string            { return p.id }
func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }
func (p *process) Kill() error           { p.cancel(errKilled); return nil }
func (p *process) Wait() (int, error)    { <-p.done; return p.res.ExitCode, p.err }

// resultReader yields one output stream of a process once it finished.
type resultReader struct {
	done <-chan struct{}
	pick func() []byte

	once sync.Once
	r    *bytes.Reader
}

func (rr *resultReader) Read(b []byte) (int, error) {
	<-rr.done
	rr.once.Do(func() { rr.r = bytes.NewReader(rr.pick()) })
	return rr.r.Read(b)
}

// closedWriter is the Stdin of a process whose stdin came from
// ExecOptions.Stdin.
type closedWriter struct{}

func (closedWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
func (closedWriter) Close() error              { return nil }
