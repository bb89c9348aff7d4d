//go:build unix

package journal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test when it has not returned after a few
// seconds: reading a FIFO blocks forever, and a regression must fail
// rather than hang the test binary.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5 s: it waits on the journal file instead of refusing it", what)
		panic("unreachable")
	}
}

// hostileLogs replace a run's journal.log with something that is not a
// regular file.
var hostileLogs = []struct {
	name string
	make func(t *testing.T, path string)
	kind string // how the error names it
}{
	{"fifo", func(t *testing.T, path string) {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Skipf("cannot make a FIFO here: %v", err)
		}
	}, "is a named pipe"},
	{"symlink to /dev/zero", func(t *testing.T, path string) {
		if _, err := os.Stat("/dev/zero"); err != nil {
			t.Skipf("no /dev/zero: %v", err)
		}
		if err := os.Symlink("/dev/zero", path); err != nil {
			t.Fatal(err)
		}
	}, "is a symbolic link"},
	{"symlink to a journal", func(t *testing.T, path string) {
		// A real journal elsewhere: a run's journal.log is the run's own
		// file, never a link to another one.
		other := t.TempDir()
		r := mustCreate(t, other)
		mustClose(t, r)
		if err := os.Symlink(logPath(other, r.ID()), path); err != nil {
			t.Fatal(err)
		}
	}, "is a symbolic link"},
	{"directory", func(t *testing.T, path string) {
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
	}, "is a directory"},
}

// hostileRun makes a finished run in dir whose journal.log is then
// replaced by make, and returns its id and the log's path.
func hostileRun(t *testing.T, dir string, make func(*testing.T, string)) (id, path string) {
	t.Helper()
	r := mustCreate(t, dir)
	if err := r.SetState(StateRecord{State: Failed, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r)
	path = logPath(dir, r.ID())
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	make(t, path)
	return r.ID(), path
}

func checkNotRegular(t *testing.T, what string, err error, path, kind string) {
	t.Helper()
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("%s: %v, want an error wrapping ErrNotRegular", what, err)
	}
	for _, want := range []string{path, kind, "not a regular file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: the error %q does not say %q", what, err, want)
		}
	}
}

func TestHostileLogRefused(t *testing.T) {
	for _, h := range hostileLogs {
		t.Run(h.name, func(t *testing.T) {
			dir := t.TempDir()
			id, path := hostileRun(t, dir, h.make)
			// A finished run beside it, which Prune removes.
			fine := mustCreate(t, dir)
			if err := fine.SetState(StateRecord{State: Succeeded}); err != nil {
				t.Fatal(err)
			}
			mustClose(t, fine)

			err := within(t, "Open", func() error {
				r, err := Open(dir, id)
				if err == nil {
					r.Close()
				}
				return err
			})
			checkNotRegular(t, "Open", err, path, h.kind)

			type listed struct {
				sums []Summary
				err  error
			}
			l := within(t, "List", func() listed {
				s, err := List(dir)
				return listed{s, err}
			})
			if l.err != nil {
				t.Fatalf("List fails as a whole for one hostile run: %v", l.err)
			}
			i := slices.IndexFunc(l.sums, func(s Summary) bool { return s.ID == id })
			if i < 0 {
				t.Fatalf("List leaves out the hostile run %s: %+v", id, l.sums)
			}
			checkNotRegular(t, "List's Summary.ReadErr", l.sums[i].ReadErr, path, h.kind)
			if len(l.sums) != 2 {
				t.Errorf("List: %d runs, want 2", len(l.sums))
			}

			err = within(t, "ReadEffects", func() error {
				_, err := ReadEffects(dir, id)
				return err
			})
			checkNotRegular(t, "ReadEffects", err, path, h.kind)

			type pruned struct {
				ids []string
				err error
			}
			p := within(t, "Prune", func() pruned {
				ids, err := Prune(dir)
				return pruned{ids, err}
			})
			if !slices.Equal(p.ids, []string{fine.ID()}) {
				t.Errorf("Prune removed %v, want only the finished run %s", p.ids, fine.ID())
			}
			checkNotRegular(t, "Prune", p.err, path, h.kind)
			if _, err := os.Lstat(filepath.Join(dir, id)); err != nil {
				t.Errorf("Prune removed the hostile run's directory: %v", err)
			}
		})
	}
}
