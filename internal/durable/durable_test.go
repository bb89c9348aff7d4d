package durable_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/aml-go/aml/internal/durable"
)

func TestSyncDir(t *testing.T) {
	if err := durable.SyncDir(t.TempDir()); err != nil {
		t.Fatalf("syncing a directory: %v", err)
	}
	if err := durable.SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing directory: %v, want ErrNotExist", err)
	}
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

// checkFile fails unless path holds want with mode perm.
func checkFile(t *testing.T, path, want string, perm fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s holds %q, want %q", path, b, want)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != perm {
		t.Errorf("%s has mode %v, want %v", path, info.Mode().Perm(), perm)
	}
}

// TestWriteFile: a new file and a replaced one hold the content with the
// mode asked for (exactly, whatever the umask), and no temporary file is
// left.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.golden")
	if err := durable.WriteFile(p, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "new", 0o640)
	if err := durable.WriteFile(p, []byte("newer"), 0o664); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "newer", 0o664)
	if err := durable.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "", 0o600)
	if n := names(t, dir); len(n) != 1 {
		t.Fatalf("left %v", n)
	}
}

// TestWriteTemp: a pattern for the temporary file's name works, and one
// that would put it in another directory is refused.
func TestWriteTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := durable.Write(p, []byte("x"), durable.Options{Perm: 0o600, Umask: true, Temp: ".tmp-*.part"}); err != nil {
		t.Fatal(err)
	}
	checkFile(t, p, "x", 0o600)
	if err := durable.Write(filepath.Join(dir, "g"), []byte("x"), durable.Options{Temp: "a/b*"}); err == nil {
		t.Fatal("a pattern with a separator was accepted")
	}
	if n := names(t, dir); len(n) != 1 {
		t.Fatalf("left %v", n)
	}
}

// TestWriteFails: a write that fails (in a missing directory, one that
// cannot be written, or over a directory) says so naming the path, leaves
// no temporary file behind, and leaves the target as it was.
func TestWriteFails(t *testing.T) {
	dir := t.TempDir()
	if err := durable.WriteFile(filepath.Join(dir, "missing", "b"), []byte("x"), 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a write into a missing directory: %v, want ErrNotExist", err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	err := durable.WriteFile(sub, []byte("x"), 0o644)
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Errorf("a write over a directory: %v, want an error naming %s", err, sub)
	}
	if info, err := os.Stat(sub); err != nil || !info.IsDir() {
		t.Errorf("the directory written over: %v %v", info, err)
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("left %v", n)
	}
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		return // permissions do not stop these writes
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ro, "f")
	if err := durable.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o755)
	err = durable.WriteFile(p, []byte("new"), 0o644)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), p) {
		t.Errorf("a write in a read-only directory: %v, want ErrPermission naming %s", err, p)
	}
	checkFile(t, p, "old", 0o644)
	if n := names(t, ro); len(n) != 1 {
		t.Errorf("left %v", n)
	}
}

// TestWriteExclusive: an exclusive write creates a missing file, and
// fails with ErrExist, changing nothing, when the file exists.
func TestWriteExclusive(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		dir := t.TempDir()
		p := filepath.Join(dir, "lock")
		o := durable.Options{Perm: 0o600, Exclusive: true, LinkFallback: fallback}
		if err := durable.Write(p, []byte("first"), o); err != nil {
			t.Fatal(err)
		}
		checkFile(t, p, "first", 0o600)
		if err := durable.Write(p, []byte("second"), o); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("a second exclusive write: %v, want ErrExist", err)
		}
		checkFile(t, p, "first", 0o600)
		if n := names(t, dir); len(n) != 1 {
			t.Fatalf("left %v", n)
		}
	}
}

// TestWriteConcurrent: a reader never sees a partial file while writers
// replace it, and of concurrent exclusive writers exactly one wins.
func TestWriteConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	a, b := bytes.Repeat([]byte("a"), 1<<16), bytes.Repeat([]byte("b"), 1<<16)
	if err := durable.WriteFile(p, a, 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			data := a
			if i%2 == 1 {
				data = b
			}
			if err := durable.WriteFile(p, data, 0o644); err != nil {
				t.Error(err)
				break
			}
		}
		close(stop)
	}()
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("a reader saw %d bytes, not one whole write", len(got))
		}
	}
	wg.Wait()

	q := filepath.Join(dir, "once")
	var mu sync.Mutex
	won := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := durable.Write(q, []byte("x"), durable.Options{Perm: 0o644, Exclusive: true})
			switch {
			case err == nil:
				mu.Lock()
				won++
				mu.Unlock()
			case !errors.Is(err, fs.ErrExist):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d exclusive writers won, want 1", won)
	}
	if n := names(t, dir); len(n) != 2 {
		t.Fatalf("left %v", n)
	}
}
