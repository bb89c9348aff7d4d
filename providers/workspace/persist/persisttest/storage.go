package persisttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// NewStorageFunc returns fresh, empty storage for one test.
type NewStorageFunc func(tb testing.TB) persist.Storage

func acquire(tb testing.TB, s persist.Storage, id string, lock bool) persist.StorageLease {
	tb.Helper()
	l, err := s.Acquire(context.Background(), persist.StorageAcquireRequest{ID: id, EvaluationID: "eval", Lock: lock})
	if err != nil {
		tb.Fatalf("storage Acquire(%q, lock=%v): %v", id, lock, err)
	}
	return l
}

func release(tb testing.TB, l persist.StorageLease) {
	tb.Helper()
	if err := l.Release(context.Background()); err != nil {
		tb.Fatalf("storage Release: %v", err)
	}
}

func write(tb testing.TB, l persist.StorageLease, p, data string, cond persist.Condition) (persist.Version, error) {
	tb.Helper()
	return l.Write(context.Background(), p, strings.NewReader(data), persist.WriteOptions{Condition: cond, ContentLength: int64(len(data))})
}

func read(tb testing.TB, l persist.StorageLease, p string) (string, persist.Version, error) {
	tb.Helper()
	body, v, err := l.Read(context.Background(), p)
	if err != nil {
		return "", "", err
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	return string(data), v, err
}

// RunStorage checks the persist.Storage contract: missing objects, the
// three write conditions (also under concurrency), content lengths, List,
// Delete, Copy (when supported), path validation and writer locks.
func RunStorage(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()

	t.Run("ReadWriteConditions", func(t *testing.T) {
		s := newStorage(t)
		l := acquire(t, s, "ws", true)
		defer release(t, l)
		if _, _, err := read(t, l, "workspace.json"); !errors.Is(err, persist.ErrNotExist) {
			t.Fatalf("read missing: %v, want ErrNotExist", err)
		}
		v1, err := write(t, l, "workspace.json", "one", persist.Absent)
		if err != nil {
			t.Fatal(err)
		}
		data, v, err := read(t, l, "workspace.json")
		if err != nil || data != "one" || v != v1 {
			t.Fatalf("read = %q, %q, %v; want one, %q", data, v, err, v1)
		}
		if _, err := write(t, l, "workspace.json", "again", persist.Absent); !errors.Is(err, persist.ErrPreconditionFailed) {
			t.Fatalf("absent over existing: %v, want ErrPreconditionFailed", err)
		}
		if _, err := write(t, l, "workspace.json", "two", persist.MatchVersion("bogus")); !errors.Is(err, persist.ErrPreconditionFailed) {
			t.Fatalf("wrong version: %v, want ErrPreconditionFailed", err)
		}
		var ce *eval.WorkspaceConflictError
		if _, err := write(t, l, "workspace.json", "two", persist.MatchVersion("bogus")); errors.As(err, &ce) {
			t.Fatalf("precondition failure is a conflict error: %v", err)
		}
		v2, err := write(t, l, "workspace.json", "two", persist.MatchVersion(v1))
		if err != nil || v2 == v1 {
			t.Fatalf("matching version: %q, %v", v2, err)
		}
		if data, _, _ := read(t, l, "workspace.json"); data != "two" {
			t.Fatalf("content %q after conditional write", data)
		}
		if _, err := write(t, l, "missing.json", "x", persist.MatchVersion(v2)); !errors.Is(err, persist.ErrPreconditionFailed) {
			t.Fatalf("version condition on a missing object: %v", err)
		}
		if _, err := write(t, l, "workspace.json", "three", persist.Condition{}); err != nil {
			t.Fatalf("unconditional: %v", err)
		}
		if _, err := l.Write(ctx, "short", strings.NewReader("abc"), persist.WriteOptions{ContentLength: 5}); err == nil {
			t.Fatal("a body shorter than ContentLength was accepted")
		}
		if _, _, err := read(t, l, "short"); !errors.Is(err, persist.ErrNotExist) {
			t.Fatalf("a rejected write left an object: %v", err)
		}
		if _, err := l.Write(ctx, "unknown-length", strings.NewReader("abc"), persist.WriteOptions{ContentLength: -1}); err != nil {
			t.Fatalf("unknown length: %v", err)
		}
	})

	t.Run("InvalidPaths", func(t *testing.T) {
		s := newStorage(t)
		l := acquire(t, s, "ws", false)
		defer release(t, l)
		invalid := []string{"", "/abs", "../up", "a/../b", "a//b", "./a", "a/./b", "a/", "a\x00b", "bad\xff"}
		if runtime.GOOS == "windows" {
			invalid = append(invalid, "a\\b")
		}
		for _, p := range invalid {
			if _, err := write(t, l, p, "x", persist.Condition{}); err == nil {
				t.Errorf("write %q accepted", p)
			}
			if _, _, err := l.Read(ctx, p); err == nil || errors.Is(err, persist.ErrNotExist) {
				t.Errorf("read %q: %v, want a validation error", p, err)
			}
		}
	})

	t.Run("ListDelete", func(t *testing.T) {
		s := newStorage(t)
		l := acquire(t, s, "ws", false)
		defer release(t, l)
		for _, p := range []string{"revisions/a/manifest.json", "revisions/a/files/x", "revisions/a/files/d/.y", "revisions/ab.tar.gz", "workspace.json"} {
			if _, err := write(t, l, p, p, persist.Absent); err != nil {
				t.Fatal(err)
			}
		}
		got, err := l.List(ctx, "revisions/a/")
		want := []string{"revisions/a/files/d/.y", "revisions/a/files/x", "revisions/a/manifest.json"}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("List = %q, %v; want %q", got, err, want)
		}
		if got, _ := l.List(ctx, "revisions/"); len(got) != 4 {
			t.Fatalf("List(revisions/) = %q", got)
		}
		if got, _ := l.List(ctx, "nothing/"); len(got) != 0 {
			t.Fatalf("List(nothing/) = %q", got)
		}
		if err := l.Delete(ctx, append(want, "revisions/never")); err != nil {
			t.Fatal(err)
		}
		if got, _ := l.List(ctx, "revisions/"); !slices.Equal(got, []string{"revisions/ab.tar.gz"}) {
			t.Fatalf("after Delete: %q", got)
		}
		if _, _, err := read(t, l, "revisions/a/files/x"); !errors.Is(err, persist.ErrNotExist) {
			t.Fatalf("deleted object: %v", err)
		}
	})

	t.Run("Copy", func(t *testing.T) {
		s := newStorage(t)
		l := acquire(t, s, "ws", false)
		defer release(t, l)
		cp, ok := l.(persist.Copier)
		if !ok {
			t.Skip("the storage lease does not implement persist.Copier")
		}
		if _, err := write(t, l, "a/src", "content", persist.Absent); err != nil {
			t.Fatal(err)
		}
		if err := cp.Copy(ctx, "a/src", "b/dst"); err != nil {
			t.Fatal(err)
		}
		if data, _, err := read(t, l, "b/dst"); err != nil || data != "content" {
			t.Fatalf("copy = %q, %v", data, err)
		}
		if err := cp.Copy(ctx, "a/src", "b/dst"); !errors.Is(err, persist.ErrPreconditionFailed) {
			t.Fatalf("copy over existing: %v", err)
		}
		if err := cp.Copy(ctx, "a/none", "b/other"); !errors.Is(err, persist.ErrNotExist) {
			t.Fatalf("copy of missing: %v", err)
		}
		// Replacing the source leaves the copy alone.
		if _, err := write(t, l, "a/src", "changed", persist.Condition{}); err != nil {
			t.Fatal(err)
		}
		if data, _, _ := read(t, l, "b/dst"); data != "content" {
			t.Fatalf("copy changed with its source: %q", data)
		}
	})

	t.Run("Namespaces", func(t *testing.T) {
		s := newStorage(t)
		a := acquire(t, s, "a/b", false)
		b := acquire(t, s, "a%2Fb", false)
		defer release(t, a)
		defer release(t, b)
		if _, err := write(t, a, "workspace.json", "a", persist.Absent); err != nil {
			t.Fatal(err)
		}
		if _, err := write(t, b, "workspace.json", "b", persist.Absent); err != nil {
			t.Fatalf("namespaces of distinct ids collide: %v", err)
		}
		if data, _, _ := read(t, a, "workspace.json"); data != "a" {
			t.Fatalf("namespace a holds %q", data)
		}
	})

	t.Run("Lock", func(t *testing.T) {
		s := newStorage(t)
		l := acquire(t, s, "ws", true)
		_, err := s.Acquire(ctx, persist.StorageAcquireRequest{ID: "ws", Lock: true})
		var ce *eval.WorkspaceConflictError
		if !errors.As(err, &ce) || ce.WorkspaceID != "ws" {
			t.Fatalf("second locked Acquire: %v, want *eval.WorkspaceConflictError", err)
		}
		other := acquire(t, s, "other", true)
		release(t, other)
		unlocked := acquire(t, s, "ws", false)
		release(t, unlocked)
		release(t, l)
		if err := l.Release(ctx); err != nil {
			t.Fatalf("second Release: %v", err)
		}
		again := acquire(t, s, "ws", true)
		release(t, again)
	})

	t.Run("ConcurrentCompareAndSwap", func(t *testing.T) {
		s := newStorage(t)
		setup := acquire(t, s, "ws", false)
		v0, err := write(t, setup, "workspace.json", "v0", persist.Absent)
		if err != nil {
			t.Fatal(err)
		}
		release(t, setup)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := s.Acquire(ctx, persist.StorageAcquireRequest{ID: "ws"})
				if err != nil {
					errs[i] = err
					return
				}
				defer l.Release(ctx)
				_, errs[i] = l.Write(ctx, "workspace.json", strings.NewReader(fmt.Sprint("v", i+1)), persist.WriteOptions{Condition: persist.MatchVersion(v0), ContentLength: -1})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, persist.ErrPreconditionFailed):
				t.Errorf("loser error %v, want ErrPreconditionFailed", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d compare-and-swap writes won, want 1", won)
		}
	})
}
