// Package staged is the staged sandbox lifecycle helper: a provider
// supplies provisioning, runtime creation, optional initialization and
// resource release as hooks, and the helper owns the acquisition barrier
// of the original AbstractSandboxProvider:
//
//  1. check cancellation, then Provision creates an acknowledged resource
//     (cleaning up its own partial creation);
//  2. check cancellation, then CreateRuntime translates it into the
//     portable runtime;
//  3. Initialize performs optional hydration or trusted setup;
//  4. check cancellation;
//  5. any failure after step 1 calls CleanupProvisioned (by default
//     ReleaseResource), joining a cleanup failure to the original error;
//  6. the lease's Release runs ReleaseResource exactly once: success,
//     failure and cancellation all converge on one call.
package staged

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aml-go/aml/eval"
)

// Provisioned is a created provider resource: the opaque handle
// descendants may see, the stable lease id and the internal resource
// needed for reconciliation and destruction.
type Provisioned[H, R any] struct {
	Handle   H
	ID       string
	Resource R
}

// Hooks are a provider's stages. Provision, CreateRuntime and
// ReleaseResource are required.
type Hooks[H, R any] struct {
	// Name is the provider's normalized name.
	Name string
	// Provision creates the resource; on failure it removes whatever it
	// partially created.
	Provision func(ctx context.Context, req *eval.SandboxAcquireRequest) (Provisioned[H, R], error)
	// CreateRuntime returns the portable runtime of the resource.
	CreateRuntime func(ctx context.Context, p Provisioned[H, R], req *eval.SandboxAcquireRequest) (eval.SandboxRuntime, error)
	// Initialize, when set, hydrates or sets up the resource.
	Initialize func(ctx context.Context, p Provisioned[H, R], rt eval.SandboxRuntime, req *eval.SandboxAcquireRequest) error
	// CleanupProvisioned, when set, removes a resource whose acquisition
	// failed after provisioning; otherwise ReleaseResource does.
	CleanupProvisioned func(ctx context.Context, p Provisioned[H, R]) error
	// ReleaseResource reconciles and destroys the resource.
	ReleaseResource func(ctx context.Context, p Provisioned[H, R]) error
}

// Provider is an eval.SandboxProvider built from Hooks. It is safe for
// concurrent use when the hooks are.
type Provider[H, R any] struct {
	h Hooks[H, R]
}

// New validates the hooks and returns the provider.
func New[H, R any](h Hooks[H, R]) (*Provider[H, R], error) {
	switch {
	case h.Name == "" || strings.TrimSpace(h.Name) != h.Name:
		return nil, fmt.Errorf("staged sandbox: name %q must be non-empty and trimmed", h.Name)
	case h.Provision == nil || h.CreateRuntime == nil || h.ReleaseResource == nil:
		return nil, fmt.Errorf("staged sandbox %q: Provision, CreateRuntime and ReleaseResource are required", h.Name)
	}
	return &Provider[H, R]{h: h}, nil
}

// Name implements eval.SandboxProvider.
func (p *Provider[H, R]) Name() string { return p.h.Name }

// Acquire implements eval.SandboxProvider with the staged barrier.
func (p *Provider[H, R]) Acquire(ctx context.Context, req *eval.SandboxAcquireRequest) (eval.SandboxLease, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	prov, err := p.h.Provision(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: provisioning the sandbox: %w", p.h.Name, err)
	}
	if strings.TrimSpace(prov.ID) == "" || strings.TrimSpace(prov.ID) != prov.ID {
		return nil, p.cleanup(ctx, prov, fmt.Errorf("%s: provisioned sandbox id %q must be non-empty and trimmed", p.h.Name, prov.ID))
	}
	fail := func(err error) (eval.SandboxLease, error) { return nil, p.cleanup(ctx, prov, err) }
	if err := ctx.Err(); err != nil {
		return fail(context.Cause(ctx))
	}
	rt, err := p.h.CreateRuntime(ctx, prov, req)
	if err != nil {
		return fail(fmt.Errorf("%s: creating the sandbox runtime: %w", p.h.Name, err))
	}
	if rt == nil {
		return fail(fmt.Errorf("%s: CreateRuntime returned no runtime", p.h.Name))
	}
	if p.h.Initialize != nil {
		if err := p.h.Initialize(ctx, prov, rt, req); err != nil {
			return fail(fmt.Errorf("%s: initializing the sandbox: %w", p.h.Name, err))
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(context.Cause(ctx))
	}
	return &Lease[H, R]{p: p, prov: prov, rt: rt}, nil
}

// cleanup removes a resource whose acquisition failed, keeping both
// errors when the cleanup fails too.
func (p *Provider[H, R]) cleanup(ctx context.Context, prov Provisioned[H, R], cause error) error {
	clean := p.h.CleanupProvisioned
	if clean == nil {
		clean = p.h.ReleaseResource
	}
	if err := clean(context.WithoutCancel(ctx), prov); err != nil {
		return errors.Join(cause, fmt.Errorf("%s: cleaning up the failed acquisition: %w", p.h.Name, err))
	}
	return cause
}

// Lease is an acquired staged sandbox. Release is memoized.
type Lease[H, R any] struct {
	p    *Provider[H, R]
	prov Provisioned[H, R]
	rt   eval.SandboxRuntime
	once sync.Once
	err  error
}

// ID implements eval.SandboxLease.
func (l *Lease[H, R]) ID() string { return l.prov.ID }

// Handle returns the opaque provider handle.
func (l *Lease[H, R]) Handle() H { return l.prov.Handle }

// Runtime implements eval.SandboxLease.
func (l *Lease[H, R]) Runtime() eval.SandboxRuntime { return l.rt }

// Release implements eval.SandboxLease: the first call runs
// ReleaseResource; every call returns its result.
func (l *Lease[H, R]) Release(ctx context.Context) error {
	l.once.Do(func() { l.err = l.p.h.ReleaseResource(ctx, l.prov) })
	return l.err
}
