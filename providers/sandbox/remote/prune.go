package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aml-go/aml/internal/procscope"
)

// Leftover is one sandbox of the provider found by Prune.
type Leftover struct {
	ID string `json:"id"`
	// Run is the evaluation id of the run that created it.
	Run string `json:"run"`
	// Owner is the marker of the aml process that created it.
	Owner string `json:"owner"`
}

// PruneResult is what Prune found.
type PruneResult struct {
	// Removed are the sandboxes of aml processes of this machine that no
	// longer exist, now destroyed.
	Removed []Leftover `json:"removed"`
	// Busy are sandboxes whose aml process still runs.
	Busy []Leftover `json:"busy"`
	// Foreign are sandboxes another machine's aml process made (or whose
	// owner cannot be told): left alone.
	Foreign []Leftover `json:"foreign"`
}

// Prune destroys the sandboxes of svc that aml processes of this machine
// left when they were killed outright (SIGKILL, OOM, power loss): those
// that carry the provider's labels and whose aml.owner names a process
// that no longer exists. Sandboxes of live runs and of other machines are
// only reported.
func Prune(ctx context.Context, svc Service) (PruneResult, error) {
	res := PruneResult{Removed: []Leftover{}, Busy: []Leftover{}, Foreign: []Leftover{}}
	found, err := svc.List(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("listing %s sandboxes: %w", svc.Name(), err)
	}
	var errs []error
	for _, f := range found {
		owner, ok := f.Labels[LabelOwner]
		if !ok || f.Labels[LabelLease] == "" {
			continue // not the provider's
		}
		l := Leftover{ID: f.ID, Run: f.Labels[LabelRun], Owner: owner}
		switch {
		case procscope.MarkerGone(owner):
			if err := svc.Destroy(ctx, f.ID); err != nil {
				errs = append(errs, fmt.Errorf("destroying %s sandbox %s: %w", svc.Name(), f.ID, err))
				continue
			}
			res.Removed = append(res.Removed, l)
		case ownerHere(owner):
			res.Busy = append(res.Busy, l)
		default:
			res.Foreign = append(res.Foreign, l)
		}
	}
	return res, errors.Join(errs...)
}

// ownerHere reports whether a marker names a process of this machine.
func ownerHere(marker string) bool {
	parts := strings.SplitN(strings.TrimPrefix(marker, "aml-"), "-", 3)
	return len(parts) == 3 && parts[1] == procscope.MachineTag() && parts[1] != "0"
}
