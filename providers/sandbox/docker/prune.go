package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/aml-go/aml/internal/procscope"
)

// Leftover is one container of the provider found by Prune.
type Leftover struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Run is the evaluation id of the run that created it.
	Run string `json:"run"`
	// Owner is the marker of the aml process that created it.
	Owner string `json:"owner"`
}

// PruneResult is what Prune found.
type PruneResult struct {
	// Removed are the containers of aml processes of this machine that no
	// longer exist, now removed.
	Removed []Leftover `json:"removed"`
	// Busy are containers whose aml process still runs.
	Busy []Leftover `json:"busy"`
	// Foreign are containers another machine's aml process made (or whose
	// owner cannot be told): left alone.
	Foreign []Leftover `json:"foreign"`
}

// Prune removes the containers that aml processes of this machine left
// when they were killed outright (SIGKILL, OOM, power loss): those that
// carry the provider's labels and whose aml.owner names a process that
// no longer exists. Containers of live runs and of other machines are
// only reported. cli nil means NewClient. Every call to the engine is
// bounded by DefaultEngineTimeout.
func Prune(ctx context.Context, cli client.APIClient) (PruneResult, error) {
	res := PruneResult{Removed: []Leftover{}, Busy: []Leftover{}, Foreign: []Leftover{}}
	if cli == nil {
		c, err := NewClient()
		if err != nil {
			return res, fmt.Errorf("the Docker client: %w", err)
		}
		defer c.Close()
		cli = c
	}
	b := &Provider{cli: cli, engineTimeout: DefaultEngineTimeout}
	found, err := b.containers(ctx)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, l := range found {
		switch {
		case procscope.MarkerGone(l.Owner):
			err := removeContainer(ctx, b, l.ID)
			if err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removing %s: %w", l.Name, err))
				continue
			}
			res.Removed = append(res.Removed, l)
		case ownerHere(l.Owner):
			res.Busy = append(res.Busy, l)
		default:
			res.Foreign = append(res.Foreign, l)
		}
	}
	return res, errors.Join(errs...)
}

// removeContainer removes a container. One whose removal another
// client started (a run killed while it released its sandbox, whose
// request the engine goes on with) is waited for until it is gone,
// within the engine timeout.
func removeContainer(ctx context.Context, b *Provider, id string) error {
	err := engineDo(b, ctx, "remove container", func(c context.Context) error {
		return b.cli.ContainerRemove(c, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err == nil || !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "already in progress") {
		return err
	}
	return engineDo(b, ctx, "wait for the removal of a container", func(c context.Context) error {
		for {
			if _, err := b.cli.ContainerInspect(c, id); cerrdefs.IsNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
			select {
			case <-c.Done():
				return context.Cause(c)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// Leftovers returns the containers of the provider on cli's engine that
// aml processes of this machine left when they were killed: what Prune
// would remove. It removes nothing. cli nil means NewClient.
func Leftovers(ctx context.Context, cli client.APIClient) ([]Leftover, error) {
	if cli == nil {
		c, err := NewClient()
		if err != nil {
			return nil, fmt.Errorf("the Docker client: %w", err)
		}
		defer c.Close()
		cli = c
	}
	return (&Provider{cli: cli, engineTimeout: DefaultEngineTimeout}).leftovers(ctx)
}

// leftovers is Leftovers on the provider's engine, under its bound.
func (p *Provider) leftovers(ctx context.Context) ([]Leftover, error) {
	found, err := p.containers(ctx)
	if err != nil {
		return nil, err
	}
	var out []Leftover
	for _, l := range found {
		if procscope.MarkerGone(l.Owner) {
			out = append(out, l)
		}
	}
	return out, nil
}

// containers lists every container that carries the provider's labels.
// (A Provider made only of a client and a bound serves the functions
// that take a client.)
func (p *Provider) containers(ctx context.Context) ([]Leftover, error) {
	list, err := engineCall(p, ctx, "list containers", func(c context.Context) ([]container.Summary, error) {
		return p.cli.ContainerList(c, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelOwner), filters.Arg("label", LabelLease))})
	})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	out := make([]Leftover, 0, len(list))
	for _, c := range list {
		l := Leftover{ID: c.ID, Run: c.Labels[LabelRun], Owner: c.Labels[LabelOwner]}
		if len(c.Names) > 0 {
			l.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, l)
	}
	return out, nil
}

// ownerHere reports whether a marker names a process of this machine.
func ownerHere(marker string) bool {
	parts := strings.SplitN(strings.TrimPrefix(marker, "aml-"), "-", 3)
	return len(parts) == 3 && parts[1] == procscope.MachineTag() && parts[1] != "0"
}
