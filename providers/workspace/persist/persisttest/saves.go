package persisttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
)

// RunProvider's checks of what a save stores and a restore gives back:
// formats, revisions, retention, selection, rejected entries, limits and
// the reuse of unchanged files; and RunNames.

// testRoundTrip saves SampleTree in format and restores it as it was,
// modification times included; the index then names the one revision.
func testRoundTrip(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	want := SampleTree()
	stamp := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	l := e.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), want)
	if err := os.Chtimes(filepath.Join(l.Directory(), "src", "a", "b", "deep.txt"), stamp, stamp); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(ctx, saveReq(1)); err != nil {
		t.Fatal(err)
	}
	rev := l.RevisionID()
	e.Release(l)
	l = e.Acquire("ws", false, Current)
	if got := ReadTree(t, l.Directory()); DiffTrees(want, got) != "" {
		t.Fatalf("restored tree differs:\n%s", DiffTrees(want, got))
	}
	if info, err := os.Stat(filepath.Join(l.Directory(), "src", "a", "b", "deep.txt")); err != nil || !info.ModTime().Equal(stamp) {
		t.Fatalf("modification time not restored: %v, %v", info.ModTime(), err)
	}
	e.Release(l)
	x := e.StoredIndex("ws")
	if x == nil || x.Current != rev || len(x.Revisions) != 1 || x.Revisions[0].Format != format {
		t.Fatalf("index %+v, want current %s in format %s", x, rev, format)
	}
	e.AssertTempEmpty()
}

// testMixedFormats checks that providers of either format restore each
// other's revisions.
func testMixedFormats(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()
	st := newStorage(t)
	archive := NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatArchive}})
	folder := NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatFolder}})
	v1 := Tree{"a.txt": {Data: "one", Mode: 0o644}}
	archive.SaveTree("ws", v1, 5)
	l := folder.Acquire("ws", true, Current)
	if d := DiffTrees(v1, ReadTree(t, l.Directory())); d != "" {
		t.Fatalf("folder provider restoring an archive revision:\n%s", d)
	}
	WriteTree(t, l.Directory(), Tree{"b.txt": {Data: "two", Mode: 0o600}})
	if err := l.Save(ctx, saveReq(5)); err != nil {
		t.Fatal(err)
	}
	folder.Release(l)
	x := archive.StoredIndex("ws")
	if len(x.Revisions) != 2 || x.Revisions[0].Format != persist.FormatFolder || x.Revisions[1].Format != persist.FormatArchive {
		t.Fatalf("revisions %+v", x.Revisions)
	}
	want := Tree{"a.txt": {Data: "one", Mode: 0o644}, "b.txt": {Data: "two", Mode: 0o600}}
	if d := DiffTrees(want, archive.Load("ws", Current)); d != "" {
		t.Fatalf("archive provider restoring a folder revision:\n%s", d)
	}
	if d := DiffTrees(v1, archive.Load("ws", &eval.WorkspaceLoad{Revision: x.Revisions[1].ID})); d != "" {
		t.Fatalf("older archive revision:\n%s", d)
	}
}

// testRevisions checks that every saved revision is restored by its id,
// that "" loads the current one, and how a missing revision fails.
func testRevisions(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	var ids []string
	var trees []Tree
	for i := range 3 {
		tr := Tree{"v.txt": {Data: fmt.Sprint("version ", i), Mode: 0o644}, fmt.Sprint("only", i): {Data: "x", Mode: 0o644}}
		l := e.Acquire("ws", true, nil) // load=nil: empty, yet saves chain on the index
		if got := ReadTree(t, l.Directory()); len(got) != 0 {
			t.Fatalf("load=nil materialized %d entries", len(got))
		}
		WriteTree(t, l.Directory(), tr)
		if err := l.Save(ctx, saveReq(3)); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		ids = append(ids, l.RevisionID())
		trees = append(trees, tr)
		e.Release(l)
	}
	for i, id := range ids {
		if d := DiffTrees(trees[i], e.Load("ws", &eval.WorkspaceLoad{Revision: id})); d != "" {
			t.Fatalf("revision %d:\n%s", i, d)
		}
	}
	if d := DiffTrees(trees[2], e.Load("ws", &eval.WorkspaceLoad{})); d != "" {
		t.Fatalf("Revision \"\" is current:\n%s", d)
	}
	_, err := e.TryAcquire("ws", true, &eval.WorkspaceLoad{Revision: "no-such-revision"})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing named revision: %v", err)
	}
	mustConflictFree(t, err)
	if _, err := e.TryAcquire("fresh", true, &eval.WorkspaceLoad{Revision: ids[0]}); err == nil {
		t.Fatal("a named revision of a workspace without index was accepted")
	}
	if got := e.Load("fresh", Current); len(got) != 0 {
		t.Fatalf("current of a fresh workspace has %d entries", len(got))
	}
	e.AssertTempEmpty()
}

// testRetention checks that saves keep the newest revisions their
// retention allows and leave no objects of the pruned ones.
func testRetention(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	l := e.Acquire("ws", true, nil)
	var ids []string
	for i := range 4 {
		WriteTree(t, l.Directory(), Tree{"f": {Data: fmt.Sprint(i), Mode: 0o644}})
		if err := l.Save(ctx, saveReq(2)); err != nil { // chained saves on one lease
			t.Fatalf("save %d: %v", i, err)
		}
		ids = append(ids, l.RevisionID())
	}
	e.Release(l)
	x := e.StoredIndex("ws")
	if len(x.Revisions) != 2 || x.Revisions[0].ID != ids[3] || x.Revisions[1].ID != ids[2] || x.Current != ids[3] {
		t.Fatalf("index %+v, want newest-first %v", x, ids[2:])
	}
	if o := e.Orphans("ws"); len(o) != 0 {
		t.Fatalf("pruned revisions left objects: %q", o)
	}
	if _, err := e.TryAcquire("ws", true, &eval.WorkspaceLoad{Revision: ids[0]}); err == nil {
		t.Fatal("a pruned revision was restored")
	}
	// Retention 1 keeps only the new revision.
	e.SaveTree("ws", Tree{"g": {Data: "g", Mode: 0o644}}, 1)
	if x := e.StoredIndex("ws"); len(x.Revisions) != 1 {
		t.Fatalf("retention 1 kept %d revisions", len(x.Revisions))
	}
	if o := e.Orphans("ws"); len(o) != 0 {
		t.Fatalf("orphans %q", o)
	}
}

// testSelection checks the include and exclude patterns of a save and of
// a load, and that malformed patterns are refused.
func testSelection(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	full := Tree{
		"README.md":          {Data: "r", Mode: 0o644},
		"src":                {Dir: true, Mode: 0o755},
		"src/a.go":           {Data: "a", Mode: 0o644},
		"src/a_test.go":      {Data: "t", Mode: 0o644},
		"src/sub":            {Dir: true, Mode: 0o755},
		"src/sub/b.go":       {Data: "b", Mode: 0o644},
		"src/sub/gen":        {Dir: true, Mode: 0o755},
		"src/sub/gen/c.go":   {Data: "c", Mode: 0o644},
		"docs":               {Dir: true, Mode: 0o755},
		"docs/x.md":          {Data: "x", Mode: 0o644},
		"build":              {Dir: true, Mode: 0o755},
		"build/out.bin":      {Data: "bin", Mode: 0o755},
		"build/nested":       {Dir: true, Mode: 0o755},
		"build/nested/o.bin": {Data: "o", Mode: 0o644},
	}
	l := e.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), full)
	// Excludes win; a directory match covers its subtree.
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Include: []string{"src", "README.md", "build/**"}, Exclude: []string{"**/*_test.go", "src/sub/gen", "build/nested"}}}); err != nil {
		t.Fatal(err)
	}
	e.Release(l)
	want := Tree{
		"README.md":     full["README.md"],
		"src":           full["src"],
		"src/a.go":      full["src/a.go"],
		"src/sub":       full["src/sub"],
		"src/sub/b.go":  full["src/sub/b.go"],
		"build":         full["build"],
		"build/out.bin": full["build/out.bin"],
	}
	if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
		t.Fatalf("save selection:\n%s", d)
	}
	// Include patterns that match only files keep their parents.
	l = e.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), full)
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Include: []string{"**/*.go"}, Exclude: []string{}}}); err != nil {
		t.Fatal(err)
	}
	e.Release(l)
	want = Tree{
		"src":              full["src"],
		"src/a.go":         full["src/a.go"],
		"src/a_test.go":    full["src/a_test.go"],
		"src/sub":          full["src/sub"],
		"src/sub/b.go":     full["src/sub/b.go"],
		"src/sub/gen":      full["src/sub/gen"],
		"src/sub/gen/c.go": full["src/sub/gen/c.go"],
	}
	if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
		t.Fatalf("file-only include:\n%s", d)
	}
	// Restore selection.
	e.SaveTree("ws", full, 5)
	got := e.Load("ws", &eval.WorkspaceLoad{Revision: "current", Include: []string{"src/**", "docs"}, Exclude: []string{"src/sub"}})
	want = Tree{
		"src":           full["src"],
		"src/a.go":      full["src/a.go"],
		"src/a_test.go": full["src/a_test.go"],
		"docs":          full["docs"],
		"docs/x.md":     full["docs/x.md"],
	}
	if d := DiffTrees(want, got); d != "" {
		t.Fatalf("restore selection:\n%s", d)
	}
	got = e.Load("ws", &eval.WorkspaceLoad{Revision: "current", Exclude: []string{"build", "src/**/*.go"}})
	want = Tree{
		"README.md":   full["README.md"],
		"src":         full["src"],
		"src/sub":     full["src/sub"],
		"src/sub/gen": full["src/sub/gen"],
		"docs":        full["docs"],
		"docs/x.md":   full["docs/x.md"],
	}
	if d := DiffTrees(want, got); d != "" {
		t.Fatalf("restore exclude:\n%s", d)
	}
	for _, bad := range []string{"/abs", "!neg", "../up", "a\\b", "", "a//b", "./a", "[unclosed"} {
		if _, err := e.TryAcquire("ws", true, &eval.WorkspaceLoad{Include: []string{bad}}); err == nil {
			t.Errorf("load include %q accepted", bad)
		}
		l := e.Acquire("ws", true, nil)
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Exclude: []string{bad}}}); err == nil {
			t.Errorf("save exclude %q accepted", bad)
		}
		e.Release(l)
	}
	e.AssertTempEmpty()
}

// testGitignore checks that a save with Gitignore applies the tree's
// .gitignore files, unless it has an include list.
func testGitignore(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	full := Tree{
		".gitignore":       {Data: "# comment\n*.log\n!keep.log\nbuild/\n/rooted.txt\n", Mode: 0o644},
		"a.log":            {Data: "a", Mode: 0o644},
		"keep.log":         {Data: "k", Mode: 0o644},
		"build":            {Dir: true, Mode: 0o755},
		"build/out":        {Data: "o", Mode: 0o644},
		"rooted.txt":       {Data: "r", Mode: 0o644},
		"sub":              {Dir: true, Mode: 0o755},
		"sub/rooted.txt":   {Data: "r", Mode: 0o644},
		"sub/.gitignore":   {Data: "secret.txt\r\n", Mode: 0o644},
		"sub/secret.txt":   {Data: "s", Mode: 0o644},
		"sub/ok.txt":       {Data: "ok", Mode: 0o644},
		"sub/deep":         {Dir: true, Mode: 0o755},
		"sub/deep/x.log":   {Data: "x", Mode: 0o644},
		"other":            {Dir: true, Mode: 0o755},
		"other/secret.txt": {Data: "s", Mode: 0o644},
	}
	l := e.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), full)
	// An ignored symlink does not fail the save.
	if err := os.Symlink("keep.log", filepath.Join(l.Directory(), "build", "link")); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Gitignore: true}}); err != nil {
		t.Fatal(err)
	}
	want := Tree{}
	for _, p := range []string{".gitignore", "keep.log", "sub", "sub/rooted.txt", "sub/.gitignore", "sub/ok.txt", "sub/deep", "other", "other/secret.txt"} {
		want[p] = full[p]
	}
	if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
		t.Fatalf(".gitignore at save:\n%s", d)
	}
	// With an include list, .gitignore files are not applied.
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 5, Gitignore: true, Include: []string{"*.log"}}}); err != nil {
		t.Fatal(err)
	}
	e.Release(l)
	want = Tree{"a.log": full["a.log"], "keep.log": full["keep.log"]}
	if d := DiffTrees(want, e.Load("ws", Current)); d != "" {
		t.Fatalf(".gitignore with include:\n%s", d)
	}
}

// testRejected checks that a save refuses symbolic links and special
// files unless they are excluded, and that a refused save leaves nothing.
func testRejected(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	prev := e.SaveTree("ws", Tree{"ok": {Data: "ok", Mode: 0o644}}, 3)
	cases := []struct {
		name, want string
		make       func(dir string) error
	}{
		{"symlink", "symbolic link", func(dir string) error { return os.Symlink("ok", filepath.Join(dir, "link")) }},
		{"dir-symlink", "symbolic link", func(dir string) error { return os.Symlink("/", filepath.Join(dir, "root")) }},
		{"fifo", "not a regular file", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644) }},
	}
	for _, c := range cases {
		l := e.Acquire("ws", true, Current)
		if err := c.make(l.Directory()); err != nil {
			t.Fatal(err)
		}
		err := l.Save(ctx, saveReq(3))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Save error %v, want %q", c.name, err, c.want)
		}
		// Excluding the entry makes the save succeed.
		name := map[string]string{"symlink": "link", "dir-symlink": "root", "fifo": "pipe"}[c.name]
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 3, Exclude: []string{name}}}); err != nil {
			t.Errorf("%s: excluded save: %v", c.name, err)
		}
		e.Release(l)
	}
	if x := e.StoredIndex("ws"); x.Current == prev || len(x.Revisions) != 3 {
		t.Fatalf("index %+v after %d excluded saves", x, len(cases))
	}
	if o := e.Orphans("ws"); len(o) != 0 {
		t.Fatalf("rejected saves left objects: %q", o)
	}
}

// testLimits checks that MaxEntries and MaxExtractedBytes bound saves
// and restores.
func testLimits(t *testing.T, newStorage NewStorageFunc, format string) {
	ctx := context.Background()
	st := newStorage(t)
	small := NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{Format: format, MaxEntries: 4, MaxExtractedBytes: 100}})
	big := NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
	l := small.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), Tree{"a": {Data: "1", Mode: 0o644}, "b": {Data: "2", Mode: 0o644}, "c": {Data: "3", Mode: 0o644}, "d": {Data: "4", Mode: 0o644}, "e": {Data: "5", Mode: 0o644}})
	if err := l.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrLimitExceeded) {
		t.Fatalf("too many entries: %v", err)
	}
	ClearDir(t, l.Directory())
	WriteTree(t, l.Directory(), Tree{"a": {Data: strings.Repeat("x", 101), Mode: 0o644}})
	if err := l.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrLimitExceeded) {
		t.Fatalf("too many bytes: %v", err)
	}
	small.Release(l)
	if x := small.StoredIndex("ws"); x != nil {
		t.Fatalf("a rejected save published %+v", x)
	}
	// Restores are bounded too.
	big.SaveTree("ws", Tree{"a": {Data: strings.Repeat("x", 101), Mode: 0o644}}, 1)
	if _, err := small.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrLimitExceeded) {
		t.Fatalf("restore above byte limit: %v", err)
	}
	big.SaveTree("ws", Tree{"a": {Data: "1", Mode: 0o644}, "b": {Data: "2", Mode: 0o644}, "c": {Data: "3", Mode: 0o644}, "d": {Data: "4", Mode: 0o644}, "e": {Data: "5", Mode: 0o644}}, 1)
	if _, err := small.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrLimitExceeded) {
		t.Fatalf("restore above entry limit: %v", err)
	}
	small.AssertTempEmpty()
}

// testArchiveBytesLimit checks that MaxArchiveBytes bounds saves and
// restores of an archive.
func testArchiveBytesLimit(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()
	st := newStorage(t)
	small := NewEnv(t, st, persist.Options{StoreOptions: persist.StoreOptions{MaxArchiveBytes: 200}})
	big := NewEnv(t, st, persist.Options{})
	noise := make([]byte, 4096)
	for i := range noise {
		noise[i] = byte(i*7919 + i/3)
	}
	l := small.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), Tree{"noise": {Data: string(noise), Mode: 0o644}})
	if err := l.Save(ctx, saveReq(1)); !errors.Is(err, persist.ErrLimitExceeded) {
		t.Fatalf("archive above limit: %v", err)
	}
	small.Release(l)
	big.SaveTree("ws", Tree{"noise": {Data: string(noise), Mode: 0o644}}, 1)
	if _, err := small.TryAcquire("ws", true, Current); !errors.Is(err, persist.ErrLimitExceeded) {
		t.Fatalf("restoring an archive above limit: %v", err)
	}
}

// testFolderReuse checks that folder revisions reuse the unchanged files
// of the current revision instead of writing them again.
func testFolderReuse(t *testing.T, newStorage NewStorageFunc) {
	ctx := context.Background()
	counting := NewCountingStorage(newStorage(t))
	e := NewEnv(t, counting, persist.Options{StoreOptions: persist.StoreOptions{Format: persist.FormatFolder}})
	tr := Tree{}
	var size int64
	for i := range 20 {
		data := strings.Repeat(fmt.Sprint(i, " "), 2000)
		tr[fmt.Sprintf("d%d/f%d", i%3, i)] = File{Data: data, Mode: 0o644}
		tr[fmt.Sprintf("d%d", i%3)] = File{Dir: true, Mode: 0o755}
		size += int64(len(data))
	}
	tr["dup-a"] = File{Data: "same content", Mode: 0o644}
	tr["dup-b"] = File{Data: "same content", Mode: 0o600}
	l := e.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), tr)
	if err := l.Save(ctx, saveReq(2)); err != nil {
		t.Fatal(err)
	}
	if counting.BytesWritten() < size {
		t.Fatalf("first save wrote %d bytes, want at least %d", counting.BytesWritten(), size)
	}
	// The same lease saves the unchanged tree again.
	counting.Reset()
	if err := l.Save(ctx, saveReq(2)); err != nil {
		t.Fatal(err)
	}
	e.Release(l)
	checkReuse(t, counting, size)
	// A fresh lease that restored the revision reuses it too.
	counting.Reset()
	l = e.Acquire("ws", true, Current)
	if err := l.Save(ctx, saveReq(2)); err != nil {
		t.Fatal(err)
	}
	e.Release(l)
	checkReuse(t, counting, size)
	// A lease that loaded nothing reuses the current revision.
	counting.Reset()
	l = e.Acquire("ws", true, nil)
	WriteTree(t, l.Directory(), tr)
	if err := l.Save(ctx, saveReq(2)); err != nil {
		t.Fatal(err)
	}
	e.Release(l)
	checkReuse(t, counting, size)
	if d := DiffTrees(tr, e.Load("ws", Current)); d != "" {
		t.Fatal(d)
	}
	if o := e.Orphans("ws"); len(o) != 0 {
		t.Fatalf("orphans %q", o)
	}
}

func checkReuse(t *testing.T, c *CountingStorage, size int64) {
	t.Helper()
	if c.Copies() < 20 {
		t.Errorf("unchanged save made %d copies, want at least 20", c.Copies())
	}
	if c.BytesWritten() >= size/4 {
		t.Errorf("unchanged save wrote %d bytes of a %d-byte tree (no reuse)", c.BytesWritten(), size)
	}
	if c.Writes() != 3 { // pending marker, manifest and index
		t.Errorf("unchanged save made %d writes, want 3 (pending marker, manifest, index)", c.Writes())
	}
}

// RunNames saves and restores, in both formats, names that are legal on
// Linux though not portable: a colon, a backslash, bytes that are not
// UTF-8 in a file's and a directory's name.
func RunNames(t *testing.T, newStorage NewStorageFunc) {
	if runtime.GOOS == "windows" {
		t.Skip("these names are not legal on Windows")
	}
	for _, format := range Formats {
		t.Run("Names/"+format, func(t *testing.T) {
			e := NewEnv(t, newStorage(t), persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
			tree := Tree{
				"a:b.txt":               {Data: "colon", Mode: 0o644},
				"back\\slash.txt":       {Data: "backslash", Mode: 0o644},
				"a\\..\\..\\x":          {Data: "not a way up", Mode: 0o644},
				"bad\xffname.txt":       {Data: "not UTF-8", Mode: 0o600},
				"dir\xfe":               {Dir: true, Mode: 0o755},
				"dir\xfe/inner\xfd.txt": {Data: "inside", Mode: 0o644},
				"é.txt":                 {Data: "UTF-8", Mode: 0o644},
				"line\nbreak\x01.txt":   {Data: "control characters", Mode: 0o644},
			}
			long := ""
			for i := 0; i < 4; i++ {
				long += strings.Repeat(string(rune('p'+i)), 200)
				tree[long] = File{Dir: true, Mode: 0o755}
				long += "/"
			}
			tree[long+"deep.txt"] = File{Data: "a path longer than an object key", Mode: 0o644}
			e.SaveTree("ws", tree, 1)
			if d := DiffTrees(tree, e.Load("ws", Current)); d != "" {
				t.Fatalf("the names did not survive a save and a load:\n%s", d)
			}
			res, err := persist.Check(context.Background(), e.Storage, []string{"ws"}, persist.CheckOptions{ReadData: true})
			if err != nil || len(res) != 1 || !res[0].OK() {
				t.Fatalf("Check: %+v, %v", res, err)
			}
		})
	}
}
