package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.temporal.io/sdk/workflow"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// Workspace providers in workflow code.

// remoteWorkspaceProvider acquires a workspace in a scope session of its own.
type remoteWorkspaceProvider struct {
	ps    *scopeSessions
	name  string
	index int
	// factory makes a provider a component body made (see travelling).
	factory *starlib.FactoryCall
}

func (p remoteWorkspaceProvider) Name() string { return p.name }

func (p remoteWorkspaceProvider) Acquire(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	pl, err := p.ps.openScopeSession(ctx, fmt.Sprintf("workspace %q", req.ID))
	if err != nil {
		return nil, err
	}
	r := *req
	call := AcquireCall{Kind: kindWorkspace, Provider: p.name, ProviderIndex: p.index, Bundle: p.ps.bundleFor(p.index), RunID: p.ps.runID, Workspace: &r, Cwd: p.ps.cwd, Factory: p.factory}
	if req.ID == p.ps.carriedWorkspace {
		// The run continued as new: its workspace comes back as the
		// previous execution left it.
		call.Restore = p.ps.carriedCheckpoint
		pl.checkpoint = p.ps.carriedCheckpoint
	}
	l, err := pl.acquire(ctx, call)
	if err != nil {
		pl.complete(workflowOf(ctx))
		return nil, err
	}
	if p.ps.byLease == nil {
		p.ps.byLease = map[string]*remoteLease{}
	}
	p.ps.byLease[l.res.LeaseID] = l
	p.ps.workspaceID, p.ps.workspace = req.ID, pl
	return remoteWorkspace{l}, nil
}

// bundleFor returns the bundle when a worker needs it to make the
// provider (index ≥ 0).
func (ps *scopeSessions) bundleFor(index int) *Bundle {
	if index >= 0 {
		return ps.bundle
	}
	return nil
}

// remoteWorkspace is a workspace lease held on a scope session's worker. Its files
// are reached through activities (eval.WorkspaceFiles).
type remoteWorkspace struct{ l *remoteLease }

func (w remoteWorkspace) ID() string { return w.l.res.LeaseID }

// Directory is the directory on the worker that holds the workspace.
func (w remoteWorkspace) Directory() string { return w.l.res.Directory }

func (w remoteWorkspace) Save(ctx context.Context, req eval.WorkspaceSaveRequest) error {
	return w.l.pl.do(ctx, SaveActivity, scopeSessionOptions(0), func() any { return SaveCall{Key: w.l.res.Key, Request: req} }, nil)
}

func (w remoteWorkspace) Release(ctx context.Context) error {
	delete(w.l.pl.ps.byLease, w.l.res.LeaseID)
	return w.l.release(ctx)
}

func (w remoteWorkspace) WriteFile(ctx context.Context, path string, data []byte) error {
	var r FileReply
	err := w.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any {
		return FileCall{Key: w.l.res.Key, Op: fileWrite, Path: path, Data: data, Checkpoint: true}
	}, &r)
	w.l.pl.noteCheckpoint(r.Checkpoint)
	return err
}

func (w remoteWorkspace) Stat(ctx context.Context, path string) (eval.FileInfo, error) {
	var r FileReply
	err := w.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any { return FileCall{Key: w.l.res.Key, Op: fileStat, Path: path} }, &r)
	return r.Info, err
}

func (w remoteWorkspace) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var r FileReply
	err := w.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any { return FileCall{Key: w.l.res.Key, Op: fileRead, Path: path} }, &r)
	return r.Data, err
}

// OpenFile implements eval.FileOpener: the file is read in chunks, one
// activity each, so that a bounded read (include() with max_bytes) stops
// at its bound on the worker too.
func (w remoteWorkspace) OpenFile(ctx context.Context, path string) (io.ReadCloser, error) {
	return &remoteFile{ctx: ctx, fetch: func(ctx context.Context, off, n int64) ([]byte, error) {
		var r FileReply
		err := w.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any {
			return FileCall{Key: w.l.res.Key, Op: fileRead, Path: path, Offset: off, Limit: n}
		}, &r)
		return r.Data, err
	}}, nil
}

var (
	_ eval.WorkspaceFiles = remoteWorkspace{}
	_ eval.FileOpener     = remoteWorkspace{}
	_ eval.FileOpener     = remoteRuntime{}
)

// readChunk is how much of a file one read activity returns to workflow
// code: well under the service's payload limit (2 MB by default).
const readChunk = 1 << 20

// remoteFile reads a file of a scope session in chunks, one activity each, as
// its reader asks for them.
type remoteFile struct {
	ctx   context.Context
	fetch func(ctx context.Context, off, n int64) ([]byte, error)
	off   int64
	buf   []byte
	eof   bool
}

func (f *remoteFile) Read(b []byte) (int, error) {
	if len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		data, err := f.fetch(f.ctx, f.off, readChunk)
		if err != nil {
			return 0, err
		}
		f.off += int64(len(data))
		f.buf, f.eof = data, len(data) < readChunk
		if len(data) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(b, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *remoteFile) Close() error { return nil }

// Sandbox providers in workflow code.

// remoteSandboxProvider acquires a sandbox on a worker: in the scope session of
// the workspace it materializes, else in a scope session of its own. With host
// set it is the run's host (script() outside any sandbox), which runs in
// the submitter's directory (RunInput.Cwd) on its worker.
type remoteSandboxProvider struct {
	ps    *scopeSessions
	name  string
	index int
	host  bool
	// factory makes a provider a component body made (see travelling).
	factory *starlib.FactoryCall
}

func (p remoteSandboxProvider) Name() string { return p.name }

func (p remoteSandboxProvider) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	r := *req
	call := AcquireCall{Kind: kindSandbox, Provider: p.name, ProviderIndex: p.index, Bundle: p.ps.bundleFor(p.index), RunID: p.ps.runID, Sandbox: &r, Cwd: p.ps.cwd, Factory: p.factory}
	var pl *scopeSession
	if p.host {
		// The host's directory is the submitter's (Cwd), which the
		// worker checks it sees.
		call.Kind, r.Workspace = kindHost, nil
	} else if req.Workspace != nil {
		if wl := p.ps.byLease[req.Workspace.LeaseID]; wl != nil && !wl.released {
			pl = wl.pl
			call.WorkspaceKey = wl.res.Key
			m := *req.Workspace
			m.Directory = ""
			r.Workspace = &m
		}
	}
	if pl == nil {
		what := "the sandbox"
		if p.host {
			what = "the host of script()"
		}
		var err error
		if pl, err = p.ps.openScopeSession(ctx, what); err != nil {
			return nil, err
		}
	}
	l, err := pl.acquire(ctx, call)
	if err != nil {
		if len(pl.chain) == 0 {
			pl.complete(workflowOf(ctx))
		}
		return nil, err
	}
	return &remoteSandbox{l: l}, nil
}

// remoteSandbox is a sandbox lease held on a scope session's worker.
type remoteSandbox struct{ l *remoteLease }

func (s *remoteSandbox) ID() string                        { return s.l.res.LeaseID }
func (s *remoteSandbox) Runtime() eval.SandboxRuntime      { return remoteRuntime{s.l} }
func (s *remoteSandbox) Release(ctx context.Context) error { return s.l.release(ctx) }

// remoteRuntime is the runtime of a remoteSandbox: every operation is an
// activity on the lease's worker.
type remoteRuntime struct{ l *remoteLease }

func (r remoteRuntime) Access() eval.Access { return r.l.res.Access }
func (r remoteRuntime) Root() string        { return r.l.res.Root }
func (r remoteRuntime) Cwd() string         { return r.l.res.Cwd }

func (r remoteRuntime) Exec(ctx context.Context, command string, args []string, opts eval.ExecOptions) (*eval.ExecResult, error) {
	pl := r.l.pl
	call := ExecCall{Command: pl.ps.seal.seal(command), Cwd: opts.Cwd, Timeout: opts.Timeout, Checkpoint: pl.checkpoints()}
	for _, a := range args {
		call.Args = append(call.Args, pl.ps.seal.seal(a))
	}
	if len(opts.Env) > 0 {
		call.Env = map[string]string{}
		for k, v := range opts.Env {
			call.Env[k] = pl.ps.seal.seal(v)
		}
	}
	if opts.Stdin != nil {
		data, err := io.ReadAll(opts.Stdin)
		if err != nil {
			return nil, err
		}
		call.Stdin = data
	}
	var reply ExecReply
	err := pl.do(ctx, ExecActivity, scopeSessionOptions(opts.Timeout), func() any {
		c := call
		c.Key = r.l.res.Key
		return c
	}, &reply)
	if err != nil {
		return nil, err
	}
	pl.noteCheckpoint(reply.Checkpoint)
	res := reply.Result
	for _, b := range []*[]byte{&res.Stdout, &res.Stderr} {
		s, err := unseal(string(*b), pl.ps.lookup)
		if err != nil {
			return nil, err
		}
		*b = []byte(s)
	}
	return &res, nil
}

func (r remoteRuntime) Spawn(context.Context, string, []string, eval.ExecOptions) (eval.SandboxProcess, error) {
	return nil, errors.New("a process with streaming input and output cannot be started from workflow code; agent providers start theirs on the worker that holds the sandbox")
}

func (r remoteRuntime) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var reply FileReply
	err := r.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any { return FileCall{Key: r.l.res.Key, Op: fileRead, Path: path} }, &reply)
	return reply.Data, err
}

// OpenFile implements eval.FileOpener as remoteWorkspace's does.
func (r remoteRuntime) OpenFile(ctx context.Context, path string) (io.ReadCloser, error) {
	return &remoteFile{ctx: ctx, fetch: func(ctx context.Context, off, n int64) ([]byte, error) {
		var reply FileReply
		err := r.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any {
			return FileCall{Key: r.l.res.Key, Op: fileRead, Path: path, Offset: off, Limit: n}
		}, &reply)
		return reply.Data, err
	}}, nil
}

func (r remoteRuntime) Stat(ctx context.Context, path string) (eval.FileInfo, error) {
	var reply FileReply
	err := r.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any { return FileCall{Key: r.l.res.Key, Op: fileStat, Path: path} }, &reply)
	return reply.Info, err
}

func (r remoteRuntime) WriteFile(ctx context.Context, path string, data []byte) error {
	pl := r.l.pl
	var reply FileReply
	err := pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any {
		return FileCall{Key: r.l.res.Key, Op: fileWrite, Path: path, Data: data, Checkpoint: pl.checkpoints()}
	}, &reply)
	pl.noteCheckpoint(reply.Checkpoint)
	return err
}

func (r remoteRuntime) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	var reply FileReply
	gen := r.l.pl.gen
	err := r.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any { return FileCall{Key: r.l.res.Key, Op: fileStagingCreate} }, &reply)
	if err != nil {
		return nil, err
	}
	return &remoteStaging{l: r.l, key: reply.Staging, root: reply.Root, gen: gen}, nil
}

// remoteStaging is a file staging of a remote sandbox. It does not
// survive its worker: after a recovery its operations fail.
type remoteStaging struct {
	l        *remoteLease
	key      string
	root     string
	gen      int
	released bool
}

func (s *remoteStaging) Root() string { return s.root }

func (s *remoteStaging) WriteFile(ctx context.Context, rel string, data []byte) error {
	if s.l.pl.gen != s.gen {
		return fmt.Errorf("the staging directory was on a worker that died")
	}
	return s.l.pl.do(ctx, FileActivity, scopeSessionOptions(0), func() any {
		return FileCall{Key: s.l.res.Key, Op: fileStagingWrite, Staging: s.key, Path: rel, Data: data}
	}, nil)
}

func (s *remoteStaging) Release(ctx context.Context) error {
	if s.released || s.l.pl.gen != s.gen || s.l.released {
		s.released = true
		return nil
	}
	s.released = true
	wctx, cancel := workflow.NewDisconnectedContext(workflowOf(ctx))
	defer cancel()
	return s.l.pl.do(withWorkflow(ctx, wctx), FileActivity, scopeSessionOptions(0), func() any {
		return FileCall{Key: s.l.res.Key, Op: fileStagingFree, Staging: s.key}
	}, nil)
}

var (
	_ eval.SandboxProvider   = remoteSandboxProvider{}
	_ eval.WorkspaceProvider = remoteWorkspaceProvider{}
)
