package remote_test

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// BenchmarkArchive: the host's share of hydration, the tar stream of a
// 1,000-file, 20 MB tree.
func BenchmarkArchive(b *testing.B) {
	dir := remotetest.Tree(b, 1000, 20<<10)
	for b.Loop() {
		if err := remote.WriteTree(io.Discard, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReconcileUnchanged: the host's share of a release, the
// remote tree's archive (1,000 files, 20 MB, nothing changed) extracted
// against the source and mirrored into it.
func BenchmarkReconcileUnchanged(b *testing.B) {
	dir := remotetest.Tree(b, 1000, 20<<10)
	var archive bytes.Buffer
	if err := remote.WriteTree(&archive, dir); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tmp := b.TempDir()
		got, err := remote.Extract(bytes.NewReader(archive.Bytes()), tmp, dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := remote.Mirror(tmp, dir, got); err != nil {
			b.Fatal(err)
		}
	}
}

// entry is one member of a crafted archive.
type entry struct {
	name, link string
	kind       byte
	body       string
}

func craft(t *testing.T, entries ...entry) *bytes.Reader {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.kind, Mode: 0o644, Size: int64(len(e.body))}
		if e.kind == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b.Bytes())
}

// TestHostileArchive: the release's archive comes from the sandbox,
// which may craft it. No entry writes outside the private extraction
// directory, whether it names a path outside, or goes through a link the
// archive made (also one that replaced a directory made before it), or
// hard-links a host file; a member given twice keeps its last content.
func TestHostileArchive(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // the source the mirror compares against
	for name, c := range map[string]struct {
		entries []entry
		want    string // in the error; "" when the archive is accepted
	}{
		"parent":              {[]entry{{name: "../escape", kind: tar.TypeReg, body: "x"}}, "leaves the tree"},
		"absolute":            {[]entry{{name: outside + "/escape", kind: tar.TypeReg, body: "x"}}, "leaves the tree"},
		"through a link":      {[]entry{{name: "a", link: outside, kind: tar.TypeSymlink}, {name: "a/escape", kind: tar.TypeReg, body: "x"}}, "escapes"},
		"link over a dir":     {[]entry{{name: "a/", kind: tar.TypeDir}, {name: "a/b", kind: tar.TypeReg, body: "1"}, {name: "a", link: outside, kind: tar.TypeSymlink}, {name: "a/escape", kind: tar.TypeReg, body: "x"}}, "escapes"},
		"relative link":       {[]entry{{name: "d/", kind: tar.TypeDir}, {name: "d/up", link: "../../../../../../../../" + outside, kind: tar.TypeSymlink}, {name: "d/up/escape", kind: tar.TypeReg, body: "x"}}, "escapes"},
		"hard link out":       {[]entry{{name: "h", link: secret, kind: tar.TypeLink}}, "not a file of the archive"},
		"hard link up":        {[]entry{{name: "h", link: "../secret", kind: tar.TypeLink}}, "not a file of the archive"},
		"hard link to a link": {[]entry{{name: "s", link: secret, kind: tar.TypeSymlink}, {name: "h", link: "s", kind: tar.TypeLink}}, "not a file of the archive"},
		"twice":               {[]entry{{name: "f", kind: tar.TypeReg, body: "first"}, {name: "f", kind: tar.TypeReg, body: "second"}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			got, err := remote.Extract(craft(t, c.entries...), tmp, dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if left, _ := os.ReadDir(outside); len(left) != 1 {
				t.Fatalf("written outside: %v", left)
			}
			if b, _ := os.ReadFile(secret); string(b) != "host" {
				t.Fatalf("the host file holds %q", b)
			}
			if name == "twice" {
				if b, _ := os.ReadFile(filepath.Join(tmp, "f")); string(b) != "second" || got["f"] != 0 {
					t.Fatalf("f holds %q", b)
				}
			}
		})
	}
}

// reconcileFrom mirrors the tree guest (archived by the host's tar, as
// the sandbox's would) into src, as a release does.
func reconcileFrom(t *testing.T, guest, src string) {
	t.Helper()
	out, err := exec.Command("tar", "-cf", "-", "-C", guest, ".").Output()
	if err != nil {
		t.Fatalf("tar: %v", err)
	}
	tmp := t.TempDir()
	got, err := remote.Extract(bytes.NewReader(out), tmp, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Mirror(tmp, src, got); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorLinkBecomesDirectory: the source has a link a -> b; the
// sandbox replaced it with a directory holding a copy of b/f. The copy is
// not taken for the source's b/f, seen through the link that the mirror
// is about to replace: a/f arrives.
func TestMirrorLinkBecomesDirectory(t *testing.T) {
	src, guest := t.TempDir(), t.TempDir()
	for _, d := range []string{src, guest} {
		if err := os.MkdirAll(filepath.Join(d, "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "b", "f"), []byte("payload"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("b", filepath.Join(src, "a")); err != nil {
		t.Fatal(err)
	}
	// In the sandbox, a is a directory (a nested one too).
	if err := os.MkdirAll(filepath.Join(guest, "a", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a/f", "a/c/f"} {
		if err := os.WriteFile(filepath.Join(guest, f), []byte("payload"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reconcileFrom(t, guest, src)
	if info, err := os.Lstat(filepath.Join(src, "a")); err != nil || !info.IsDir() {
		t.Fatalf("a is %v, %v; want a directory", info, err)
	}
	for _, f := range []string{"a/f", "a/c/f", "b/f"} {
		if b, err := os.ReadFile(filepath.Join(src, f)); err != nil || string(b) != "payload" {
			t.Errorf("%s: %q, %v", f, b, err)
		}
	}
}

// TestMirrorKeepsWhatNoTransferCarries: the sandbox deleted a directory
// of the source that holds a FIFO; the files around it go, the FIFO (and
// so its directory) stays.
func TestMirrorKeepsWhatNoTransferCarries(t *testing.T) {
	src, guest := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"d/x", "d/e/y", "keep"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(src, "d", "e", "fifo"), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(src, "gone", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guest, "keep"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	reconcileFrom(t, guest, src)
	var left []string
	_ = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if p != src {
			rel, _ := filepath.Rel(src, p)
			left = append(left, rel)
		}
		return err
	})
	if want := "d d/e d/e/fifo keep"; strings.Join(left, " ") != want {
		t.Errorf("left %q, want %q", strings.Join(left, " "), want)
	}
}
