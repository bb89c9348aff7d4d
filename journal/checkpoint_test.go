package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// node is one entry of a tree as the tests compare them.
type node struct {
	dir   bool
	mode  fs.FileMode
	mtime int64
	data  string
}

// treeOf reads the tree under dir, failing on anything but regular files
// and directories.
func treeOf(t testing.TB, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := node{dir: info.IsDir(), mode: info.Mode().Perm(), mtime: info.ModTime().UnixNano()}
		switch {
		case info.IsDir():
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.data = string(b)
		default:
			return fmt.Errorf("%s is a %v", p, info.Mode().Type())
		}
		out[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree reports the differences between two trees.
func sameTree(t testing.TB, what string, got, want map[string]node) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, p+": missing")
		case g.dir != w.dir:
			diffs = append(diffs, fmt.Sprintf("%s: dir %v, want %v", p, g.dir, w.dir))
		case g.mode != w.mode:
			diffs = append(diffs, fmt.Sprintf("%s: mode %v, want %v", p, g.mode, w.mode))
		case g.data != w.data:
			diffs = append(diffs, fmt.Sprintf("%s: content differs (%d bytes, want %d)", p, len(g.data), len(w.data)))
		case g.mtime != w.mtime:
			diffs = append(diffs, fmt.Sprintf("%s: mtime %v, want %v", p, time.Unix(0, g.mtime), time.Unix(0, w.mtime)))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, p+": unexpected")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s: the trees differ:\n\t%s", what, strings.Join(diffs, "\n\t"))
	}
}

func writeFile(t testing.TB, path, data string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mustCheckpoint(t testing.TB, r *Run, dir string) string {
	t.Helper()
	id, err := r.Checkpoint(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustRestore(t testing.TB, r *Run, id, dir string) {
	t.Helper()
	if err := r.Restore(context.Background(), id, dir); err != nil {
		t.Fatal(err)
	}
}

// backdate sets the modification times of the tree's files and
// directories in the past, distinct per entry, beyond racyWindow.
func backdate(t testing.TB, dir string) {
	t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var paths []string
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	})
	for i := len(paths) - 1; i >= 0; i-- { // children first
		at := base.Add(time.Duration(i)*time.Second + time.Duration(i)*1234567)
		if err := os.Chtimes(paths[i], at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// sampleTree writes a tree with nested directories, an empty directory,
// an executable, dotfiles, a read-only file and directory and a 2 MiB
// file.
func sampleTree(t testing.TB, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "a", "b", "c.txt"), "hello", 0o644)
	writeFile(t, filepath.Join(dir, "a", "b", "d.txt"), "same content", 0o644)
	writeFile(t, filepath.Join(dir, "a", "same.txt"), "same content", 0o640)
	if err := os.MkdirAll(filepath.Join(dir, "a", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "bin", "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(dir, ".hidden"), "dot", 0o600)
	writeFile(t, filepath.Join(dir, ".config", "x"), "x", 0o644)
	writeFile(t, filepath.Join(dir, "ro", "ro.txt"), "read only", 0o444)
	writeFile(t, filepath.Join(dir, "empty.txt"), "", 0o644)
	big := make([]byte, 2<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	writeFile(t, filepath.Join(dir, "big.bin"), string(big), 0o644)
	if err := os.Chmod(filepath.Join(dir, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a", "b"), 0o750); err != nil {
		t.Fatal(err)
	}
	backdate(t, dir)
}

// mutate changes the sample tree in every way.
func mutate(t testing.TB, dir string) {
	t.Helper()
	p := func(s string) string { return filepath.Join(dir, filepath.FromSlash(s)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, p("a/b/c.txt"), "HELLO", 0o644) // same size
	f, err := os.OpenFile(p("big.bin"), os.O_WRONLY|os.O_APPEND, 0)
	must(err)
	_, err = f.Write([]byte("more"))
	must(err)
	must(f.Close())
	must(os.Remove(p(".hidden")))
	writeFile(t, p("a/new.txt"), "new", 0o644)
	writeFile(t, p("newdir/sub/file"), "deep", 0o644)
	must(os.Remove(p("a/empty")))
	writeFile(t, p("a/empty"), "was a directory", 0o644)
	must(os.Remove(p("bin/run.sh")))
	writeFile(t, p("bin/run.sh/inside"), "was a file", 0o644)
	must(os.Chmod(p("ro"), 0o755))
	must(os.Chmod(p("ro/ro.txt"), 0o666))
	must(os.Chmod(p("a/b"), 0o700))
	now := time.Now()
	must(os.Chtimes(p(".config/x"), now, now))
	must(os.Chtimes(p("a"), now, now))
	writeFile(t, p("empty.txt"), "not empty any more", 0o644)
	must(os.Symlink("a", p("link")))
	// A symbolic link where the checkpoint has a file, of the file's size
	// and to its content.
	must(os.Remove(p("a/same.txt")))
	must(os.Symlink("b/../b/d.txt", p("a/same.txt")))
	must(os.Symlink("nowhere", p("a/b/dangling")))
}

func TestCheckpointRoundTrip(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	sampleTree(t, src)
	want := treeOf(t, src)
	id := mustCheckpoint(t, r, src)
	if id != "00000001" {
		t.Errorf("the first checkpoint's id is %q, want 00000001", id)
	}

	mutate(t, src)
	mustRestore(t, r, id, src)
	sameTree(t, "restored in place", treeOf(t, src), want)

	// Into an empty directory, and into one that does not exist.
	empty := t.TempDir()
	mustRestore(t, r, id, empty)
	sameTree(t, "restored into an empty directory", treeOf(t, empty), want)
	missing := filepath.Join(t.TempDir(), "x", "y")
	mustRestore(t, r, id, missing)
	sameTree(t, "restored into a missing directory", treeOf(t, missing), want)

	// Restoring again changes nothing.
	writes := r.cp.restoreWrites
	mustRestore(t, r, id, src)
	sameTree(t, "restored twice", treeOf(t, src), want)
	if r.cp.restoreWrites != writes {
		t.Errorf("restoring an equal tree wrote %d files", r.cp.restoreWrites-writes)
	}

	// An empty tree is a checkpoint too, and restoring it empties the
	// directory.
	id2 := mustCheckpoint(t, r, t.TempDir())
	if id2 <= id {
		t.Errorf("the second checkpoint's id %q does not sort after %q", id2, id)
	}
	mustRestore(t, r, id2, src)
	sameTree(t, "restored from an empty checkpoint", treeOf(t, src), map[string]node{})
}

// The helper process for TestCheckpointAcrossProcesses: it opens the
// run, checkpoints the directory, records an effect naming the
// checkpoint, syncs, takes one more checkpoint that no record names, and
// dies without closing the run.
const helperCheckpointEnv = "JOURNAL_TEST_CHECKPOINT_TREE"

func TestCheckpointHelperProcess(t *testing.T) {
	tree := os.Getenv(helperCheckpointEnv)
	if tree == "" {
		return
	}
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	r, err := Open(os.Getenv(helperDirEnv), os.Getenv(helperRunEnv))
	if err != nil {
		fail(err)
	}
	id, err := r.Checkpoint(context.Background(), tree)
	if err != nil {
		fail(err)
	}
	e := agentEffect(1, `{"text":"wrote files"}`)
	e.Checkpoint = id
	if err := r.Record(e); err != nil {
		fail(err)
	}
	if err := r.Sync(); err != nil {
		fail(err)
	}
	unnamed, err := r.Checkpoint(context.Background(), tree)
	if err != nil {
		fail(err)
	}
	fmt.Println(id, unnamed)
	os.Exit(0) // a crash: no Close
}

func TestCheckpointAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	runID := r.ID()
	mustClose(t, r)
	tree := t.TempDir()
	sampleTree(t, tree)
	want := treeOf(t, tree)

	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointHelperProcess$")
	cmd.Env = append(os.Environ(), helperCheckpointEnv+"="+tree, helperDirEnv+"="+dir, helperRunEnv+"="+runID)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the helper process: %v\n%s", err, out)
	}
	ids := strings.Fields(string(out))
	if len(ids) != 2 {
		t.Fatalf("the helper process printed %q", out)
	}
	id, unnamed := ids[0], ids[1]
	if !(id < unnamed) {
		t.Fatalf("the helper's checkpoint ids %q and %q do not sort in order", id, unnamed)
	}

	r = mustOpen(t, dir, runID)
	defer r.Close()
	if got := r.LastCheckpoint(); got != id {
		t.Errorf("LastCheckpoint after Open = %q, want %q", got, id)
	}
	mutate(t, tree)
	mustRestore(t, r, id, tree)
	sameTree(t, "restored by another process", treeOf(t, tree), want)
	next := mustCheckpoint(t, r, tree)
	if !(next > unnamed) {
		t.Errorf("a checkpoint after the resume has id %q, which does not sort after %q (and %q)", next, unnamed, id)
	}
	// Recording it makes it the last.
	e := agentEffect(2, `{}`)
	e.Checkpoint = next
	mustRecord(t, r, e)
	if got := r.LastCheckpoint(); got != next {
		t.Errorf("LastCheckpoint = %q, want %q", got, next)
	}
}

func TestLastCheckpoint(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	if got := r.LastCheckpoint(); got != "" {
		t.Errorf("LastCheckpoint of a new run = %q", got)
	}
	e1, e2, e3 := agentEffect(1, `{}`), agentEffect(2, `{}`), agentEffect(3, `{}`)
	e1.Checkpoint, e2.Checkpoint = "00000002", "00000001" // order of records, not of ids
	mustRecord(t, r, e1, e2, e3)
	if got := r.LastCheckpoint(); got != "00000001" {
		t.Errorf("LastCheckpoint = %q, want the last record's that names one, 00000001", got)
	}
	mustClose(t, r)
	r = mustOpen(t, dir, r.ID())
	defer r.Close()
	if got := r.LastCheckpoint(); got != "00000001" {
		t.Errorf("LastCheckpoint after Open = %q, want 00000001", got)
	}
	// A new checkpoint is numbered after every id a record names, even
	// with no checkpoint on disk.
	if id := mustCheckpoint(t, r, t.TempDir()); id != "00000003" {
		t.Errorf("the next checkpoint is %q, want 00000003", id)
	}
}

// objectCount counts the files in the run's objects/.
func objectCount(t testing.TB, r *Run) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(r.Dir(), objectsName))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestCheckpointIncremental(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("d%d", i%3), fmt.Sprintf("f%02d", i)), fmt.Sprint("content ", i), 0o644)
	}
	writeFile(t, filepath.Join(src, "dup1"), "duplicated", 0o644)
	writeFile(t, filepath.Join(src, "dup2"), "duplicated", 0o644)
	backdate(t, src)

	id1 := mustCheckpoint(t, r, src)
	if r.cp.objectWrites != 21 || objectCount(t, r) != 21 {
		t.Fatalf("the first checkpoint wrote %d objects (%d on disk), want 21 (duplicates once)", r.cp.objectWrites, objectCount(t, r))
	}
	writes, hashes := r.cp.objectWrites, r.cp.hashes
	mustCheckpoint(t, r, src)
	if r.cp.objectWrites != writes || r.cp.hashes != hashes {
		t.Errorf("a checkpoint of an unchanged tree wrote %d objects and hashed %d files, want none", r.cp.objectWrites-writes, r.cp.hashes-hashes)
	}

	// One changed file is read and stored; a touched one is read, not
	// stored.
	writeFile(t, filepath.Join(src, "d0", "f00"), "changed", 0o644)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(src, "d1", "f01"), old, old); err != nil {
		t.Fatal(err)
	}
	writes, hashes = r.cp.objectWrites, r.cp.hashes
	mustCheckpoint(t, r, src)
	if r.cp.objectWrites-writes != 1 || r.cp.hashes-hashes != 2 || objectCount(t, r) != 22 {
		t.Errorf("after changing a file and touching another, a checkpoint wrote %d objects and hashed %d files (%d objects on disk), want 1, 2 and 22", r.cp.objectWrites-writes, r.cp.hashes-hashes, objectCount(t, r))
	}

	// A file modified just now (or in the future, as a clock that is off
	// has it) is hashed again each time: its stat is not trusted to the
	// cache.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(src, "d0", "f00"), future, future); err != nil {
		t.Fatal(err)
	}
	writes, hashes = r.cp.objectWrites, r.cp.hashes
	mustCheckpoint(t, r, src)
	mustCheckpoint(t, r, src)
	if r.cp.objectWrites != writes || r.cp.hashes-hashes != 2 {
		t.Errorf("two checkpoints with a recently modified file wrote %d objects and hashed %d files, want 0 and 2", r.cp.objectWrites-writes, r.cp.hashes-hashes)
	}

	// A new Run of the run reads the files again but stores nothing.
	runDir := filepath.Dir(r.Dir())
	mustClose(t, r)
	r = mustOpen(t, runDir, r.ID())
	defer r.Close()
	mustCheckpoint(t, r, src)
	if r.cp.objectWrites != 0 || r.cp.hashes != 22 {
		t.Errorf("a resumed run's first checkpoint wrote %d objects and hashed %d files, want 0 and 22", r.cp.objectWrites, r.cp.hashes)
	}

	// Restore writes only the files that differ, and leaves the others
	// alone (same inode, times and change time).
	mustRestore(t, r, id1, src)
	before := map[string]fileSum{}
	filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() {
			info, _ := de.Info()
			before[p] = statSum(info)
		}
		return err
	})
	writeFile(t, filepath.Join(src, "d2", "f02"), "content X", 0o644) // same size
	changed := filepath.Join(src, "d2", "f02")
	restores := r.cp.restoreWrites
	mustRestore(t, r, id1, src)
	if n := r.cp.restoreWrites - restores; n != 1 {
		t.Errorf("Restore wrote %d files, want 1", n)
	}
	for p, s := range before {
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if p != changed && !statSum(info).sameStat(s) {
			t.Errorf("Restore touched %s, which was as in the checkpoint: stat %+v, was %+v", p, statSum(info), s)
		}
	}
	if b, _ := os.ReadFile(changed); string(b) != "content 2" {
		t.Errorf("Restore left %s with %q", changed, b)
	}
}

// TestCheckpointStatCache: a file rewritten with its size and
// modification time kept is noticed (by its change time and inode).
func TestCheckpointStatCache(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	p := filepath.Join(src, "f")
	writeFile(t, p, "version 1", 0o644)
	backdate(t, src)
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if ino, ctime := statIDs(info); ino == 0 || ctime == 0 {
		t.Skip("no inode numbers or change times on " + runtime.GOOS)
	}
	mustCheckpoint(t, r, src)
	time.Sleep(10 * time.Millisecond) // past the change time's granularity
	writeFile(t, p, "version 2", 0o644)
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	id := mustCheckpoint(t, r, src)
	dst := t.TempDir()
	mustRestore(t, r, id, dst)
	if b, _ := os.ReadFile(filepath.Join(dst, "f")); string(b) != "version 2" {
		t.Errorf("the checkpoint of a file rewritten with its size and time kept holds %q", b)
	}
}

func TestCheckpointRefusesSpecialFiles(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	cases := map[string]func(dir string) (string, error){
		"symlink to a file": func(dir string) (string, error) {
			writeFile(t, filepath.Join(dir, "target"), "x", 0o644)
			p := filepath.Join(dir, "sub", "link")
			os.MkdirAll(filepath.Dir(p), 0o755)
			return p, os.Symlink("../target", p)
		},
		"symlink to a directory": func(dir string) (string, error) {
			p := filepath.Join(dir, "link")
			return p, os.Symlink(t.TempDir(), p)
		},
		"dangling symlink": func(dir string) (string, error) {
			p := filepath.Join(dir, ".link")
			return p, os.Symlink("nowhere", p)
		},
		"socket": func(dir string) (string, error) {
			p := filepath.Join(dir, "s")
			l, err := net.Listen("unix", p)
			if err != nil {
				return "", err
			}
			t.Cleanup(func() { l.Close() })
			return p, nil
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ok"), "fine", 0o644)
			p, err := mk(dir)
			if err != nil {
				t.Skip(err)
			}
			id, err := r.Checkpoint(context.Background(), dir)
			if err == nil {
				t.Fatalf("Checkpoint of a tree with a %s returned %q", name, id)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("the error %q does not name %s", err, p)
			}
		})
	}
	// None of them left a manifest.
	entries, err := os.ReadDir(filepath.Join(r.Dir(), checkpointsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("failed checkpoints left %d manifests", len(entries))
	}
	// Nor a name that JSON cannot hold.
	dir := t.TempDir()
	bad := filepath.Join(dir, "caf\xe9")
	if err := os.WriteFile(bad, nil, 0o644); err == nil {
		if _, err := r.Checkpoint(context.Background(), dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("Checkpoint of a tree with a name that is not UTF-8: %v", err)
		}
	}
	// The root must be a directory.
	f := filepath.Join(t.TempDir(), "file")
	writeFile(t, f, "x", 0o644)
	if _, err := r.Checkpoint(context.Background(), f); err == nil || !strings.Contains(err.Error(), f) {
		t.Errorf("Checkpoint of a file: %v", err)
	}
}

func TestRestoreUnknown(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	mustCheckpoint(t, r, t.TempDir())
	for _, id := range []string{"00000042", "", "../journal", "00000001.json"} {
		err := r.Restore(context.Background(), id, t.TempDir())
		if err == nil {
			t.Errorf("Restore(%q) succeeded", id)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) || !strings.Contains(err.Error(), r.ID()) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Restore(%q): %v, want an error wrapping fs.ErrNotExist that names the checkpoint and the run", id, err)
		}
	}
}

func TestRestoreCorruptObject(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), "the content", 0o644)
	id := mustCheckpoint(t, r, src)
	objs, _ := filepath.Glob(filepath.Join(r.Dir(), objectsName, "*"))
	if len(objs) != 1 {
		t.Fatalf("objects: %v", objs)
	}
	if err := os.WriteFile(objs[0], []byte("THE CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := r.Restore(context.Background(), id, dst); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Restore from a damaged object: %v, want ErrCorrupt", err)
	}
	if err := os.Remove(objs[0]); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(context.Background(), id, dst); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Restore from a missing object: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "f")); err == nil {
		t.Error("a failed Restore wrote the file")
	}
}

func TestCheckpointPermissions(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "run.sh"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(src, "pub"), "public", 0o644)
	mustCheckpoint(t, r, src)
	err := filepath.WalkDir(r.Dir(), func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		want := filePerm
		if de.IsDir() {
			want = dirPerm
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{objectsName, checkpointsName} {
		if _, err := os.Stat(filepath.Join(r.Dir(), name)); err != nil {
			t.Error(err)
		}
	}
}

// TestCheckpointDurable counts the fsyncs of checkpoints: every new
// object, objects/ when it got one (also from a checkpoint that failed),
// the manifest and checkpoints/, and the run's directory when the
// checkpoint directories were made.
func TestCheckpointDurable(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a"), "a", 0o644)
	writeFile(t, filepath.Join(src, "b"), "b", 0o644)
	syncs := func(what string, files, dirs int) {
		t.Helper()
		if r.cp.fileSyncs != files || r.cp.dirSyncs != dirs {
			t.Errorf("%s: %d file and %d directory fsyncs, want %d and %d", what, r.cp.fileSyncs, r.cp.dirSyncs, files, dirs)
		}
		r.cp.fileSyncs, r.cp.dirSyncs = 0, 0
	}
	mustCheckpoint(t, r, src)
	syncs("the first checkpoint", 2+1, 1+1+1) // objects + manifest; run dir, objects/, checkpoints/
	mustCheckpoint(t, r, src)
	syncs("a checkpoint with no new object", 1, 1)

	// A checkpoint that fails after storing an object leaves objects/ to
	// be synced by the next one.
	writeFile(t, filepath.Join(src, "c"), "c", 0o644)
	if err := os.Symlink("a", filepath.Join(src, "d")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Checkpoint(context.Background(), src); err == nil {
		t.Fatal("Checkpoint of a tree with a symbolic link succeeded")
	}
	syncs("a failed checkpoint", 1, 0)
	if err := os.Remove(filepath.Join(src, "d")); err != nil {
		t.Fatal(err)
	}
	mustCheckpoint(t, r, src)
	syncs("the checkpoint after it", 1, 2)
}

func TestCheckpointPruned(t *testing.T) {
	for _, st := range []State{Failed, Suspended, Running, Succeeded} {
		t.Run(string(st), func(t *testing.T) {
			r := mustCreate(t, t.TempDir())
			defer r.Close()
			src := t.TempDir()
			writeFile(t, filepath.Join(src, "f"), "x", 0o644)
			id := mustCheckpoint(t, r, src)
			if err := r.SetState(StateRecord{State: st, Error: "e"}); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{objectsName, checkpointsName} {
				_, err := os.Stat(filepath.Join(r.Dir(), name))
				if st == Succeeded && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("after Succeeded, %s: %v, want it removed", name, err)
				}
				if st != Succeeded && err != nil {
					t.Errorf("after %s, %s: %v, want it kept", st, name, err)
				}
			}
			if st != Succeeded {
				mustRestore(t, r, id, t.TempDir())
				return
			}
			// Checkpoints start over, numbered after the pruned ones.
			next := mustCheckpoint(t, r, src)
			if next <= id {
				t.Errorf("a checkpoint after the pruning has id %q, not after %q", next, id)
			}
			dst := t.TempDir()
			mustRestore(t, r, next, dst)
			sameTree(t, "restored after the pruning", treeOf(t, dst), treeOf(t, src))
		})
	}
}

// TestCheckpointTorn: a checkpoint a crash interrupted leaves temporary
// files, which the next Run ignores and removes.
func TestCheckpointTorn(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	src := t.TempDir()
	sampleTree(t, src)
	want1 := treeOf(t, src)
	id1 := mustCheckpoint(t, r, src)
	e := agentEffect(1, `{}`)
	e.Checkpoint = id1
	mustRecord(t, r, e)
	mustClose(t, r)

	// The crash: a half-written object of the next checkpoint's content
	// and a half-written manifest, both under temporary names.
	next := "the next content of c.txt, which the crash cut"
	garbage := map[string]string{
		filepath.Join(r.Dir(), objectsName, tmpPrefix+"123456"):       next[:10],
		filepath.Join(r.Dir(), checkpointsName, tmpPrefix+"987654"):   `{"v":1,"entries":[{"path":"a","dir":tr`,
		filepath.Join(r.Dir(), checkpointsName, tmpPrefix+"00000009"): `{"v":1,"entries":[]}`,
	}
	for p, data := range garbage {
		if err := os.WriteFile(p, []byte(data), filePerm); err != nil {
			t.Fatal(err)
		}
	}

	r = mustOpen(t, dir, r.ID())
	defer r.Close()
	writeFile(t, filepath.Join(src, "a", "b", "c.txt"), next, 0o644)
	want2 := treeOf(t, src)
	id2 := mustCheckpoint(t, r, src)
	if id2 != "00000002" {
		t.Errorf("the checkpoint after the crash is %q, want 00000002", id2)
	}
	for p := range garbage {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the torn checkpoint's %s is left: %v", filepath.Base(p), err)
		}
	}
	for id, want := range map[string]map[string]node{id1: want1, id2: want2} {
		dst := t.TempDir()
		mustRestore(t, r, id, dst)
		sameTree(t, "checkpoint "+id+" after the crash", treeOf(t, dst), want)
	}
}

func TestCheckpointClosed(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	src := t.TempDir()
	id := mustCheckpoint(t, r, src)
	mustClose(t, r)
	if _, err := r.Checkpoint(context.Background(), src); !errors.Is(err, ErrClosed) {
		t.Errorf("Checkpoint after Close: %v, want ErrClosed", err)
	}
	if err := r.Restore(context.Background(), id, src); !errors.Is(err, ErrClosed) {
		t.Errorf("Restore after Close: %v, want ErrClosed", err)
	}
}

func TestCheckpointCanceled(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), "x", 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Checkpoint(ctx, src); !errors.Is(err, context.Canceled) {
		t.Errorf("Checkpoint with a canceled context: %v", err)
	}
	id := mustCheckpoint(t, r, src)
	if err := r.Restore(ctx, id, t.TempDir()); !errors.Is(err, context.Canceled) {
		t.Errorf("Restore with a canceled context: %v", err)
	}
}

// TestCheckpointConcurrent runs checkpoints, restores and records at once
// (for the race detector), and checks the ids are distinct.
func TestCheckpointConcurrent(t *testing.T) {
	r := mustCreate(t, t.TempDir())
	defer r.Close()
	src := t.TempDir()
	sampleTree(t, src)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids []string
	)
	for g := range 4 {
		wg.Go(func() {
			for i := range 5 {
				id, err := r.Checkpoint(context.Background(), src)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				e := agentEffect(g*100+i, `{}`)
				e.Checkpoint = id
				if err := r.Record(e); err != nil {
					t.Error(err)
				}
				r.LastCheckpoint()
				if err := r.Restore(context.Background(), id, t.TempDir()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			if err := r.Record(agentEffect(1000+i, `{}`)); err != nil {
				t.Error(err)
			}
			r.Sync()
		}
	})
	wg.Wait()
	sort.Strings(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Errorf("checkpoint id %q was returned twice", ids[i])
		}
	}
	if len(ids) != 20 {
		t.Errorf("%d checkpoints, want 20", len(ids))
	}
}

// The benchmark tree: 1,000 files of 4 KiB in 10 directories.
func benchTree(b *testing.B, dir string) []string {
	b.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 4<<10)
	var paths []string
	for i := range 1000 {
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%03d", i))
		writeFile(b, p, string(data), 0o644)
		paths = append(paths, p)
	}
	backdate(b, dir)
	return paths
}

// change10 rewrites 10 of the files with new content of the same size.
func change10(b *testing.B, paths []string, n int) {
	b.Helper()
	for k := range 10 {
		p := paths[k*97%len(paths)]
		data := bytes.Repeat([]byte(fmt.Sprintf("%08d:%d ", n, k)), 4<<10)[:4<<10]
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint: checkpoints of a tree of 1,000 files of 4 KiB
// with 10 (or none) changed since the last one, and restores of the tree
// with 10 files that differ.
func BenchmarkCheckpoint(b *testing.B) {
	for _, changed := range []bool{true, false} {
		name := "checkpoint/10-changed"
		if !changed {
			name = "checkpoint/unchanged"
		}
		b.Run(name, func(b *testing.B) {
			r := mustCreate(b, b.TempDir())
			defer r.Close()
			src := b.TempDir()
			paths := benchTree(b, src)
			mustCheckpoint(b, r, src)
			writes := r.cp.objectWrites
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if changed {
					b.StopTimer()
					change10(b, paths, i)
					b.StartTimer()
				}
				mustCheckpoint(b, r, src)
			}
			b.StopTimer()
			b.ReportMetric(float64(r.cp.objectWrites-writes)/float64(b.N), "objects/op")
		})
	}
	b.Run("restore/10-differ", func(b *testing.B) {
		r := mustCreate(b, b.TempDir())
		defer r.Close()
		src := b.TempDir()
		paths := benchTree(b, src)
		id := mustCheckpoint(b, r, src)
		writes := r.cp.restoreWrites
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			change10(b, paths, i)
			b.StartTimer()
			mustRestore(b, r, id, src)
		}
		b.StopTimer()
		b.ReportMetric(float64(r.cp.restoreWrites-writes)/float64(b.N), "files/op")
	})
	b.Run("checkpoint/cold", func(b *testing.B) {
		// The first checkpoint of a Run (a resumed run): every file is
		// read, none stored.
		dir := b.TempDir()
		r := mustCreate(b, dir)
		src := b.TempDir()
		benchTree(b, src)
		mustCheckpoint(b, r, src)
		mustClose(b, r)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			r := mustOpen(b, dir, r.ID())
			b.StartTimer()
			mustCheckpoint(b, r, src)
			b.StopTimer()
			mustClose(b, r)
			b.StartTimer()
		}
	})
}
