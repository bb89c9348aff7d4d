package eval_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/deterministic"
)

// TestRunIDIsUUIDv7: run ids are RFC 9562 version 7 UUIDs, so they sort
// by start time.
func TestRunIDIsUUIDv7(t *testing.T) {
	prev := ""
	for range 50 {
		id := eval.NewRunID()
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("run id %q is not a UUID: %v", id, err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("run id %q: version %d variant %v, want version 7, RFC 4122 variant", id, u.Version(), u.Variant())
		}
		if id <= prev {
			t.Fatalf("run ids do not sort by time: %q after %q", id, prev)
		}
		prev = id
	}
}

// TestWorkspaceIDIsUUIDv4: a workspace() without id= gets a random
// version 4 UUID, as the <Workspace /> page says.
func TestWorkspaceIDIsUUIDv4(t *testing.T) {
	ws, err := deterministic.NewWorkspace(deterministic.WorkspaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := eval.New(eval.Options{WorkspaceProvider: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Evaluate(context.Background(), &eval.Workspace{Children: []any{"x"}}); err != nil {
		t.Fatal(err)
	}
	acq := ws.Acquisitions()
	if len(acq) != 1 {
		t.Fatalf("%d acquisitions", len(acq))
	}
	u, err := uuid.Parse(acq[0].ID)
	if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("workspace id %q: %v, version %d", acq[0].ID, err, u.Version())
	}
}
