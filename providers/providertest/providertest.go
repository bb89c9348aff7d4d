// Package providertest holds conformance suites for eval.AgentProvider,
// eval.SandboxProvider and eval.WorkspaceProvider implementations.
//
// The suites are ordinary functions that do not depend on a test runner:
// each returns nil when the provider honours the checked contract and
// otherwise an *Error listing every violation. RunAgent, RunSandbox and
// RunWorkspace are thin wrappers for Go tests.
//
// Conformance is not certification: the suites check the portable
// boundary (names, pre-cancelled execution, lease and runtime shape,
// release, workspace conflict, save, release and re-acquisition). They do
// not prove credentials, executables, images, isolation, timeouts, output
// bounds, remote cleanup or security; cover those with provider-specific
// tests.
//
// Every function of this package is safe for concurrent use; the suites
// call the provider from the calling goroutine, except that a Run under a
// pre-cancelled context is awaited on a separate goroutine so that a
// provider that ignores cancellation cannot hang the suite.
package providertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// Error is the result of a failed suite. Unwrap exposes the violations,
// so errors.Is and errors.As see the provider errors they wrap.
type Error struct {
	// Suite is "agent", "sandbox" or "workspace".
	Suite string
	// Provider is the provider's name as reported, or "" when it could not
	// be read.
	Provider string
	// Violations are the failed checks in the order they were found.
	Violations []error
}

// Error lists the violations, one per line.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s provider %q violates the provider contract (%d violation", e.Suite, e.Provider, len(e.Violations))
	if len(e.Violations) != 1 {
		b.WriteByte('s')
	}
	b.WriteString("):")
	for _, v := range e.Violations {
		b.WriteString("\n  - ")
		b.WriteString(strings.ReplaceAll(v.Error(), "\n", "\n    "))
	}
	return b.String()
}

// Unwrap returns the violations.
func (e *Error) Unwrap() []error { return e.Violations }

// report accumulates the violations of one suite run.
type report struct {
	suite, provider string
	violations      []error
}

func (r *report) fail(format string, args ...any) {
	r.violations = append(r.violations, fmt.Errorf(format, args...))
}

func (r *report) err() error {
	if len(r.violations) == 0 {
		return nil
	}
	return &Error{Suite: r.suite, Provider: r.provider, Violations: r.violations}
}

// checkName validates a provider or lease identity: non-empty, equal to
// its trimmed form and without NUL bytes.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is empty", what)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%s %q has surrounding whitespace", what, name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%s %q contains a NUL byte", what, name)
	}
	return nil
}

// safely calls f and turns a panic into an error.
func safely(what string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s panicked: %v", what, v)
		}
	}()
	return f()
}

// name reads the provider name and records a violation for a panic or an
// invalid name.
func (r *report) name(name func() string) {
	err := safely("Name", func() error {
		r.provider = name()
		return nil
	})
	if err != nil {
		r.violations = append(r.violations, err)
		return
	}
	if err := checkName("provider name", r.provider); err != nil {
		r.violations = append(r.violations, err)
	}
}

// cancelGrace bounds the wait for a Run under a pre-cancelled context.
const cancelGrace = 10 * time.Second

// Fixed request of AgentConformance.
const (
	agentPrompt   = "agent-provider-conformance"
	agentFollowUp = "agent-provider-conformance-final"
	agentSystem   = "Follow the provider contract."
)

// AgentRequest returns the fixed request AgentConformance sends: a
// two-turn session (initial prompt and one follow-up), a system text,
// read-write filesystem, network and shell permissions, and no tools, MCP
// servers or skills. Every call returns a new value.
func AgentRequest() *eval.AgentRequest {
	return &eval.AgentRequest{
		Prompt:      agentPrompt,
		FollowUps:   []string{agentFollowUp},
		System:      agentSystem,
		Permissions: eval.Permissions{Filesystem: eval.ReadWrite, Network: true, Shell: true},
		Tools:       []*eval.AgentTool{},
		MCPServers:  []eval.AgentMCPServer{},
		Skills:      []eval.AgentSkill{},
	}
}

// AgentExecution returns the execution context AgentConformance passes:
// fixed trace identities. Every call returns a new value.
func AgentExecution() *eval.AgentExecution {
	return &eval.AgentExecution{
		RunID:        "agent-provider-conformance-run",
		SpanID:       "agent-provider-conformance-span",
		ParentSpanID: "agent-provider-conformance-parent",
		Source:       eval.Position{File: "providertest", Line: 1, Col: 1},
	}
}

// AgentConformance checks that p has a normalized name, answers the fixed
// AgentRequest with a non-nil response, and, called with a context that
// was cancelled with a cause before Run started, fails promptly with an
// error e for which errors.Is(e, cause) holds. Succeeding, failing with an
// unrelated error or not returning within ten seconds (or before ctx is
// done) under the pre-cancelled context are violations.
//
// It returns nil or an *Error. ctx bounds the whole suite.
func AgentConformance(ctx context.Context, p eval.AgentProvider) error {
	r := &report{suite: "agent"}
	if p == nil {
		r.fail("provider is nil")
		return r.err()
	}
	r.name(p.Name)

	var resp *eval.AgentResponse
	err := safely("Run", func() error {
		var err error
		resp, err = p.Run(ctx, AgentRequest(), AgentExecution())
		return err
	})
	switch {
	case err != nil:
		r.fail("Run of the conformance request failed: %w", err)
	case resp == nil:
		r.fail("Run of the conformance request returned neither a response nor an error")
	}

	cause := &cancelCause{}
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(cause)
	type outcome struct {
		resp *eval.AgentResponse
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		o.err = safely("Run under a pre-cancelled context", func() error {
			var err error
			o.resp, err = p.Run(cctx, AgentRequest(), AgentExecution())
			return err
		})
		done <- o
	}()
	timer := time.NewTimer(cancelGrace)
	defer timer.Stop()
	select {
	case o := <-done:
		switch {
		case o.err == nil:
			r.fail("Run succeeded under a pre-cancelled context; it must fail with an error wrapping context.Cause(ctx)")
		case !errors.Is(o.err, cause):
			r.fail("Run under a pre-cancelled context failed with %q, which does not wrap the cancellation cause (context.Cause(ctx))", o.err)
		}
	case <-timer.C:
		r.fail("Run did not return within %s under a pre-cancelled context", cancelGrace)
	case <-ctx.Done():
		r.fail("Run did not return under a pre-cancelled context before the suite's context ended (%v)", context.Cause(ctx))
	}
	return r.err()
}

// cancelCause is the distinct cancellation cause of AgentConformance.
type cancelCause struct{}

func (*cancelCause) Error() string { return "agent-provider-conformance: pre-cancelled" }

// SandboxOptions configure SandboxConformance.
type SandboxOptions struct {
	// Workspace, when non-nil, is passed as the acquire requests'
	// workspace materialization (providers that map the workspace
	// directory, such as a local sandbox, need one).
	Workspace *eval.WorkspaceMaterialization
	// EvaluationID is the requests' evaluation id; "" means
	// "sandbox-provider-conformance".
	EvaluationID string
	// Exercise additionally checks the runtime's filesystem and staging:
	// WriteFile under read-only access fails with eval.ErrReadOnly; reads
	// of absolute or escaping paths fail; under read-write access WriteFile
	// of "providertest-conformance/probe.txt" (which is left in place)
	// round-trips through ReadFile and Stat and replaces rather than
	// appends; CreateFileStaging works under either access, its Root is
	// non-empty, it accepts a relative write and its Release is
	// repeat-safe. Commands are never run.
	Exercise bool
}

// SandboxConformance acquires a read-only and then a read-write lease of
// p with root "." and cwd "." and checks each: the lease id is non-empty
// and trimmed, the runtime is non-nil and reports exactly the requested
// access, root and cwd, and Release succeeds twice. Every acquired lease
// is released, also after a failed check. It runs no command, and touches
// no file unless opts.Exercise is set.
//
// It returns nil or an *Error.
func SandboxConformance(ctx context.Context, p eval.SandboxProvider, opts SandboxOptions) error {
	r := &report{suite: "sandbox"}
	if p == nil {
		r.fail("provider is nil")
		return r.err()
	}
	r.name(p.Name)
	evalID := opts.EvaluationID
	if evalID == "" {
		evalID = "sandbox-provider-conformance"
	}
	for _, access := range []eval.Access{eval.ReadOnly, eval.ReadWrite} {
		req := &eval.SandboxAcquireRequest{Access: access, Root: ".", Cwd: ".", EvaluationID: evalID}
		if opts.Workspace != nil {
			ws := *opts.Workspace
			req.Workspace = &ws
		}
		var lease eval.SandboxLease
		err := safely("Acquire", func() error {
			var err error
			lease, err = p.Acquire(ctx, req)
			return err
		})
		if err != nil {
			r.fail("%s Acquire failed: %w", access, err)
			continue
		}
		if lease == nil {
			r.fail("%s Acquire returned neither a lease nor an error", access)
			continue
		}
		checkLease(ctx, r, access, lease, opts.Exercise)
		for i, what := range []string{"Release", "second Release (Release must be idempotent)"} {
			if err := safely(what, func() error { return lease.Release(ctx) }); err != nil {
				r.fail("%s lease: %s failed: %w", access, what, err)
				if i == 0 {
					break
				}
			}
		}
	}
	return r.err()
}

// checkLease validates an acquired sandbox lease; it never releases it.
func checkLease(ctx context.Context, r *report, access eval.Access, lease eval.SandboxLease, exercise bool) {
	var id string
	if err := safely("lease ID", func() error { id = lease.ID(); return nil }); err != nil {
		r.fail("%s lease: %w", access, err)
	} else if err := checkName("lease id", id); err != nil {
		r.fail("%s lease: %w", access, err)
	}
	var rt eval.SandboxRuntime
	if err := safely("lease Runtime", func() error { rt = lease.Runtime(); return nil }); err != nil {
		r.fail("%s lease: %w", access, err)
		return
	}
	if rt == nil {
		r.fail("%s lease: Runtime is nil", access)
		return
	}
	err := safely("runtime Access/Root/Cwd", func() error {
		if got := rt.Access(); got != access {
			r.fail("%s lease: runtime Access is %q, want %q (the runtime must preserve the requested access)", access, got, access)
		}
		if got := rt.Root(); got != "." {
			r.fail("%s lease: runtime Root is %q, want %q (the runtime must preserve the requested root)", access, got, ".")
		}
		if got := rt.Cwd(); got != "." {
			r.fail("%s lease: runtime Cwd is %q, want %q (the runtime must preserve the requested cwd)", access, got, ".")
		}
		return nil
	})
	if err != nil {
		r.fail("%s lease: %w", access, err)
		return
	}
	if exercise {
		if err := safely("runtime exercise", func() error { exerciseRuntime(ctx, r, access, rt); return nil }); err != nil {
			r.fail("%s lease: %w", access, err)
		}
	}
}

// Paths the Exercise option writes.
const (
	probeDir  = "providertest-conformance"
	probeFile = probeDir + "/probe.txt"
)

// exerciseRuntime runs the optional filesystem and staging checks.
func exerciseRuntime(ctx context.Context, r *report, access eval.Access, rt eval.SandboxRuntime) {
	for _, bad := range []string{"/", "../providertest-escape"} {
		if _, err := rt.ReadFile(ctx, bad); err == nil {
			r.fail("%s runtime: ReadFile(%q) succeeded; paths must be relative and confined below the root", access, bad)
		}
	}
	long := []byte("providertest conformance probe: first, longer content\n")
	short := []byte("providertest probe\n")
	if access == eval.ReadOnly {
		err := rt.WriteFile(ctx, probeFile, short)
		switch {
		case err == nil:
			r.fail("read-only runtime: WriteFile(%q) succeeded; it must fail with an error wrapping eval.ErrReadOnly", probeFile)
		case !errors.Is(err, eval.ErrReadOnly):
			r.fail("read-only runtime: WriteFile(%q) failed with %q, which does not wrap eval.ErrReadOnly", probeFile, err)
		}
	} else {
		ok := true
		for _, data := range [][]byte{long, short} {
			if err := rt.WriteFile(ctx, probeFile, data); err != nil {
				r.fail("read-write runtime: WriteFile(%q) failed: %w", probeFile, err)
				ok = false
				break
			}
			got, err := rt.ReadFile(ctx, probeFile)
			if err != nil {
				r.fail("read-write runtime: ReadFile(%q) after WriteFile failed: %w", probeFile, err)
				ok = false
				break
			}
			if string(got) != string(data) {
				r.fail("read-write runtime: ReadFile(%q) returned %q after WriteFile of %q (WriteFile must replace the whole file)", probeFile, got, data)
				ok = false
				break
			}
		}
		if ok {
			if fi, err := rt.Stat(ctx, probeFile); err != nil {
				r.fail("read-write runtime: Stat(%q) failed: %w", probeFile, err)
			} else if fi.Kind != "file" || fi.Size != int64(len(short)) {
				r.fail("read-write runtime: Stat(%q) = kind %q size %d, want kind \"file\" size %d", probeFile, fi.Kind, fi.Size, len(short))
			}
			if fi, err := rt.Stat(ctx, probeDir); err != nil {
				r.fail("read-write runtime: Stat(%q) failed: %w", probeDir, err)
			} else if fi.Kind != "directory" {
				r.fail("read-write runtime: Stat(%q) = kind %q, want \"directory\"", probeDir, fi.Kind)
			}
		}
	}

	st, err := rt.CreateFileStaging(ctx)
	switch {
	case err != nil:
		r.fail("%s runtime: CreateFileStaging failed: %w (staging must work under either access)", access, err)
		return
	case st == nil:
		r.fail("%s runtime: CreateFileStaging returned neither a staging nor an error", access)
		return
	}
	if err := checkName("staging root", st.Root()); err != nil {
		r.fail("%s runtime: %w", access, err)
	}
	if err := st.WriteFile(ctx, "providertest/staged.txt", short); err != nil {
		r.fail("%s runtime: staging WriteFile failed: %w", access, err)
	}
	for _, what := range []string{"staging Release", "second staging Release (it must be repeat-safe)"} {
		if err := st.Release(ctx); err != nil {
			r.fail("%s runtime: %s failed: %w", access, what, err)
		}
	}
}

// Fixed requests of WorkspaceConformance.
const (
	// WorkspaceID is the workspace id WorkspaceConformance acquires.
	WorkspaceID = "conformance-workspace"
	// ContentFile is the file WorkspaceOptions.CheckContent writes into
	// the first lease's directory.
	ContentFile = "providertest-conformance.txt"
)

// WorkspaceOptions configure WorkspaceConformance.
type WorkspaceOptions struct {
	// CheckContent writes ContentFile with a fresh random content into the
	// first lease's directory before it is saved, and checks that the
	// re-acquired ("restored") lease's directory holds that content.
	CheckContent bool
}

// WorkspaceConformance runs the workspace steps:
//
//  1. Acquire the "first" lease of WorkspaceID (Lock true, Load current)
//     and check that its id and directory are non-empty and trimmed.
//  2. Acquire a competing lease of the same id; it must fail with an
//     error e for which errors.As(e, **eval.WorkspaceConflictError)
//     holds with WorkspaceID equal to the id. If it succeeds, both leases
//     are released and the suite fails ("allowed concurrent writers");
//     any other failure releases the first lease and fails the suite.
//  3. Save the first lease with the default policy (outcome "success",
//     retention 1, no include, no exclude, gitignore) and release it.
//  4. Acquire the "restored" lease of the same id, save it and release it.
//
// Every acquired lease is released, also after a failed check, and all
// failures are reported. opts holds at most one WorkspaceOptions.
//
// It returns nil or an *Error.
func WorkspaceConformance(ctx context.Context, p eval.WorkspaceProvider, opts ...WorkspaceOptions) error {
	r := &report{suite: "workspace"}
	if len(opts) > 1 {
		r.fail("WorkspaceConformance takes at most one WorkspaceOptions, got %d", len(opts))
		return r.err()
	}
	var o WorkspaceOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	if p == nil {
		r.fail("provider is nil")
		return r.err()
	}
	r.name(p.Name)

	first, ok := acquireWorkspace(ctx, r, p, "first")
	if first == nil {
		return r.err()
	}

	var competing eval.WorkspaceLease
	err := safely("competing Acquire", func() error {
		var err error
		competing, err = p.Acquire(ctx, workspaceRequest())
		return err
	})
	var conflict *eval.WorkspaceConflictError
	switch {
	case err == nil:
		r.fail("competing Acquire of %q succeeded while the first lease held it: the provider allowed concurrent writers", WorkspaceID)
		if competing != nil {
			releaseWorkspace(ctx, r, "competing", competing)
		}
		releaseWorkspace(ctx, r, "first", first)
		return r.err()
	case !errors.As(err, &conflict):
		r.fail("competing Acquire of %q failed with %q, which is not a *eval.WorkspaceConflictError", WorkspaceID, err)
		releaseWorkspace(ctx, r, "first", first)
		return r.err()
	case conflict.WorkspaceID != WorkspaceID:
		r.fail("competing Acquire failed with a conflict for workspace %q, want %q", conflict.WorkspaceID, WorkspaceID)
		releaseWorkspace(ctx, r, "first", first)
		return r.err()
	}

	var content string
	if o.CheckContent && ok {
		content = "providertest conformance " + nonce() + "\n"
		if err := writeContent(first.Directory(), content); err != nil {
			r.fail("first lease: writing %s into its directory failed: %w", ContentFile, err)
			content = ""
		}
	}
	saveWorkspace(ctx, r, "first", first)
	releaseWorkspace(ctx, r, "first", first)

	restored, ok := acquireWorkspace(ctx, r, p, "restored")
	if restored == nil {
		return r.err()
	}
	if content != "" && ok {
		got, err := readContent(restored.Directory())
		switch {
		case err != nil:
			r.fail("restored lease: the saved %s is missing from its directory: %w", ContentFile, err)
		case got != content:
			r.fail("restored lease: %s holds %q, want the saved %q", ContentFile, got, content)
		}
	}
	saveWorkspace(ctx, r, "restored", restored)
	releaseWorkspace(ctx, r, "restored", restored)
	return r.err()
}

// workspaceRequest returns the acquire request of WorkspaceConformance.
func workspaceRequest() *eval.WorkspaceAcquireRequest {
	return &eval.WorkspaceAcquireRequest{
		ID:           WorkspaceID,
		EvaluationID: "workspace-provider-conformance",
		Load:         &eval.WorkspaceLoad{Revision: "current"},
		Lock:         true,
	}
}

// defaultSave is the save policy of WorkspaceConformance.
func defaultSave() eval.WorkspaceSaveRequest {
	return eval.WorkspaceSaveRequest{Outcome: "success", SavePolicy: eval.SavePolicy{Retention: 1, Exclude: []string{}, Gitignore: true}}
}

// acquireWorkspace acquires and validates one lease; ok reports that its
// id and directory are valid. A nil lease means the suite cannot go on.
func acquireWorkspace(ctx context.Context, r *report, p eval.WorkspaceProvider, label string) (lease eval.WorkspaceLease, ok bool) {
	err := safely(label+" Acquire", func() error {
		var err error
		lease, err = p.Acquire(ctx, workspaceRequest())
		return err
	})
	if err != nil {
		r.fail("%s Acquire of %q failed: %w", label, WorkspaceID, err)
		return nil, false
	}
	if lease == nil {
		r.fail("%s Acquire of %q returned neither a lease nor an error", label, WorkspaceID)
		return nil, false
	}
	ok = true
	err = safely(label+" lease ID/Directory", func() error {
		if err := checkName("lease id", lease.ID()); err != nil {
			r.fail("%s lease: %w", label, err)
			ok = false
		}
		if err := checkName("directory", lease.Directory()); err != nil {
			r.fail("%s lease: %w", label, err)
			ok = false
		}
		return nil
	})
	if err != nil {
		r.fail("%s lease: %w", label, err)
		ok = false
	}
	return lease, ok
}

func saveWorkspace(ctx context.Context, r *report, label string, lease eval.WorkspaceLease) {
	if err := safely(label+" Save", func() error { return lease.Save(ctx, defaultSave()) }); err != nil {
		r.fail("%s lease: Save failed: %w", label, err)
	}
}

func releaseWorkspace(ctx context.Context, r *report, label string, lease eval.WorkspaceLease) {
	if err := safely(label+" Release", func() error { return lease.Release(ctx) }); err != nil {
		r.fail("%s lease: Release failed: %w", label, err)
	}
}

// RunAgent runs AgentConformance with t.Context() and fails t with its
// error.
func RunAgent(t testing.TB, p eval.AgentProvider) {
	t.Helper()
	if err := AgentConformance(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

// RunSandbox runs SandboxConformance with t.Context() and at most one
// SandboxOptions (none means the zero value) and fails t with its error.
func RunSandbox(t testing.TB, p eval.SandboxProvider, opts ...SandboxOptions) {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("RunSandbox takes at most one SandboxOptions, got %d", len(opts))
	}
	var o SandboxOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	if err := SandboxConformance(t.Context(), p, o); err != nil {
		t.Fatal(err)
	}
}

// RunWorkspace runs WorkspaceConformance with t.Context() and at most one
// WorkspaceOptions and fails t with its error.
func RunWorkspace(t testing.TB, p eval.WorkspaceProvider, opts ...WorkspaceOptions) {
	t.Helper()
	if err := WorkspaceConformance(t.Context(), p, opts...); err != nil {
		t.Fatal(err)
	}
}

// nonce returns a fresh random hex string.
func nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeContent writes ContentFile into dir.
func writeContent(dir, content string) error {
	return os.WriteFile(filepath.Join(dir, ContentFile), []byte(content), 0o644)
}

// readContent reads ContentFile from dir.
func readContent(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, ContentFile))
	return string(data), err
}
