package persisttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// RunProvider's checks of saves that fail or crash at each step, of
// corrupt and unsafe stored objects, and RunDamage's of damaged stores.

// testInjection fails or crashes a save at step, then checks that the
// store is consistent: the index parses, current is the previous revision
// (before publication) or the new one (after), it restores, and a failed
// (not crashed) save leaves no orphans.
func testInjection(t *testing.T, newStorage NewStorageFunc, format string, step persist.Step, crash bool) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	v1 := Tree{"keep.txt": {Data: "v1", Mode: 0o644}, "dir": {Dir: true, Mode: 0o755}, "dir/a": {Data: "a1", Mode: 0o600}, "dir/b": {Data: "b1", Mode: 0o644}}
	v2 := Tree{"keep.txt": {Data: "v2", Mode: 0o644}, "dir": {Dir: true, Mode: 0o755}, "dir/a": {Data: "a2", Mode: 0o600}, "dir/c": {Data: "c2", Mode: 0o644}}
	first := e.SaveTree("ws", v1, 1)

	injected := errors.New("injected failure")
	if crash {
		injected = fmt.Errorf("killed: %w", persist.ErrSimulatedCrash)
	}
	var fired atomic.Int32
	e.SetHook(func(s persist.Step) error {
		if s == step && fired.Add(1) == 1 {
			return injected
		}
		return nil
	})
	l := e.Acquire("ws", true, Current)
	ClearDir(t, l.Directory())
	WriteTree(t, l.Directory(), v2)
	err := l.Save(ctx, saveReq(1))
	e.SetHook(nil)
	if err == nil || !errors.Is(err, injected) {
		t.Fatalf("Save = %v, want the injected error", err)
	}
	mustConflictFree(t, err)
	published := step == persist.StepAfterPublication || step == persist.StepDuringPrune
	var pe *persist.PruneError
	if published && !crash && !errors.As(err, &pe) {
		t.Fatalf("failure after publication is %T, want *persist.PruneError", err)
	}
	e.Release(l)

	x := e.StoredIndex("ws")
	want, wantCurrent := v1, first
	if published {
		want, wantCurrent = v2, l.RevisionID()
	}
	if x == nil || x.Current != wantCurrent {
		t.Fatalf("current %v, want %s (published=%v)", x, wantCurrent, published)
	}
	if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
		t.Fatalf("restored tree after the injected failure:\n%s", d)
	}
	if !crash && !published {
		if o := e.Orphans("ws"); len(o) != 0 {
			t.Fatalf("the failed save left objects: %q", o)
		}
	}
	// The store keeps working: a later save publishes and prunes.
	e.SaveTree("ws", v1, 1)
	if x := e.StoredIndex("ws"); len(x.Revisions) != 1 {
		t.Fatalf("index after recovery %+v", x)
	}
	e.AssertTempEmpty()
}

// testCorruption damages stored state and expects *persist.CorruptError.
func testCorruption(t *testing.T, newStorage NewStorageFunc, format string) {
	expectCorrupt := func(t *testing.T, e *Env, load *eval.WorkspaceLoad) {
		t.Helper()
		_, err := e.TryAcquire("ws", true, load)
		if !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("Acquire = %v, want a corruption error", err)
		}
		mustConflictFree(t, err)
		var ce *persist.CorruptError
		if !errors.As(err, &ce) || ce.WorkspaceID != "ws" {
			t.Fatalf("error %T is not a *persist.CorruptError", err)
		}
		// The failed acquisition released the lock and its temp state.
		l, err := e.TryAcquire("ws", true, nil)
		mustConflictFree(t, err)
		if err == nil {
			e.Release(l)
		}
		e.AssertTempEmpty()
	}
	tree := Tree{"a.txt": {Data: strings.Repeat("content ", 500), Mode: 0o644}, "d": {Dir: true, Mode: 0o755}, "d/b.txt": {Data: "b", Mode: 0o644}}
	setup := func(t *testing.T) (*Env, *persist.Revision) {
		e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
		e.SaveTree("ws", tree, 1)
		x := e.StoredIndex("ws")
		return e, &x.Revisions[0]
	}
	indexes := map[string]string{
		"garbage":        "{not json",
		"empty":          "",
		"null":           "null",
		"version3":       `{"version":3,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"pins-in-v1":     `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","sha256":"` + strings.Repeat("a", 64) + `","size":3}]}`,
		"bad-sha256":     `{"version":2,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","sha256":"ABC","size":3}]}`,
		"size-no-sha256": `{"version":2,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","size":3}]}`,
		"zero-size":      `{"version":2,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z","sha256":"` + strings.Repeat("a", 64) + `","size":0}]}`,
		"unknown-field":  `{"version":1,"current":"r","extra":1,"revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"current-absent": `{"version":1,"current":"x","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"bad-path":       `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/../r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"bad-date":       `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05Z"}]}`,
		"bad-format":     `{"version":1,"current":"r","revisions":[{"id":"r","format":"zip","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"duplicate":      `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"},{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"traversal-id":   `{"version":1,"current":"..","revisions":[{"id":"..","format":"archive","path":"revisions/...tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]}`,
		"trailing":       `{"version":1,"current":"r","revisions":[{"id":"r","format":"archive","path":"revisions/r.tar.gz","createdAt":"2026-01-02T03:04:05.678Z"}]} {}`,
	}
	for name, data := range indexes {
		t.Run("Index/"+name, func(t *testing.T) {
			e, _ := setup(t)
			e.Put("ws", persist.IndexPath, []byte(data))
			expectCorrupt(t, e, Current)
			expectCorrupt(t, e, nil) // the index is read even without load
		})
	}
	t.Run("Index/too-large", func(t *testing.T) {
		e, _ := setup(t)
		e.Put("ws", persist.IndexPath, bytes.Repeat([]byte(" "), persist.MaxIndexBytes+1))
		expectCorrupt(t, e, Current)
	})
	t.Run("MissingArtifact", func(t *testing.T) {
		e, rev := setup(t)
		if format == persist.FormatFolder {
			e.Remove("ws", rev.Path+"manifest.json")
		} else {
			e.Remove("ws", rev.Path)
		}
		expectCorrupt(t, e, Current)
	})
	if format == persist.FormatArchive {
		damage := map[string]func([]byte) []byte{
			"garbage":   func([]byte) []byte { return []byte("this is not a gzip stream") },
			"truncated": func(b []byte) []byte { return b[:len(b)/2] },
			"flipped": func(b []byte) []byte {
				c := bytes.Clone(b)
				c[len(c)/2] ^= 0xff
				return c
			},
			"bad-crc": func(b []byte) []byte {
				c := bytes.Clone(b)
				c[len(c)-6] ^= 0x01
				return c
			},
			"gzip-not-tar": func([]byte) []byte {
				var buf bytes.Buffer
				zw := gzip.NewWriter(&buf)
				zw.Write(bytes.Repeat([]byte("not a tar header "), 64))
				zw.Close()
				return buf.Bytes()
			},
		}
		for name, f := range damage {
			t.Run("Archive/"+name, func(t *testing.T) {
				e, rev := setup(t)
				e.Put("ws", rev.Path, f(e.Get("ws", rev.Path)))
				expectCorrupt(t, e, Current)
			})
		}
	} else {
		t.Run("Folder/missing-file", func(t *testing.T) {
			e, rev := setup(t)
			e.Remove("ws", rev.Path+"files/d/b.txt")
			expectCorrupt(t, e, Current)
		})
		t.Run("Folder/wrong-size", func(t *testing.T) {
			e, rev := setup(t)
			e.Put("ws", rev.Path+"files/a.txt", []byte("short"))
			expectCorrupt(t, e, Current)
		})
		t.Run("Folder/longer", func(t *testing.T) {
			e, rev := setup(t)
			e.Put("ws", rev.Path+"files/d/b.txt", []byte("bb"))
			expectCorrupt(t, e, Current)
		})
		t.Run("Folder/wrong-content", func(t *testing.T) {
			e, rev := setup(t)
			e.Put("ws", rev.Path+"files/d/b.txt", []byte("x"))
			expectCorrupt(t, e, Current)
		})
		manifests := map[string]string{
			"garbage":       "[",
			"traversal":     `{"version":1,"entries":[{"path":"../evil","type":"file","size":0,"mode":420}]}`,
			"absolute":      `{"version":1,"entries":[{"path":"/etc/evil","type":"file","size":0,"mode":420}]}`,
			"drive":         `{"version":1,"entries":[{"path":"C:/evil","type":"file","size":0,"mode":420}]}`,
			"symlink":       `{"version":1,"entries":[{"path":"l","type":"symlink","size":0,"mode":420}]}`,
			"mode":          `{"version":1,"entries":[{"path":"a","type":"file","size":0,"mode":4095}]}`,
			"missing-mode":  `{"version":1,"entries":[{"path":"a","type":"file","size":0}]}`,
			"dir-size":      `{"version":1,"entries":[{"path":"a","type":"directory","size":3,"mode":493}]}`,
			"below-file":    `{"version":1,"entries":[{"path":"a","type":"file","size":0,"mode":420},{"path":"a/b","type":"file","size":0,"mode":420}]}`,
			"duplicate":     `{"version":1,"entries":[{"path":"a","type":"file","size":0,"mode":420},{"path":"a","type":"file","size":0,"mode":420}]}`,
			"unknown-field": `{"version":1,"entries":[],"x":1}`,
		}
		for name, data := range manifests {
			t.Run("Manifest/"+name, func(t *testing.T) {
				e, rev := setup(t)
				e.Put("ws", rev.Path+"manifest.json", []byte(data))
				expectCorrupt(t, e, Current)
			})
		}
	}
}

// tarGz builds an archive from raw headers.
func tarGz(t *testing.T, hs []*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			io.WriteString(tw, strings.Repeat("x", int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// testUnsafeArchives publishes hostile archives and checks that restores
// reject them without writing outside the materialization.
func testUnsafeArchives(t *testing.T, newStorage NewStorageFunc) {
	cases := map[string][]*tar.Header{
		"traversal":   {{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "../escaped.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"nested-up":   {{Name: "./a/../../escaped.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"absolute":    {{Name: "/tmp/escaped.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"symlink":     {{Name: "./link", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777}},
		"hardlink":    {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "./b", Typeflag: tar.TypeLink, Linkname: "a"}},
		"device":      {{Name: "./dev", Typeflag: tar.TypeChar, Mode: 0o644}},
		"fifo":        {{Name: "./fifo", Typeflag: tar.TypeFifo, Mode: 0o644}},
		"duplicate":   {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"below-file":  {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "./a/b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}},
		"two-roots":   {{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: ".", Typeflag: tar.TypeDir, Mode: 0o755}},
		"setuid-mode": {{Name: "./a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o4755 | 0o70000}},
		"empty":       {},
	}
	if runtime.GOOS == "windows" {
		// Elsewhere this is one file's name (RunNames restores it).
		cases["backslash"] = []*tar.Header{{Name: "./a\\..\\..\\x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}
	}
	for name, hs := range cases {
		t.Run(name, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{})
			id := "rev-" + name
			index, _ := json.Marshal(persist.Index{Version: 1, Current: id, Revisions: []persist.Revision{{ID: id, Format: persist.FormatArchive, Path: persist.RevisionPath(id, persist.FormatArchive), CreatedAt: time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}}})
			e.Put("ws", persist.RevisionPath(id, persist.FormatArchive), tarGz(t, hs))
			e.Put("ws", persist.IndexPath, index)
			_, err := e.TryAcquire("ws", true, Current)
			if !errors.Is(err, persist.ErrCorrupt) {
				t.Fatalf("Acquire = %v, want a corruption error", err)
			}
			e.AssertTempEmpty()
			if _, err := os.Lstat(filepath.Join(filepath.Dir(e.Temp), "escaped.txt")); err == nil {
				t.Fatal("an archive entry escaped the materialization")
			}
		})
	}
}

// RunDamage runs, for both formats, the damage tests of RunProvider: a
// missing or damaged index (nothing is deleted, the error says what is
// there, Check finds it, Recover brings it back), a swapped, truncated
// or missing revision (refused at load, found by Check). Storages whose
// whole RunProvider suite is too slow (a remote service) run it alone.
func RunDamage(t *testing.T, newStorage NewStorageFunc) {
	for _, format := range Formats {
		t.Run("Damage/"+format, func(t *testing.T) {
			testDamage(t, newStorage, format)
		})
	}
}

// testDamage damages a store with three retained revisions as people and
// faulty services do, and checks that nothing is deleted on a guess,
// that loads refuse what does not match the index, that Check finds each
// damage, and that Recover brings a lost index back.
func testDamage(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	trees := []Tree{
		{"a.txt": {Data: "first", Mode: 0o644}},
		{"a.txt": {Data: "second, longer", Mode: 0o644}, "d": {Dir: true, Mode: 0o755}},
		{"a.txt": {Data: "third", Mode: 0o644}, "d": {Dir: true, Mode: 0o755}, "d/b.txt": {Data: strings.Repeat("b", 3000), Mode: 0o600}},
	}
	setup := func(t *testing.T) (*Env, []string) {
		e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
		var ids []string
		for _, tr := range trees {
			ids = append(ids, e.SaveTree("ws", tr, 3))
		}
		return e, ids
	}
	objects := func(e *Env) []string {
		l := acquire(e.TB, e.Storage, "ws", false)
		defer release(e.TB, l)
		ps, err := l.List(ctx, "")
		if err != nil {
			e.TB.Fatal(err)
		}
		return ps
	}
	check := func(t *testing.T, e *Env, readData bool) persist.WorkspaceCheck {
		t.Helper()
		res, err := persist.Check(ctx, e.Storage, []string{"ws"}, persist.CheckOptions{ReadData: readData})
		if err != nil || len(res) != 1 {
			t.Fatalf("Check = %+v, %v", res, err)
		}
		return res[0]
	}
	hasProblem := func(c persist.WorkspaceCheck, kind string) bool {
		for _, p := range c.Problems {
			if p.Kind == kind {
				return true
			}
		}
		return false
	}

	t.Run("Sound", func(t *testing.T) {
		e, ids := setup(t)
		for _, rd := range []bool{false, true} {
			c := check(t, e, rd)
			if !c.OK() || c.Index != "ok" || c.Revisions != 3 || c.Current != ids[2] {
				t.Fatalf("Check(ReadData %v) of a sound store = %+v", rd, c)
			}
		}
		x := e.StoredIndex("ws")
		for _, r := range x.Revisions {
			if x.Version != persist.IndexVersion || !r.Pinned() {
				t.Fatalf("a saved revision is not pinned: %+v", x)
			}
		}
	})

	for _, how := range []string{"missing", "damaged"} {
		t.Run("Index/"+how, func(t *testing.T) {
			e, ids := setup(t)
			if how == "missing" {
				e.Remove("ws", persist.IndexPath)
			} else {
				e.Put("ws", persist.IndexPath, []byte(`{"version":2,"current":`))
			}
			before := objects(e)
			for _, lock := range []bool{true, false} {
				for _, load := range []*eval.WorkspaceLoad{Current, nil} {
					_, err := e.TryAcquire("ws", lock, load)
					var ie *persist.IndexError
					if !errors.As(err, &ie) || !errors.Is(err, persist.ErrCorrupt) || ie.Missing != (how == "missing") {
						t.Fatalf("Acquire(lock %v) with the index %s = %v, want an *IndexError", lock, how, err)
					}
					msg := err.Error()
					if !strings.Contains(msg, "nothing was loaded and nothing was deleted") || !strings.Contains(msg, "aml workspace recover") || !strings.Contains(msg, "workspace.json") {
						t.Fatalf("the error does not say what is there and what to do: %v", err)
					}
					if how == "missing" {
						for _, id := range ids {
							if !strings.Contains(msg, id) {
								t.Fatalf("the error does not name revision %s: %v", id, err)
							}
						}
					}
				}
			}
			if _, err := e.Provider.(persist.Sweeper).Sweep(ctx, "ws"); err == nil && how == "missing" {
				t.Fatal("a sweep of a workspace whose index is missing reported nothing")
			}
			if after := objects(e); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("objects were deleted on a guess:\nbefore %v\nafter  %v", before, after)
			}
			c := check(t, e, false)
			if c.OK() || !hasProblem(c, map[string]string{"missing": persist.ProblemIndexMissing, "damaged": persist.ProblemIndexDamaged}[how]) {
				t.Fatalf("Check did not find the %s index: %+v", how, c)
			}

			// Recover: the plan first, nothing written without consent.
			rec, err := persist.Recover(ctx, e.Storage, "ws", e.Temp, func(*persist.Recovery) bool { return false })
			if err != nil || rec.Written || rec.Index == nil || len(rec.Index.Revisions) != 3 {
				t.Fatalf("Recover without consent = %+v, %v", rec, err)
			}
			if after := objects(e); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("a declined recovery changed the store:\nbefore %v\nafter  %v", before, after)
			}
			rec, err = persist.Recover(ctx, e.Storage, "ws", e.Temp, nil)
			if err != nil || !rec.Written {
				t.Fatalf("Recover = %+v, %v", rec, err)
			}
			want := map[string]Tree{ids[0]: trees[0], ids[1]: trees[1], ids[2]: trees[2]}
			cur, ok := want[rec.Index.Current]
			if !ok {
				t.Fatalf("the recovered current revision %s is none of the saved ones %v", rec.Index.Current, ids)
			}
			if d := DiffTrees(cur, e.Load("ws", Current)); d != "" {
				t.Fatalf("the recovered current revision loads differently:\n%s", d)
			}
			for id, tr := range want {
				if d := DiffTrees(tr, e.Load("ws", &eval.WorkspaceLoad{Revision: id})); d != "" {
					t.Fatalf("recovered revision %s loads differently:\n%s", id, d)
				}
			}
			if c := check(t, e, true); !c.OK() {
				t.Fatalf("Check after Recover = %+v", c)
			}
			if _, err := persist.Recover(ctx, e.Storage, "ws", e.Temp, nil); err == nil || !strings.Contains(err.Error(), "nothing to recover") {
				t.Fatalf("Recover of a sound index = %v", err)
			}
			e.AssertTempEmpty()
		})
	}

	t.Run("SwappedRevision", func(t *testing.T) {
		e, ids := setup(t)
		x := e.StoredIndex("ws")
		cur, prev := x.Find(ids[2]), x.Find(ids[1])
		// The previous revision's content put in place of the current one.
		e.Put("ws", cur.PinnedPath(), e.Get("ws", prev.PinnedPath()))
		_, err := e.TryAcquire("ws", true, Current)
		var ce *persist.CorruptError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not match the index") || !strings.Contains(err.Error(), cur.PinnedPath()) {
			t.Fatalf("loading a swapped revision = %v, want it refused naming %s", err, cur.PinnedPath())
		}
		c := check(t, e, true)
		if !hasProblem(c, persist.ProblemRevisionMismatch) {
			t.Fatalf("Check did not find the swapped revision: %+v", c)
		}
		// The other revisions still load.
		if d := DiffTrees(trees[1], e.Load("ws", &eval.WorkspaceLoad{Revision: ids[1]})); d != "" {
			t.Fatalf("revision %s loads differently:\n%s", ids[1], d)
		}
		e.AssertTempEmpty()
	})

	t.Run("TruncatedRevision", func(t *testing.T) {
		e, ids := setup(t)
		x := e.StoredIndex("ws")
		cur := x.Find(ids[2])
		target := cur.PinnedPath()
		if format == persist.FormatFolder {
			target = cur.Path + "files/d/b.txt"
		}
		data := e.Get("ws", target)
		e.Put("ws", target, data[:len(data)/2])
		if _, err := e.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("loading a truncated revision = %v, want a corruption error", err)
		}
		c := check(t, e, false)
		kind := persist.ProblemRevisionMismatch
		if format == persist.FormatFolder {
			kind = persist.ProblemFileMismatch
		}
		if !hasProblem(c, kind) {
			t.Fatalf("Check without reading data did not find the truncated %s: %+v", target, c)
		}
	})

	t.Run("MissingRevision", func(t *testing.T) {
		e, ids := setup(t)
		x := e.StoredIndex("ws")
		e.Remove("ws", x.Find(ids[0]).PinnedPath())
		c := check(t, e, false)
		if !hasProblem(c, persist.ProblemRevisionMissing) {
			t.Fatalf("Check did not find the missing revision: %+v", c)
		}
	})

	// ReuseAfterSwap: an object of the current revision that the next save
	// would reuse (a folder revision's unchanged file) is swapped for other
	// bytes of its size, or truncated, behind aml's back; a run then saves
	// the right tree, by a lease that loaded nothing or one whose load
	// preceded the damage. The save must not inherit the damage: it either
	// publishes a revision that loads the run's content, or fails with a
	// corruption error and publishes nothing. Either way the store is sound
	// after it (retention 1 prunes the damaged revisions).
	for _, how := range []string{"swapped", "truncated"} {
		for _, when := range []string{"before-unloaded-lease", "during-run"} {
			t.Run("ReuseAfterSwap/"+how+"/"+when, func(t *testing.T) {
				e, ids := setup(t)
				cur := e.StoredIndex("ws").Find(ids[2])
				target := cur.PinnedPath()
				if format == persist.FormatFolder {
					target = cur.Path + "files/d/b.txt"
				}
				damage := func() {
					data := e.Get("ws", target)
					if how == "swapped" {
						data = bytes.Repeat([]byte("X"), len(data))
					} else {
						data = data[:len(data)/2]
					}
					e.Put("ws", target, data)
				}
				var l persist.Lease
				if when == "during-run" {
					l = e.Acquire("ws", true, Current)
					damage()
				} else {
					damage()
					l = e.Acquire("ws", true, nil)
					WriteTree(t, l.Directory(), trees[2])
				}
				err := l.Save(ctx, saveReq(1))
				saved := l.RevisionID()
				e.Release(l)
				x := e.StoredIndex("ws")
				if err != nil {
					if !errors.Is(err, persist.ErrCorrupt) {
						t.Fatalf("a save over a %s object failed without saying it is damaged: %v", how, err)
					}
					if x.Current != ids[2] {
						t.Fatalf("a failed save published %s", x.Current)
					}
					if o := e.Orphans("ws"); len(o) != 0 {
						t.Fatalf("a failed save left orphans %q", o)
					}
					return
				}
				if x.Current != saved || saved == ids[2] {
					t.Fatalf("the save reported success, current is %s, the lease stands on %s", x.Current, saved)
				}
				got, err := e.TryAcquire("ws", false, Current)
				if err != nil {
					t.Fatalf("the saved revision inherited the %s object and does not load: %v", how, err)
				}
				if d := DiffTrees(trees[2], ReadTree(t, got.Directory())); d != "" {
					e.Release(got)
					t.Fatalf("the saved revision loads differently:\n%s", d)
				}
				e.Release(got)
				if c := check(t, e, true); !c.OK() || c.Revisions != 1 || c.Current != saved {
					t.Fatalf("Check after the save = %+v", c)
				}
				if o := e.Orphans("ws"); len(o) != 0 {
					t.Fatalf("orphans %q", o)
				}
				e.AssertTempEmpty()
			})
		}
	}
}
