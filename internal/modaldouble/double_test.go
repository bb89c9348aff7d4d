package modaldouble_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	modal "github.com/modal-labs/modal-client/go"

	"github.com/aml-go/aml/internal/modaldouble"
)

// The double serves the SDK's sandbox calls on both backends: a sandbox
// with tags, an exec with separate streams and its exit code, the
// filesystem API both ways, listing by tag and termination.
func TestSDK(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
	}{{"v2", nil}, {"v1", map[string]string{"MODAL_SANDBOX_V2": "false"}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := modaldouble.New(t)
			client := d.Client(t, nil, c.env)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			app, err := client.Apps.FromName(ctx, "double-test", &modal.AppFromNameParams{CreateIfMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			img := client.Images.FromRegistry("example/image:1", nil)
			sb, err := client.Sandboxes.Create(ctx, app, img, &modal.SandboxCreateParams{Tags: map[string]string{"k": "v"}, Workdir: "/srv/w"})
			if err != nil {
				t.Fatal(err)
			}
			p, err := sb.Exec(ctx, []string{"sh", "-c", `pwd; echo "$V" >&2; exit 3`}, &modal.SandboxExecParams{Env: map[string]string{"V": "err"}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(p.Stdout)
			errOut, _ := io.ReadAll(p.Stderr)
			code, err := p.Wait(ctx, nil)
			if err != nil || code != 3 || string(out) != "/srv/w\n" || string(errOut) != "err\n" {
				t.Fatalf("exec: code %d, err %v, stdout %q, stderr %q", code, err, out, errOut)
			}

			local := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(local, []byte("content"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := sb.Filesystem.CopyFromLocal(ctx, local, "/tmp/a/b/f", nil); err != nil {
				t.Fatal(err)
			}
			back := filepath.Join(t.TempDir(), "back")
			if err := sb.Filesystem.CopyToLocal(ctx, "/tmp/a/b/f", back, nil); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(back); string(b) != "content" {
				t.Fatalf("round trip: %q", b)
			}
			var nf modal.SandboxFilesystemNotFoundError
			if err := sb.Filesystem.CopyToLocal(ctx, "/no/such", back, nil); err == nil || !strings.Contains(err.Error(), "NotFound") {
				t.Fatalf("missing file: %v (%T, want %T)", err, err, nf)
			}

			seq, err := client.Sandboxes.List(ctx, &modal.SandboxListParams{AppID: app.AppID, Tags: map[string]string{"k": "v"}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for s, err := range seq {
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, s.SandboxID)
			}
			if len(ids) != 1 || ids[0] != sb.SandboxID {
				t.Fatalf("listed %v, want [%s]", ids, sb.SandboxID)
			}
			if _, err := sb.Terminate(ctx, &modal.SandboxTerminateParams{Wait: true}); err != nil {
				t.Fatal(err)
			}
			if r := d.Running(); len(r) != 0 {
				t.Fatalf("running after terminate: %v", r)
			}
		})
	}
}
