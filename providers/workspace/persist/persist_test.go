package persist_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
)

func newMemory(testing.TB) persist.Storage { return persist.NewMemoryStorage() }

func TestMemoryStorage(t *testing.T) { persisttest.RunStorage(t, newMemory) }

func TestProviderOverMemory(t *testing.T) { persisttest.RunProvider(t, newMemory) }

func TestLostLock(t *testing.T) {
	ctx := context.Background()
	st := persist.NewMemoryStorage()
	e := persisttest.NewEnv(t, st, persist.Options{})
	l := e.Acquire("ws", true, nil)
	persisttest.WriteTree(t, l.Directory(), persisttest.Tree{"f": {Data: "x", Mode: 0o644}})
	st.BreakLock("ws")
	other := e.Acquire("ws", true, nil) // the lock was taken over
	err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}})
	if !errors.Is(err, persist.ErrLockLost) {
		t.Fatalf("Save with a lost lock: %v", err)
	}
	var ce *eval.WorkspaceConflictError
	if errors.As(err, &ce) {
		t.Fatalf("lost lock reported as a conflict: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, persist.ErrLockLost) {
		t.Fatalf("Release with a lost lock: %v", err)
	}
	if !st.Locked("ws") {
		t.Fatal("releasing the lost lease released the new owner's lock")
	}
	e.Release(other)
	if x := e.StoredIndex("ws"); x != nil {
		t.Fatal("a save without its lock published")
	}
}

func TestLostLockBeforePublication(t *testing.T) {
	ctx := context.Background()
	st := persist.NewMemoryStorage()
	e := persisttest.NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatFolder}})
	l := e.Acquire("ws", true, nil)
	persisttest.WriteTree(t, l.Directory(), persisttest.Tree{"f": {Data: "x", Mode: 0o644}})
	e.SetHook(func(s persist.Step) error {
		if s == persist.StepBeforePublication {
			st.BreakLock("ws")
		}
		return nil
	})
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}}); !errors.Is(err, persist.ErrLockLost) {
		t.Fatalf("Save: %v", err)
	}
	l.Release(ctx)
	if x := e.StoredIndex("ws"); x != nil {
		t.Fatal("published without the lock")
	}
}

func TestStorageFaults(t *testing.T) {
	ctx := context.Background()
	st := persist.NewMemoryStorage()
	e := persisttest.NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatFolder}})
	first := e.SaveTree("ws", persisttest.Tree{"a": {Data: "1", Mode: 0o644}}, 1)
	// The index write fails: the upload is removed, the old revision stays.
	st.SetFault(func(op, id, p string) error {
		if op == persist.OpWrite && p == persist.IndexPath {
			return errors.New("disk on fire")
		}
		return nil
	})
	l := e.Acquire("ws", true, persisttest.Current)
	persisttest.WriteTree(t, l.Directory(), persisttest.Tree{"b": {Data: "2", Mode: 0o644}})
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Save: %v", err)
	}
	if o := e.Orphans("ws"); len(o) != 0 {
		t.Fatalf("orphans %q", o)
	}
	// Both publication and orphan cleanup fail: the error says so.
	st.SetFault(func(op, id, p string) error {
		if (op == persist.OpWrite && p == persist.IndexPath) || op == persist.OpDelete || op == persist.OpList {
			return errors.New("store unavailable")
		}
		return nil
	})
	err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}})
	if err == nil || !strings.Contains(err.Error(), "orphan cleanup failed") {
		t.Fatalf("Save with failing cleanup: %v", err)
	}
	// A prune failure is a PruneError after a valid publication.
	st.SetFault(func(op, id, p string) error {
		if op == persist.OpDelete || op == persist.OpList {
			return errors.New("cannot delete")
		}
		return nil
	})
	err = l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 1}})
	var pe *persist.PruneError
	if !errors.As(err, &pe) || pe.Revision != l.RevisionID() {
		t.Fatalf("Save with failing prune: %v", err)
	}
	st.SetFault(nil)
	e.Release(l)
	if x := e.StoredIndex("ws"); x.Current != l.RevisionID() || x.Current == first || len(x.Revisions) != 1 {
		t.Fatalf("index %+v", x)
	}
}

func TestEncodeSegment(t *testing.T) {
	for id, want := range map[string]string{
		"review-42":                            "review-42",
		"0b8a6f3e-4c1d-4e0f-9a5b-2c3d4e5f6a7b": "0b8a6f3e-4c1d-4e0f-9a5b-2c3d4e5f6a7b",
		"a/b":                                  "a%2Fb",
		"a b":                                  "a%20b",
		".":                                    "%2E",
		"..":                                   "%2E%2E",
		"...":                                  "...",
		"x.y_z~":                               "x.y_z~",
		"!'()*":                                "%21%27%28%29%2A",
		"ü":                                    "%C3%BC",
		`back\slash`:                           "back%5Cslash",
		"C:":                                   "C%3A",
		"slack:T1/C2":                          "slack%3AT1%2FC2",
	} {
		got, err := persist.EncodeSegment(id)
		if err != nil || got != want {
			t.Errorf("EncodeSegment(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
	for _, id := range []string{"", " x", "x\n", "\xff"} {
		if _, err := persist.EncodeSegment(id); err == nil {
			t.Errorf("EncodeSegment(%q) accepted", id)
		}
	}
}

func TestParseIndex(t *testing.T) {
	good := `{"version":1,"current":"b","revisions":[{"id":"b","format":"folder","path":"revisions/b/","createdAt":"2026-03-04T05:06:07.089Z"},{"id":"a","format":"archive","path":"revisions/a.tar.gz","createdAt":"2026-03-04T05:06:07.000Z"}]}`
	x, err := persist.ParseIndex([]byte(good))
	if err != nil || x.Current != "b" || len(x.Revisions) != 2 || x.Find("a").Format != persist.FormatArchive {
		t.Fatalf("ParseIndex = %+v, %v", x, err)
	}
	for _, bad := range []string{
		strings.Replace(good, `"revisions/b/"`, `"revisions/b"`, 1),
		strings.Replace(good, `"current":"b"`, `"current":""`, 1),
		strings.Replace(good, `.089Z`, `.089+00:00`, 1),
		strings.Replace(good, `"id":"a"`, `"id":" a"`, 1),
		strings.Replace(good, `"version":1`, `"version":"1"`, 1),
		`{"version":1,"current":"b","revisions":null}`,
	} {
		if _, err := persist.ParseIndex([]byte(bad)); err == nil {
			t.Errorf("ParseIndex accepted %s", bad)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []persist.StoreOptions{{Format: "tar"}, {MaxEntries: -1}, {MaxArchiveBytes: -1}, {MaxExtractedBytes: -5}} {
		if o.Validate() == nil {
			t.Errorf("Validate accepted %+v", o)
		}
	}
	if err := (persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatFolder, MaxEntries: 10}}).Validate(); err != nil {
		t.Error(err)
	}
	if _, err := persist.New(nil, persist.Options{}).Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "x"}); err == nil {
		t.Error("nil storage accepted")
	}
}
