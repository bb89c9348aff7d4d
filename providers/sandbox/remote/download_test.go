package remote_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// downloads is a service whose machines' downloads pass through wrap.
type downloads struct {
	*remotetest.Docker
	wrap func(io.ReadCloser) io.ReadCloser
}

func (s downloads) Create(ctx context.Context, req remote.CreateRequest) (remote.Machine, error) {
	m, err := s.Docker.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	return downloadMachine{m, s.wrap}, nil
}

type downloadMachine struct {
	remote.Machine
	wrap func(io.ReadCloser) io.ReadCloser
}

func (m downloadMachine) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, err := m.Machine.Download(ctx, p)
	if err != nil {
		return nil, err
	}
	return m.wrap(rc), nil
}

// afterBytes calls at once when n bytes have been read, then goes on (or
// fails with what at returns).
type afterBytes struct {
	io.ReadCloser
	n    int64
	read int64
	at   func() error
	done bool
}

func (r *afterBytes) Read(b []byte) (int, error) {
	if !r.done && r.read >= r.n {
		r.done = true
		if err := r.at(); err != nil {
			return 0, err
		}
	}
	if !r.done && int64(len(b)) > r.n-r.read {
		b = b[:r.n-r.read]
	}
	n, err := r.ReadCloser.Read(b)
	r.read += int64(n)
	return n, err
}

// TestReleaseDuringDownload attacks the release while the remote tree
// comes back: the run cancelled in the middle of the download still
// mirrors every change (the release does not stop halfway), and a
// download broken in the middle changes nothing in the source and says
// the sandbox's changes are lost. Either way no sandbox and no host
// staging are left.
func TestReleaseDuringDownload(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	for _, tc := range []struct {
		name   string
		broken bool
	}{{"cancelled", false}, {"broken", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var hit atomic.Bool
			d := remotetest.New(t, "/home/user")
			p, err := remote.New(remote.Options{Service: downloads{d, func(rc io.ReadCloser) io.ReadCloser {
				return &afterBytes{ReadCloser: rc, n: 1 << 20, at: func() error {
					hit.Store(true)
					cancel()
					if tc.broken {
						return errors.New("connection reset by peer")
					}
					return nil
				}}
			}}, GuestRoot: "workspace"})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			write(t, dir, map[string]string{"keep.txt": "keep", "change.txt": "old", "gone.txt": "gone", "sub/x.txt": "x"})
			before := strings.Join(tree(t, dir), " ")
			lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
			if err != nil {
				t.Fatal(err)
			}
			script := `printf new > change.txt && rm gone.txt && head -c 2097152 /dev/zero | tr '\0' x > big.txt && printf y > sub/y.txt`
			if res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", script}, eval.ExecOptions{}); err != nil || res.ExitCode != 0 {
				t.Fatalf("%v %+v", err, res)
			}
			err = lease.Release(ctx)
			if !hit.Load() {
				t.Fatal("the download was never interrupted: the test attacks nothing")
			}
			got := strings.Join(tree(t, dir), " ")
			if tc.broken {
				if err == nil || !strings.Contains(err.Error(), "connection reset by peer") || !strings.Contains(err.Error(), "are lost") {
					t.Errorf("a broken download: Release returned %v, want the cause and the loss named", err)
				}
				if got != before {
					t.Errorf("a broken download changed the source:\n got %s\nwant %s", got, before)
				}
			} else {
				if err != nil {
					t.Errorf("a release whose run was cancelled mid-download: %v", err)
				}
				want := "big.txt=" + big + " change.txt=new keep.txt=keep sub/ sub/x.txt=x sub/y.txt=y"
				if got != want {
					short := func(s string) string { return strings.ReplaceAll(s, big, fmt.Sprintf("<%d x>", len(big))) }
					t.Errorf("the mirror after a cancellation mid-download is not complete:\n got %.400s\nwant %s", short(got), short(want))
				}
			}
			if left := d.Left(t); len(left) > 0 {
				t.Errorf("sandboxes left: %v", left)
			}
			entries, _ := os.ReadDir(tmp)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "aml-") {
					t.Errorf("host staging left: %s", filepath.Join(tmp, e.Name()))
				}
			}
		})
	}
}

// TestMirrorComparesContent: a file the sandbox rewrites with as many
// bytes, keeping its mode and its modification time (as a tool that
// preserves times does, or any write in the second of the hydration),
// comes back: what is unchanged is decided by content, not guessed from
// sizes and times. A mode change alone comes back too.
func TestMirrorComparesContent(t *testing.T) {
	p, _ := newProvider(t, remote.Options{})
	dir := t.TempDir()
	write(t, dir, map[string]string{"same.txt": "old", "mode.sh": "echo", "kept.txt": "kept"})
	ctx := context.Background()
	lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
	if err != nil {
		t.Fatal(err)
	}
	script := `printf new > t && touch -r same.txt t && mv t same.txt && chmod 755 mode.sh`
	if res, err := lease.Runtime().Exec(ctx, "sh", []string{"-c", script}, eval.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tree(t, dir), " "); got != "kept.txt=kept mode.sh=echo same.txt=new" {
		t.Errorf("after the release: %s", got)
	}
	if info, err := os.Stat(filepath.Join(dir, "mode.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("mode.sh after chmod 755 in the sandbox: %v %v", info.Mode(), err)
	}
}
