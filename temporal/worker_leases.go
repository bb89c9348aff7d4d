package temporal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

// WorkerLeases are the sandboxes, workspaces and host directories that runs
// acquired on this worker (see scope_sessions.go). They are released by the runs
// that hold them, and by Release when the worker stops. A WorkerLeases is safe
// for concurrent use.
type WorkerLeases struct {
	mu   sync.Mutex
	held map[string]*heldLease
	// closed refuses acquisitions once the worker stops.
	closed bool
}

// heldLease is one lease a run holds on this worker.
type heldLease struct {
	// run is the workflow execution that holds the lease.
	run       workflowRun
	kind      string
	sandbox   eval.SandboxLease
	workspace eval.WorkspaceLease
	// scratch is the private directory of a host lease, removed with it.
	scratch string
	// workspaceKey is the held workspace a sandbox materializes.
	workspaceKey string
	// cp is the checkpoint state of a workspace.
	cp *checkpointer

	mu       sync.Mutex
	stagings map[string]eval.FileStaging
}

// Len returns how many leases this worker holds.
func (ls *WorkerLeases) Len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.held)
}

// Release releases every lease this worker holds (sandboxes before the
// workspaces they materialize) and refuses new ones: a worker that stops
// calls it, so that no container, process or lock outlives it.
func (ls *WorkerLeases) Release(ctx context.Context) error {
	ls.mu.Lock()
	ls.closed = true
	held := ls.held
	ls.held = map[string]*heldLease{}
	ls.mu.Unlock()
	var errs []error
	for _, pass := range []string{kindSandbox, kindHost, kindWorkspace} {
		for _, h := range held {
			if h.kind == pass {
				errs = append(errs, h.release(ctx))
			}
		}
	}
	return errors.Join(errs...)
}

func (ls *WorkerLeases) put(h *heldLease) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	key := hex.EncodeToString(b[:])
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return "", errors.New("this worker is stopping")
	}
	if ls.held == nil {
		ls.held = map[string]*heldLease{}
	}
	ls.held[key] = h
	return key, nil
}

func (ls *WorkerLeases) get(key string) (*heldLease, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	h := ls.held[key]
	if h == nil {
		return nil, fmt.Errorf("this worker holds no lease %s (was it released, or did the worker restart?)", key)
	}
	return h, nil
}

func (ls *WorkerLeases) take(key string) *heldLease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	h := ls.held[key]
	delete(ls.held, key)
	return h
}

// release releases what h holds, once.
func (h *heldLease) release(ctx context.Context) error {
	var errs []error
	h.mu.Lock()
	stagings := h.stagings
	h.stagings = nil
	h.mu.Unlock()
	for _, s := range stagings {
		errs = append(errs, s.Release(ctx))
	}
	if h.sandbox != nil {
		errs = append(errs, h.sandbox.Release(ctx))
	}
	if h.workspace != nil {
		errs = append(errs, h.workspace.Release(ctx))
	}
	if h.scratch != "" {
		errs = append(errs, os.RemoveAll(h.scratch))
	}
	return errors.Join(errs...)
}

// runtime returns the sandbox runtime of h.
func (h *heldLease) runtime() (eval.SandboxRuntime, error) {
	if h.sandbox == nil {
		return nil, errors.New("the lease is not a sandbox")
	}
	rt := h.sandbox.Runtime()
	if rt == nil {
		return nil, errors.New("the sandbox has no runtime")
	}
	return rt, nil
}

// failure wraps a provider's error as an activity failure that is not
// retried, redacted of the worker's env() values (see fail).
func (a *activities) failure(err error, seal *sealer) error {
	return a.fail(err, seal, scopeSessionFailure)
}

// workflowRun names a workflow execution.
type workflowRun struct{ id, runID string }

// Sweep releases the leases this worker holds for runs that have ended
// without releasing them (a terminated run cannot): it asks c for the
// state of each run it holds leases for, and releases those of a run
// that is no longer running. It returns, by workflow id, how many leases
// of each such run it released. It is safe to call at any time, and
// concurrently with the activities; aml worker calls it every minute.
func (ls *WorkerLeases) Sweep(ctx context.Context, c client.Client) (map[string]int, error) {
	ls.mu.Lock()
	runs := map[workflowRun]bool{}
	for _, h := range ls.held {
		if h.run.id != "" {
			runs[h.run] = true
		}
	}
	ls.mu.Unlock()
	released := map[string]int{}
	var errs []error
	for run := range runs {
		desc, err := c.DescribeWorkflow(ctx, run.id, run.runID)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			// Gone from the service: it ended long ago.
		case err != nil:
			errs = append(errs, fmt.Errorf("the state of run %s: %w", run.id, err))
			continue
		case desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			continue
		}
		ls.mu.Lock()
		var ended []*heldLease
		for key, h := range ls.held {
			if h.run == run {
				ended = append(ended, h)
				delete(ls.held, key)
			}
		}
		ls.mu.Unlock()
		// Sandboxes before the workspaces they materialize.
		for _, pass := range []string{kindSandbox, kindHost, kindWorkspace} {
			for _, h := range ended {
				if h.kind == pass {
					errs = append(errs, h.release(ctx))
				}
			}
		}
		released[run.id] += len(ended)
	}
	return released, errors.Join(errs...)
}

// acquire is AcquireActivity.
func (a *activities) acquire(ctx context.Context, call AcquireCall) (*AcquireResult, error) {
	h := &heldLease{kind: call.Kind}
	if activity.IsActivity(ctx) {
		we := activity.GetInfo(ctx).WorkflowExecution
		h.run = workflowRun{id: we.ID, runID: we.RunID}
	}
	res := &AcquireResult{}
	stop := heartbeat(ctx)
	err := a.acquireInto(ctx, call, h, res)
	stop()
	if err != nil {
		return nil, a.failure(err, nil)
	}
	key, err := a.leases.put(h)
	if err != nil {
		_ = h.release(context.WithoutCancel(ctx))
		return nil, a.failure(err, nil)
	}
	res.Key = key
	return res, nil
}

func (a *activities) acquireInto(ctx context.Context, call AcquireCall, h *heldLease, res *AcquireResult) error {
	switch call.Kind {
	case kindWorkspace:
		if call.Workspace == nil {
			return errors.New("a workspace acquisition without its request")
		}
		p, err := a.workspaceProvider(call)
		if err != nil {
			return err
		}
		req := *call.Workspace
		lease, err := p.Acquire(ctx, &req)
		if err != nil {
			return err
		}
		if lease == nil {
			return fmt.Errorf("workspace provider %q returned no lease", p.Name())
		}
		h.workspace = lease
		h.cp = newCheckpointer(a.opts.Checkpoints, lease.Directory())
		if call.Restore != "" {
			if err := h.cp.restore(ctx, call.Restore); err != nil {
				_ = lease.Release(context.WithoutCancel(ctx))
				return fmt.Errorf("restoring workspace %q from its checkpoint: %w", req.ID, err)
			}
		}
		res.LeaseID, res.Directory = lease.ID(), lease.Directory()
		return nil
	case kindSandbox, kindHost:
		if call.Sandbox == nil {
			return errors.New("a sandbox acquisition without its request")
		}
		req := *call.Sandbox
		var p eval.SandboxProvider
		if call.Kind == kindHost {
			p = a.opts.Host
			if p == nil {
				p = starlib.DefaultHost()
			}
			dir, err := a.hostDir(call.Cwd)
			if err != nil {
				return err
			}
			if call.Cwd == "" {
				h.scratch = dir
			}
			req.Workspace = &eval.WorkspaceMaterialization{Directory: dir, Cwd: "."}
		} else {
			var err error
			if p, err = a.sandboxProvider(call); err != nil {
				return err
			}
			if call.WorkspaceKey != "" {
				ws, err := a.leases.get(call.WorkspaceKey)
				if err != nil || ws.workspace == nil {
					return fmt.Errorf("the sandbox's workspace is not held on this worker: %v", err)
				}
				m := eval.WorkspaceMaterialization{}
				if req.Workspace != nil {
					m = *req.Workspace
				}
				m.Directory = ws.workspace.Directory()
				req.Workspace = &m
				h.workspaceKey = call.WorkspaceKey
			}
		}
		lease, err := p.Acquire(ctx, &req)
		if err != nil {
			if h.scratch != "" {
				_ = os.RemoveAll(h.scratch)
			}
			return err
		}
		if lease == nil || lease.Runtime() == nil {
			if lease != nil {
				_ = lease.Release(context.WithoutCancel(ctx))
			}
			if h.scratch != "" {
				_ = os.RemoveAll(h.scratch)
			}
			return fmt.Errorf("sandbox provider %q returned no lease or no runtime", p.Name())
		}
		h.sandbox = lease
		rt := lease.Runtime()
		res.LeaseID, res.Access, res.Root, res.Cwd = lease.ID(), rt.Access(), rt.Root(), rt.Cwd()
		if sl, ok := p.(eval.StatelessSandbox); ok && sl.KeepsNoState() {
			res.Stateless = true
		}
		return nil
	}
	return fmt.Errorf("unknown lease kind %q", call.Kind)
}

// hostDir is the directory of the run's host (script() outside any
// sandbox): the submitter's working directory, as aml run has it, which
// this worker must see; a run that did not say (RunInput.Cwd "") gets a
// private directory, removed with the lease.
func (a *activities) hostDir(cwd string) (string, error) {
	if cwd == "" {
		return os.MkdirTemp("", "aml-host-")
	}
	info, err := os.Stat(cwd)
	if err != nil || !info.IsDir() {
		host, _ := os.Hostname()
		return "", fmt.Errorf("script() outside a sandbox runs in the submitter's directory %s, which worker %s does not have (%v): run the workers where the submitter's files are (on its machine, or with the directory on a shared mount), or put the script in a sandbox()", cwd, host, statProblem(info, err))
	}
	return cwd, nil
}

// statProblem says why a path is not a usable directory.
func statProblem(info os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return "not a directory: " + info.Mode().String()
}

// workspaceProvider finds the workspace provider of call on this worker.
func (a *activities) workspaceProvider(call AcquireCall) (eval.WorkspaceProvider, error) {
	if call.ProviderIndex >= 0 && call.Bundle != nil {
		lb, err := a.load(call.Bundle, call.Cwd)
		if err != nil {
			return nil, err
		}
		if call.ProviderIndex >= len(lb.workspaces) || lb.workspaces[call.ProviderIndex].Name() != call.Provider {
			return nil, fmt.Errorf("loaded on this worker, the workflow does not make workspace provider %q as its workspace provider #%d (does its top level depend on env() values that differ here?)", call.Provider, call.ProviderIndex)
		}
		return lb.workspaces[call.ProviderIndex], nil
	}
	if call.Factory != nil {
		p, err := a.make(call.Factory, call.Cwd)
		if err != nil {
			return nil, err
		}
		wp, ok := p.(eval.WorkspaceProvider)
		if !ok {
			return nil, fmt.Errorf("%s: %s() makes no workspace provider", call.Factory.Pos, call.Factory.Builtin)
		}
		return wp, nil
	}
	if p := a.opts.Workspaces[call.Provider]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("this worker has no workspace provider %q: it is a Go provider, which cannot travel with a run; give every worker one of that name (temporal.Options.Workspaces)", call.Provider)
}

// sandboxProvider finds the sandbox provider of call on this worker.
func (a *activities) sandboxProvider(call AcquireCall) (eval.SandboxProvider, error) {
	if call.ProviderIndex >= 0 && call.Bundle != nil {
		lb, err := a.load(call.Bundle, call.Cwd)
		if err != nil {
			return nil, err
		}
		if call.ProviderIndex >= len(lb.sandboxes) || lb.sandboxes[call.ProviderIndex].Name() != call.Provider {
			return nil, fmt.Errorf("loaded on this worker, the workflow does not make sandbox provider %q as its sandbox provider #%d (does its top level depend on env() values that differ here?)", call.Provider, call.ProviderIndex)
		}
		return lb.sandboxes[call.ProviderIndex], nil
	}
	if call.Factory != nil {
		p, err := a.make(call.Factory, call.Cwd)
		if err != nil {
			return nil, err
		}
		sp, ok := p.(eval.SandboxProvider)
		if !ok {
			return nil, fmt.Errorf("%s: %s() makes no sandbox provider", call.Factory.Pos, call.Factory.Builtin)
		}
		return sp, nil
	}
	if p := a.opts.Sandboxes[call.Provider]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("this worker has no sandbox provider %q: it is a Go provider, which cannot travel with a run; give every worker one of that name (temporal.Options.Sandboxes)", call.Provider)
}

// opener returns the function that puts this worker's env() values where
// the workflow left tokens, and the sealer that takes them out again.
func (a *activities) opener() (func(string) (string, error), *sealer) {
	lookup := a.opts.Env
	if lookup == nil {
		lookup = os.LookupEnv
	}
	seal := &sealer{}
	return func(s string) (string, error) {
		return unseal(s, func(name string) (string, bool) {
			v, ok := lookup(name)
			if ok {
				seal.add(name, v)
			}
			return v, ok
		})
	}, seal
}

// exec is ExecActivity.
func (a *activities) exec(ctx context.Context, call ExecCall) (*ExecReply, error) {
	h, err := a.leases.get(call.Key)
	if err != nil {
		return nil, a.failure(err, nil)
	}
	rt, err := h.runtime()
	if err != nil {
		return nil, a.failure(err, nil)
	}
	open, seal := a.opener()
	command, err := open(call.Command)
	args := make([]string, len(call.Args))
	for i, arg := range call.Args {
		if err == nil {
			args[i], err = open(arg)
		}
	}
	opts := eval.ExecOptions{Cwd: call.Cwd, Timeout: call.Timeout}
	if len(call.Env) > 0 {
		opts.Env = map[string]string{}
		for k, v := range call.Env {
			if err == nil {
				opts.Env[k], err = open(v)
			}
		}
	}
	if err != nil {
		return nil, a.failure(err, nil)
	}
	if call.Stdin != nil {
		opts.Stdin = bytes.NewReader(call.Stdin)
	}
	stop := heartbeat(ctx)
	r, err := rt.Exec(ctx, command, args, opts)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, a.failure(err, seal)
	}
	if r == nil {
		return nil, a.failure(errors.New("the sandbox returned no result"), nil)
	}
	reply := &ExecReply{Result: eval.ExecResult{ExitCode: r.ExitCode,
		Stdout: []byte(seal.seal(string(r.Stdout))), Stderr: []byte(seal.seal(string(r.Stderr)))}}
	if call.Checkpoint {
		if reply.Checkpoint, err = a.checkpointOf(ctx, h); err != nil {
			return nil, a.failure(err, nil)
		}
	}
	return reply, nil
}

// checkpointOf checkpoints the workspace of h (a workspace, or a sandbox
// that materializes one); "" when there is none or no checkpoint store.
func (a *activities) checkpointOf(ctx context.Context, h *heldLease) (string, error) {
	ws := h
	if h.workspace == nil {
		if h.workspaceKey == "" {
			return "", nil
		}
		var err error
		if ws, err = a.leases.get(h.workspaceKey); err != nil {
			return "", err
		}
	}
	if ws.cp == nil || ws.cp.storage == nil {
		return "", nil
	}
	stop := heartbeat(ctx)
	defer stop()
	id, err := ws.cp.checkpoint(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpointing the workspace: %w", err)
	}
	return id, nil
}

// file is FileActivity.
func (a *activities) file(ctx context.Context, call FileCall) (*FileReply, error) {
	h, err := a.leases.get(call.Key)
	if err != nil {
		return nil, a.failure(err, nil)
	}
	reply := &FileReply{}
	err = a.fileOp(ctx, h, call, reply)
	if err == nil && call.Checkpoint {
		reply.Checkpoint, err = a.checkpointOf(ctx, h)
	}
	if err != nil {
		return nil, a.failure(err, nil)
	}
	return reply, nil
}

func (a *activities) fileOp(ctx context.Context, h *heldLease, call FileCall, reply *FileReply) error {
	if call.Op == fileCheckpoint {
		var err error
		reply.Checkpoint, err = a.checkpointOf(ctx, h)
		return err
	}
	if h.workspace != nil {
		// The evaluator's own access to a materialization, so that it
		// fails as a local run's does.
		files := eval.DirFiles(h.workspace.Directory())
		switch call.Op {
		case fileWrite:
			return files.WriteFile(ctx, call.Path, call.Data)
		case fileStat:
			info, err := files.Stat(ctx, call.Path)
			reply.Info = info
			return err
		case fileRead:
			open := func() (io.ReadCloser, error) { return files.OpenFile(ctx, call.Path) }
			if call.Limit > 0 {
				var err error
				reply.Data, err = readRange(open, call)
				return err
			}
			data, err := readRange(open, FileCall{Limit: maxReadBytes + 1})
			if err == nil && len(data) > maxReadBytes {
				return fmt.Errorf("%s is over %d bytes", call.Path, maxReadBytes)
			}
			reply.Data = data
			return err
		}
		return fmt.Errorf("unknown workspace file operation %q", call.Op)
	}
	rt, err := h.runtime()
	if err != nil {
		return err
	}
	switch call.Op {
	case fileWrite:
		return rt.WriteFile(ctx, call.Path, call.Data)
	case fileStat:
		reply.Info, err = rt.Stat(ctx, call.Path)
		return err
	case fileRead:
		fo, ok := rt.(eval.FileOpener)
		switch {
		case ok && call.Limit > 0:
			reply.Data, err = readRange(func() (io.ReadCloser, error) { return fo.OpenFile(ctx, call.Path) }, call)
		case ok:
			// The whole file, but never more than the read bound: a
			// file the sandbox made may claim any size.
			reply.Data, err = readRange(func() (io.ReadCloser, error) { return fo.OpenFile(ctx, call.Path) }, FileCall{Limit: maxReadBytes + 1})
			if err == nil && len(reply.Data) > maxReadBytes {
				reply.Data, err = nil, fmt.Errorf("%s is over %d bytes", call.Path, maxReadBytes)
			}
		default:
			reply.Data, err = rt.ReadFile(ctx, call.Path)
			if err == nil && call.Limit > 0 {
				reply.Data = window(reply.Data, call.Offset, call.Limit)
			}
		}
		return err
	case fileStagingCreate:
		fs, err := rt.CreateFileStaging(ctx)
		if err != nil {
			return err
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		key := hex.EncodeToString(b[:])
		h.mu.Lock()
		if h.stagings == nil {
			h.stagings = map[string]eval.FileStaging{}
		}
		h.stagings[key] = fs
		h.mu.Unlock()
		reply.Staging, reply.Root = key, fs.Root()
		return nil
	case fileStagingWrite, fileStagingFree:
		h.mu.Lock()
		fs := h.stagings[call.Staging]
		if call.Op == fileStagingFree {
			delete(h.stagings, call.Staging)
		}
		h.mu.Unlock()
		if fs == nil {
			if call.Op == fileStagingFree {
				return nil
			}
			return fmt.Errorf("no staging %s on this worker", call.Staging)
		}
		if call.Op == fileStagingFree {
			return fs.Release(ctx)
		}
		return fs.WriteFile(ctx, call.Path, call.Data)
	}
	return fmt.Errorf("unknown sandbox file operation %q", call.Op)
}

// save is SaveActivity.
func (a *activities) save(ctx context.Context, call SaveCall) error {
	h, err := a.leases.get(call.Key)
	if err != nil {
		return a.failure(err, nil)
	}
	if h.workspace == nil {
		return a.failure(errors.New("the lease is not a workspace"), nil)
	}
	stop := heartbeat(ctx)
	defer stop()
	if err := h.workspace.Save(ctx, call.Request); err != nil {
		return a.failure(err, nil)
	}
	return nil
}

// release is ReleaseActivity. Releasing a lease this worker no longer
// holds is not an error: the release is what was wanted.
func (a *activities) release(ctx context.Context, call ReleaseCall) error {
	h := a.leases.take(call.Key)
	if h == nil {
		return nil
	}
	if err := h.release(context.WithoutCancel(ctx)); err != nil {
		return a.failure(err, nil)
	}
	return nil
}

// readRange reads at most call.Limit bytes of the file open opens, from
// call.Offset, without reading what lies before it into memory.
func readRange(open func() (io.ReadCloser, error), call FileCall) ([]byte, error) {
	if call.Offset < 0 || call.Limit <= 0 || call.Limit > maxReadBytes+1 {
		return nil, fmt.Errorf("a read of %d bytes from %d is out of range", call.Limit, call.Offset)
	}
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if call.Offset > 0 {
		if sk, ok := rc.(io.Seeker); ok {
			_, err = sk.Seek(call.Offset, io.SeekStart)
		} else {
			_, err = io.CopyN(io.Discard, rc, call.Offset)
			if errors.Is(err, io.EOF) {
				return nil, nil
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(rc, call.Limit))
}

// window is data[off:off+n], clipped to data.
func window(data []byte, off, n int64) []byte {
	if off >= int64(len(data)) {
		return nil
	}
	return data[off:min(int64(len(data)), off+n)]
}
