package docker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// removing is an engine on which another client's removal of a
// container is under way: ContainerRemove conflicts, and the container
// is gone after a few inspections.
type removing struct {
	client.APIClient
	inspections atomic.Int32
	goneAfter   int32
}

func (e *removing) ContainerRemove(context.Context, string, container.RemoveOptions) error {
	return errdefs.Conflict(errors.New("removal of container 91d0 is already in progress"))
}

func (e *removing) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	if e.inspections.Add(1) > e.goneAfter {
		return container.InspectResponse{}, errdefs.NotFound(errors.New("no such container"))
	}
	return container.InspectResponse{}, nil
}

// TestRemovalAlreadyInProgress: a container whose removal a killed run
// started is waited for until it is gone, not reported as a failure; one
// that stays past the engine timeout is.
func TestRemovalAlreadyInProgress(t *testing.T) {
	e := &removing{goneAfter: 3}
	p := &Provider{cli: e, engineTimeout: 5 * time.Second}
	if err := removeContainer(context.Background(), p, "c"); err != nil {
		t.Fatalf("a removal in progress that ends: %v", err)
	}
	if n := e.inspections.Load(); n != 4 {
		t.Errorf("%d inspections, want 4 (three while it was there, one that found it gone)", n)
	}
	stuck := &removing{goneAfter: 1 << 30}
	p = &Provider{cli: stuck, engineTimeout: 300 * time.Millisecond}
	var te *EngineTimeoutError
	if err := removeContainer(context.Background(), p, "c"); !errors.As(err, &te) {
		t.Fatalf("a removal that never ends: %v, want the engine timeout", err)
	}
}
