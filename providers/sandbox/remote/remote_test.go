package remote_test

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// newProvider returns a provider over container sandboxes whose home is
// /home/user and guest root the relative "workspace", as Daytona's.
// request, write and tree are remotetest's, for this package's cases.
var (
	request = remotetest.Request
	write   = remotetest.Write
	tree    = remotetest.Listing
)

// TestCore: the core's cases (remotetest.Run) over container sandboxes
// whose home is /home/user and guest root the relative "workspace", as
// Daytona's.
func TestCore(t *testing.T) {
	d := remotetest.New(t, "/home/user")
	remotetest.Run(t, remotetest.Harness{Service: d, GuestRoot: "workspace", Home: "/home/user", Left: d.Left})
}

func newProvider(t *testing.T, opts remote.Options) (*remote.Provider, *remotetest.Docker) {
	t.Helper()
	d := remotetest.New(t, "/home/user")
	opts.Service = d
	if opts.GuestRoot == "" {
		opts.GuestRoot = "workspace"
	}
	p, err := remote.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := d.Left(t); len(left) > 0 {
			t.Errorf("sandboxes left behind: %v", left)
		}
	})
	return p, d
}

// TestHydrationClearsTheRoot: a guest root that already holds files,
// hidden ones too, holds exactly the workspace after hydration, and the
// root may be a mount point (it is cleared, not removed): here the
// home's volume itself.
func TestHydrationClearsTheRoot(t *testing.T) {
	stale := filepath.Join(t.TempDir(), "stale")
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"workspace", "/home/user"} {
		t.Run(strings.Trim(root, "/"), func(t *testing.T) {
			d := remotetest.New(t, "/home/user")
			d.Files = map[string]string{}
			guest := root
			if !path.IsAbs(guest) {
				guest = path.Join("/home/user", root)
			}
			for _, name := range []string{"stale", ".stale", "..stale", "sub/stale"} {
				d.Files[path.Join(guest, name)] = stale
			}
			p, err := remote.New(remote.Options{Service: d, GuestRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			write(t, dir, map[string]string{"a.txt": "a", ".hidden": "h"})
			ctx := context.Background()
			lease, err := p.Acquire(ctx, request(dir, eval.ReadWrite))
			if err != nil {
				t.Fatal(err)
			}
			res, err := lease.Runtime().Exec(ctx, "ls", []string{"-A"}, eval.ExecOptions{})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("ls: %v %+v", err, res)
			}
			if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != ".hidden a.txt" {
				t.Errorf("the guest root after hydration holds %q, want the workspace alone", got)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(tree(t, dir), " "); got != ".hidden=h a.txt=a" {
				t.Errorf("after release: %s", got)
			}
		})
	}
}
