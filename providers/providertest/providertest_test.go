package providertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
	"github.com/aml-go/aml/providers/providertest"
)

// wantViolations checks that err is a *providertest.Error of suite whose
// message contains every fragment.
func wantViolations(t *testing.T, err error, suite string, fragments ...string) *providertest.Error {
	t.Helper()
	var pe *providertest.Error
	if !errors.As(err, &pe) {
		t.Fatalf("want a *providertest.Error, got %v", err)
	}
	if pe.Suite != suite {
		t.Fatalf("suite %q, want %q", pe.Suite, suite)
	}
	msg := err.Error()
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("message lacks %q:\n%s", f, msg)
		}
	}
	return pe
}

// Agent fakes.

type agentFunc struct {
	name string
	run  func(ctx context.Context, req *eval.AgentRequest) (*eval.AgentResponse, error)
}

func (a *agentFunc) Name() string { return a.name }
func (a *agentFunc) Run(ctx context.Context, req *eval.AgentRequest, _ *eval.AgentExecution) (*eval.AgentResponse, error) {
	return a.run(ctx, req)
}

func TestAgentConformanceDeterministic(t *testing.T) {
	a, err := deterministic.New(deterministic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	providertest.RunAgent(t, a)
	calls := a.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls %d (the pre-cancelled call must not be recorded)", len(calls))
	}
	req := calls[0].Request
	if req.Prompt != "agent-provider-conformance" || len(req.FollowUps) != 1 || req.FollowUps[0] != "agent-provider-conformance-final" ||
		req.System != "Follow the provider contract." || req.Permissions != (eval.Permissions{Filesystem: eval.ReadWrite, Network: true, Shell: true}) ||
		len(req.Tools) != 0 || len(req.MCPServers) != 0 || len(req.Skills) != 0 || calls[0].Exec.RunID == "" {
		t.Fatalf("request %+v exec %+v", req, calls[0].Exec)
	}
}

func TestAgentConformanceIgnoresCancellation(t *testing.T) {
	p := &agentFunc{name: "ignorant", run: func(context.Context, *eval.AgentRequest) (*eval.AgentResponse, error) {
		return &eval.AgentResponse{Text: "ok"}, nil
	}}
	pe := wantViolations(t, providertest.AgentConformance(context.Background(), p), "agent",
		`agent provider "ignorant"`, "Run succeeded under a pre-cancelled context")
	if pe.Provider != "ignorant" || len(pe.Violations) != 1 {
		t.Fatalf("%+v", pe)
	}
}

func TestAgentConformanceUnrelatedCancellationError(t *testing.T) {
	p := &agentFunc{name: "lossy", run: func(ctx context.Context, _ *eval.AgentRequest) (*eval.AgentResponse, error) {
		if ctx.Err() != nil {
			return nil, ctx.Err() // context.Canceled, not the cause
		}
		return &eval.AgentResponse{}, nil
	}}
	wantViolations(t, providertest.AgentConformance(context.Background(), p), "agent",
		`failed with "context canceled", which does not wrap the cancellation cause`)
}

func TestAgentConformanceWrappedCauseIsAccepted(t *testing.T) {
	p := &agentFunc{name: "wrapper", run: func(ctx context.Context, _ *eval.AgentRequest) (*eval.AgentResponse, error) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("session aborted: %w", context.Cause(ctx))
		}
		return &eval.AgentResponse{}, nil
	}}
	if err := providertest.AgentConformance(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// TestAgentConformanceHangingRun: a Run that hangs under the pre-cancelled
// context is reported when the suite's context ends. The suite's context
// ends from inside that hanging Run, not after a fixed delay: a deadline
// could also expire before the suite's first, ordinary Run (on a loaded
// machine), which would then hang too.
func TestAgentConformanceHangingRun(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	p := &agentFunc{name: "hang", run: func(rctx context.Context, _ *eval.AgentRequest) (*eval.AgentResponse, error) {
		if rctx.Err() != nil {
			cancel(errors.New("suite deadline"))
			<-release
		}
		return &eval.AgentResponse{}, nil
	}}
	wantViolations(t, providertest.AgentConformance(ctx, p), "agent",
		"Run did not return under a pre-cancelled context before the suite's context ended (suite deadline)")
}

func TestAgentConformanceShape(t *testing.T) {
	p := &agentFunc{name: " padded ", run: func(ctx context.Context, _ *eval.AgentRequest) (*eval.AgentResponse, error) {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, nil
	}}
	pe := wantViolations(t, providertest.AgentConformance(context.Background(), p), "agent",
		`provider name " padded " has surrounding whitespace`,
		"Run of the conformance request returned neither a response nor an error")
	if len(pe.Violations) != 2 {
		t.Fatalf("%d violations", len(pe.Violations))
	}

	boom := errors.New("model unavailable")
	failing := &agentFunc{name: "failing", run: func(context.Context, *eval.AgentRequest) (*eval.AgentResponse, error) { return nil, boom }}
	err := providertest.AgentConformance(context.Background(), failing)
	wantViolations(t, err, "agent", "Run of the conformance request failed: model unavailable", "which does not wrap")
	if !errors.Is(err, boom) {
		t.Fatal("the provider error is not reachable through errors.Is")
	}

	panicking := &agentFunc{name: "panicky", run: func(context.Context, *eval.AgentRequest) (*eval.AgentResponse, error) { panic("bug") }}
	wantViolations(t, providertest.AgentConformance(context.Background(), panicking), "agent", "Run panicked: bug")

	wantViolations(t, providertest.AgentConformance(context.Background(), nil), "agent", "provider is nil")
}

// Sandbox fakes: wrappers of the deterministic sandbox that break one rule.

type sandboxWrap struct {
	*deterministic.Sandbox
	acquire func(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error)
	lease   func(eval.SandboxLease) eval.SandboxLease
}

func (s *sandboxWrap) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if s.acquire != nil {
		return s.acquire(ctx, req)
	}
	l, err := s.Sandbox.Acquire(ctx, req)
	if err != nil || s.lease == nil {
		return l, err
	}
	return s.lease(l), nil
}

type leaseWrap struct {
	eval.SandboxLease
	id      *string
	runtime eval.SandboxRuntime
	release func(ctx context.Context) error
}

func (l *leaseWrap) ID() string {
	if l.id != nil {
		return *l.id
	}
	return l.SandboxLease.ID()
}

func (l *leaseWrap) Runtime() eval.SandboxRuntime {
	if l.runtime != nil {
		return l.runtime
	}
	return l.SandboxLease.Runtime()
}

func (l *leaseWrap) Release(ctx context.Context) error {
	if l.release != nil {
		return l.release(ctx)
	}
	return l.SandboxLease.Release(ctx)
}

type runtimeWrap struct {
	eval.SandboxRuntime
	access    eval.Access
	root      string
	writeFile func(ctx context.Context, path string, data []byte) error
	staging   func(ctx context.Context) (eval.FileStaging, error)
}

func (r *runtimeWrap) Access() eval.Access {
	if r.access != "" {
		return r.access
	}
	return r.SandboxRuntime.Access()
}

func (r *runtimeWrap) Root() string {
	if r.root != "" {
		return r.root
	}
	return r.SandboxRuntime.Root()
}

func (r *runtimeWrap) WriteFile(ctx context.Context, path string, data []byte) error {
	if r.writeFile != nil {
		return r.writeFile(ctx, path, data)
	}
	return r.SandboxRuntime.WriteFile(ctx, path, data)
}

func (r *runtimeWrap) CreateFileStaging(ctx context.Context) (eval.FileStaging, error) {
	if r.staging != nil {
		return r.staging(ctx)
	}
	return r.SandboxRuntime.CreateFileStaging(ctx)
}

func newDetSandbox(t *testing.T) *deterministic.Sandbox {
	t.Helper()
	s, err := deterministic.NewSandbox(deterministic.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSandboxConformanceDeterministic(t *testing.T) {
	for _, exercise := range []bool{false, true} {
		s := newDetSandbox(t)
		ws := &eval.WorkspaceMaterialization{WorkspaceID: "w", Directory: t.TempDir()}
		providertest.RunSandbox(t, s, providertest.SandboxOptions{Workspace: ws, Exercise: exercise})
		acq := s.Acquisitions()
		if len(acq) != 2 || acq[0].Access != eval.ReadOnly || acq[1].Access != eval.ReadWrite ||
			acq[0].Root != "." || acq[0].Cwd != "." || acq[0].EvaluationID == "" || acq[0].Workspace.Directory != ws.Directory {
			t.Fatalf("acquisitions %+v", acq)
		}
		if len(s.Releases()) != 2 {
			t.Fatalf("releases %v", s.Releases())
		}
		if len(s.Commands()) != 0 {
			t.Fatalf("the suite ran commands: %+v", s.Commands())
		}
		if got := len(s.Writes()) > 0; got != exercise {
			t.Fatalf("exercise=%v but writes %+v", exercise, s.Writes())
		}
	}
	providertest.RunSandbox(t, newDetSandbox(t))
}

func TestSandboxConformanceChangedAccess(t *testing.T) {
	det := newDetSandbox(t)
	s := &sandboxWrap{Sandbox: det, lease: func(l eval.SandboxLease) eval.SandboxLease {
		return &leaseWrap{SandboxLease: l, runtime: &runtimeWrap{SandboxRuntime: l.Runtime(), access: eval.ReadWrite, root: "elsewhere"}}
	}}
	pe := wantViolations(t, providertest.SandboxConformance(context.Background(), s, providertest.SandboxOptions{}), "sandbox",
		`read-only lease: runtime Access is "read-write", want "read-only" (the runtime must preserve the requested access)`,
		`runtime Root is "elsewhere", want "."`)
	if len(pe.Violations) != 3 { // read-only access, and root on both leases
		t.Fatalf("%d violations:\n%v", len(pe.Violations), pe)
	}
	if len(det.Releases()) != 2 {
		t.Fatalf("a lease that failed a check was not released: %v", det.Releases())
	}
}

func TestSandboxConformanceEmptyLeaseID(t *testing.T) {
	det := newDetSandbox(t)
	empty := ""
	s := &sandboxWrap{Sandbox: det, lease: func(l eval.SandboxLease) eval.SandboxLease { return &leaseWrap{SandboxLease: l, id: &empty} }}
	wantViolations(t, providertest.SandboxConformance(context.Background(), s, providertest.SandboxOptions{}), "sandbox",
		"read-only lease: lease id is empty", "read-write lease: lease id is empty")
	if len(det.Releases()) != 2 {
		t.Fatalf("releases %v", det.Releases())
	}

	padded := "id "
	s = &sandboxWrap{Sandbox: newDetSandbox(t), lease: func(l eval.SandboxLease) eval.SandboxLease { return &leaseWrap{SandboxLease: l, id: &padded} }}
	wantViolations(t, providertest.SandboxConformance(context.Background(), s, providertest.SandboxOptions{}), "sandbox",
		`lease id "id " has surrounding whitespace`)
}

func TestSandboxConformanceNilRuntimeAndRelease(t *testing.T) {
	det := newDetSandbox(t)
	var mu sync.Mutex
	released := map[string]int{}
	s := &sandboxWrap{Sandbox: det, lease: func(l eval.SandboxLease) eval.SandboxLease {
		w := &leaseWrap{SandboxLease: l}
		w.runtime = (*runtimeWrap)(nil)
		w.release = func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			released[l.ID()]++
			if released[l.ID()] > 1 {
				return errors.New("already released")
			}
			return l.Release(ctx)
		}
		return w
	}}
	// A typed nil runtime is not an interface nil: accessing it panics,
	// which the suite reports.
	wantViolations(t, providertest.SandboxConformance(context.Background(), s, providertest.SandboxOptions{}), "sandbox",
		"read-only lease: runtime Access/Root/Cwd panicked",
		"read-only lease: second Release (Release must be idempotent) failed: already released",
		"read-write lease: second Release (Release must be idempotent) failed: already released")

	untyped := &sandboxWrap{Sandbox: newDetSandbox(t), lease: func(l eval.SandboxLease) eval.SandboxLease {
		return &nilRuntimeLease{l}
	}}
	wantViolations(t, providertest.SandboxConformance(context.Background(), untyped, providertest.SandboxOptions{}), "sandbox",
		"read-only lease: Runtime is nil")
}

type nilRuntimeLease struct{ eval.SandboxLease }

func (nilRuntimeLease) Runtime() eval.SandboxRuntime { return nil }

func TestSandboxConformanceAcquireFailure(t *testing.T) {
	det := newDetSandbox(t)
	boom := errors.New("no capacity")
	s := &sandboxWrap{Sandbox: det, acquire: func(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
		if req.Access == eval.ReadOnly {
			return nil, boom
		}
		return det.Acquire(ctx, req)
	}}
	err := providertest.SandboxConformance(context.Background(), s, providertest.SandboxOptions{})
	wantViolations(t, err, "sandbox", "read-only Acquire failed: no capacity")
	if !errors.Is(err, boom) || len(det.Acquisitions()) != 1 || len(det.Releases()) != 1 {
		t.Fatalf("%v %d %d", err, len(det.Acquisitions()), len(det.Releases()))
	}
	nilLease := &sandboxWrap{Sandbox: det, acquire: func(context.Context, *eval.SandboxAcquireRequest) (eval.SandboxLease, error) { return nil, nil }}
	wantViolations(t, providertest.SandboxConformance(context.Background(), nilLease, providertest.SandboxOptions{}), "sandbox",
		"read-only Acquire returned neither a lease nor an error")
	wantViolations(t, providertest.SandboxConformance(context.Background(), nil, providertest.SandboxOptions{}), "sandbox", "provider is nil")
}

type brokenStaging struct {
	eval.FileStaging
	releases int
}

func (b *brokenStaging) Release(ctx context.Context) error {
	b.releases++
	if b.releases > 1 {
		return errors.New("double free")
	}
	return b.FileStaging.Release(ctx)
}

func TestSandboxConformanceExercise(t *testing.T) {
	writesAnyway := &sandboxWrap{Sandbox: newDetSandbox(t), lease: func(l eval.SandboxLease) eval.SandboxLease {
		rt := l.Runtime()
		return &leaseWrap{SandboxLease: l, runtime: &runtimeWrap{SandboxRuntime: rt, writeFile: func(ctx context.Context, p string, data []byte) error {
			if rt.Access() == eval.ReadOnly {
				return nil // claims a write it cannot enforce
			}
			return rt.WriteFile(ctx, p, data)
		}}}
	}}
	opts := providertest.SandboxOptions{Exercise: true}
	if err := providertest.SandboxConformance(context.Background(), writesAnyway, providertest.SandboxOptions{}); err != nil {
		t.Fatalf("without Exercise the file methods are not checked: %v", err)
	}
	wantViolations(t, providertest.SandboxConformance(context.Background(), writesAnyway, opts), "sandbox",
		`read-only runtime: WriteFile("providertest-conformance/probe.txt") succeeded; it must fail with an error wrapping eval.ErrReadOnly`)

	plainErr := &sandboxWrap{Sandbox: newDetSandbox(t), lease: func(l eval.SandboxLease) eval.SandboxLease {
		rt := l.Runtime()
		return &leaseWrap{SandboxLease: l, runtime: &runtimeWrap{SandboxRuntime: rt, writeFile: func(ctx context.Context, p string, data []byte) error {
			if rt.Access() == eval.ReadOnly {
				return errors.New("denied")
			}
			return rt.WriteFile(ctx, p, data)
		}}}
	}}
	wantViolations(t, providertest.SandboxConformance(context.Background(), plainErr, opts), "sandbox",
		`failed with "denied", which does not wrap eval.ErrReadOnly`)

	appending := &sandboxWrap{Sandbox: newDetSandbox(t), lease: func(l eval.SandboxLease) eval.SandboxLease {
		rt := l.Runtime()
		return &leaseWrap{SandboxLease: l, runtime: &runtimeWrap{SandboxRuntime: rt, writeFile: func(ctx context.Context, p string, data []byte) error {
			old, _ := rt.ReadFile(ctx, p)
			return rt.WriteFile(ctx, p, append(old, data...))
		}}}
	}}
	wantViolations(t, providertest.SandboxConformance(context.Background(), appending, opts), "sandbox",
		"WriteFile must replace the whole file")

	var stagings []*brokenStaging
	noStagingUnderRO := &sandboxWrap{Sandbox: newDetSandbox(t), lease: func(l eval.SandboxLease) eval.SandboxLease {
		rt := l.Runtime()
		return &leaseWrap{SandboxLease: l, runtime: &runtimeWrap{SandboxRuntime: rt, staging: func(ctx context.Context) (eval.FileStaging, error) {
			if rt.Access() == eval.ReadOnly {
				return nil, eval.ErrReadOnly
			}
			st, err := rt.CreateFileStaging(ctx)
			if err != nil {
				return nil, err
			}
			b := &brokenStaging{FileStaging: st}
			stagings = append(stagings, b)
			return b, nil
		}}}
	}}
	wantViolations(t, providertest.SandboxConformance(context.Background(), noStagingUnderRO, opts), "sandbox",
		"read-only runtime: CreateFileStaging failed: read-only access (staging must work under either access)",
		"read-write runtime: second staging Release (it must be repeat-safe) failed: double free")
	if len(stagings) != 1 {
		t.Fatalf("stagings %d", len(stagings))
	}
}

// Workspace fakes: wrappers of the deterministic workspace.

type workspaceWrap struct {
	*deterministic.Workspace
	acquire func(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error)
	lease   func(eval.WorkspaceLease) eval.WorkspaceLease
}

func (w *workspaceWrap) Acquire(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
	var l eval.WorkspaceLease
	var err error
	if w.acquire != nil {
		l, err = w.acquire(ctx, req)
	} else {
		l, err = w.Workspace.Acquire(ctx, req)
	}
	if err != nil || l == nil || w.lease == nil {
		return l, err
	}
	return w.lease(l), nil
}

type wsLeaseWrap struct {
	eval.WorkspaceLease
	id      *string
	save    func(ctx context.Context, req eval.WorkspaceSaveRequest) error
	release func(ctx context.Context) error
}

func (l *wsLeaseWrap) ID() string {
	if l.id != nil {
		return *l.id
	}
	return l.WorkspaceLease.ID()
}

func (l *wsLeaseWrap) Save(ctx context.Context, req eval.WorkspaceSaveRequest) error {
	if l.save != nil {
		return l.save(ctx, req)
	}
	return l.WorkspaceLease.Save(ctx, req)
}

func (l *wsLeaseWrap) Release(ctx context.Context) error {
	if l.release != nil {
		return l.release(ctx)
	}
	return l.WorkspaceLease.Release(ctx)
}

func newDetWorkspace(t *testing.T) *deterministic.Workspace {
	t.Helper()
	w, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWorkspaceConformanceDeterministic(t *testing.T) {
	w := newDetWorkspace(t)
	providertest.RunWorkspace(t, w, providertest.WorkspaceOptions{CheckContent: true})
	acq := w.Acquisitions()
	if len(acq) != 3 || acq[0].ID != providertest.WorkspaceID || !acq[0].Lock || acq[0].Load == nil || acq[0].Load.Revision != "current" {
		t.Fatalf("acquisitions %+v", acq)
	}
	saves := w.Saves()
	if len(saves) != 2 || saves[0].Request.Outcome != "success" || saves[0].Request.Retention != 1 || !saves[0].Request.Gitignore ||
		saves[0].Request.Include != nil {
		t.Fatalf("saves %+v", saves)
	}
	if len(w.Releases()) != 2 {
		t.Fatalf("releases %v", w.Releases())
	}
	if content := w.Files(providertest.WorkspaceID)[providertest.ContentFile]; !strings.HasPrefix(content, "providertest conformance ") {
		t.Fatalf("content %q", content)
	}
	// A second run restores the previous run's content and still passes.
	providertest.RunWorkspace(t, w, providertest.WorkspaceOptions{CheckContent: true})
	providertest.RunWorkspace(t, newDetWorkspace(t))
}

func TestWorkspaceConformanceConcurrentWriters(t *testing.T) {
	det := newDetWorkspace(t)
	w := &workspaceWrap{Workspace: det, acquire: func(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
		r := *req
		r.Lock = false // ignores writer authority
		return det.Acquire(ctx, &r)
	}}
	pe := wantViolations(t, providertest.WorkspaceConformance(context.Background(), w), "workspace",
		`competing Acquire of "conformance-workspace" succeeded while the first lease held it: the provider allowed concurrent writers`)
	if len(pe.Violations) != 1 {
		t.Fatalf("%v", pe)
	}
	if len(det.Releases()) != 2 || len(det.Acquisitions()) != 2 || len(det.Saves()) != 0 {
		t.Fatalf("releases %v acquisitions %d saves %d", det.Releases(), len(det.Acquisitions()), len(det.Saves()))
	}
}

func TestWorkspaceConformanceConflictShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("busy"), `failed with "busy", which is not a *eval.WorkspaceConflictError`},
		{"wrong id", &eval.WorkspaceConflictError{WorkspaceID: "other"}, `conflict for workspace "other", want "conformance-workspace"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			det := newDetWorkspace(t)
			w := &workspaceWrap{Workspace: det, acquire: func(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
				l, err := det.Acquire(ctx, req)
				var ce *eval.WorkspaceConflictError
				if errors.As(err, &ce) {
					return nil, tc.err
				}
				return l, err
			}}
			wantViolations(t, providertest.WorkspaceConformance(context.Background(), w), "workspace", tc.want)
			if len(det.Releases()) != 1 || len(det.Saves()) != 0 {
				t.Fatalf("releases %v saves %d", det.Releases(), len(det.Saves()))
			}
		})
	}
	// A wrapped conflict is accepted.
	det := newDetWorkspace(t)
	w := &workspaceWrap{Workspace: det, acquire: func(ctx context.Context, req *eval.WorkspaceAcquireRequest) (eval.WorkspaceLease, error) {
		l, err := det.Acquire(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("acquire: %w", err)
		}
		return l, nil
	}}
	providertest.RunWorkspace(t, w)
}

func TestWorkspaceConformanceEmptyLeaseID(t *testing.T) {
	det := newDetWorkspace(t)
	empty := ""
	w := &workspaceWrap{Workspace: det, lease: func(l eval.WorkspaceLease) eval.WorkspaceLease { return &wsLeaseWrap{WorkspaceLease: l, id: &empty} }}
	pe := wantViolations(t, providertest.WorkspaceConformance(context.Background(), w, providertest.WorkspaceOptions{CheckContent: true}), "workspace",
		"first lease: lease id is empty", "restored lease: lease id is empty")
	if len(pe.Violations) != 2 || len(det.Releases()) != 2 || len(det.Saves()) != 2 {
		t.Fatalf("%v releases %v saves %d", pe, det.Releases(), len(det.Saves()))
	}
}

func TestWorkspaceConformanceLostContent(t *testing.T) {
	det := newDetWorkspace(t)
	w := &workspaceWrap{Workspace: det, lease: func(l eval.WorkspaceLease) eval.WorkspaceLease {
		return &wsLeaseWrap{WorkspaceLease: l, save: func(context.Context, eval.WorkspaceSaveRequest) error { return nil }}
	}}
	if err := providertest.WorkspaceConformance(context.Background(), w); err != nil {
		t.Fatalf("without CheckContent a no-op save passes: %v", err)
	}
	wantViolations(t, providertest.WorkspaceConformance(context.Background(), w, providertest.WorkspaceOptions{CheckContent: true}), "workspace",
		"restored lease: the saved providertest-conformance.txt is missing from its directory")
}

func TestWorkspaceConformanceSaveAndReleaseFailures(t *testing.T) {
	det := newDetWorkspace(t)
	boom := errors.New("disk full")
	w := &workspaceWrap{Workspace: det, lease: func(l eval.WorkspaceLease) eval.WorkspaceLease {
		return &wsLeaseWrap{WorkspaceLease: l, save: func(context.Context, eval.WorkspaceSaveRequest) error { return boom }}
	}}
	err := providertest.WorkspaceConformance(context.Background(), w)
	wantViolations(t, err, "workspace", "first lease: Save failed: disk full", "restored lease: Save failed: disk full")
	if !errors.Is(err, boom) || len(det.Releases()) != 2 {
		t.Fatalf("%v releases %v", err, det.Releases())
	}

	// A release that keeps the lock makes re-acquisition fail.
	det = newDetWorkspace(t)
	var leases []eval.WorkspaceLease
	w = &workspaceWrap{Workspace: det, lease: func(l eval.WorkspaceLease) eval.WorkspaceLease {
		leases = append(leases, l)
		return &wsLeaseWrap{WorkspaceLease: l, release: func(context.Context) error { return nil }}
	}}
	wantViolations(t, providertest.WorkspaceConformance(context.Background(), w), "workspace",
		`restored Acquire of "conformance-workspace" failed: workspace "conformance-workspace" is locked by another writer`)
	for _, l := range leases {
		l.Release(context.Background())
	}

	wantViolations(t, providertest.WorkspaceConformance(context.Background(), nil), "workspace", "provider is nil")
	wantViolations(t, providertest.WorkspaceConformance(context.Background(), newDetWorkspace(t), providertest.WorkspaceOptions{}, providertest.WorkspaceOptions{}),
		"workspace", "at most one WorkspaceOptions")
}

// fakeTB records Fatal calls instead of stopping the test.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper()                      {}
func (f *fakeTB) Fatal(args ...any)            { f.fatal = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(s string, args ...any) { f.fatal = fmt.Sprintf(s, args...) }

func TestRunWrappers(t *testing.T) {
	ignorant := &agentFunc{name: "ignorant", run: func(context.Context, *eval.AgentRequest) (*eval.AgentResponse, error) {
		return &eval.AgentResponse{}, nil
	}}
	tb := &fakeTB{TB: t}
	providertest.RunAgent(tb, ignorant)
	if !strings.Contains(tb.fatal, "Run succeeded under a pre-cancelled context") {
		t.Fatalf("RunAgent: %q", tb.fatal)
	}
	tb = &fakeTB{TB: t}
	providertest.RunSandbox(tb, newDetSandbox(t), providertest.SandboxOptions{}, providertest.SandboxOptions{})
	if !strings.Contains(tb.fatal, "at most one SandboxOptions") {
		t.Fatalf("RunSandbox: %q", tb.fatal)
	}
	tb = &fakeTB{TB: t}
	providertest.RunWorkspace(tb, nil)
	if !strings.Contains(tb.fatal, "provider is nil") {
		t.Fatalf("RunWorkspace: %q", tb.fatal)
	}
}
