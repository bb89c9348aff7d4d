package remotetest_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/remotetest"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// TestMachine: a container sandbox runs literal argv in its home, with
// separate output streams and exit codes, takes uploads and gives
// downloads back, is killed, and is gone after Destroy.
func TestMachine(t *testing.T) {
	d := remotetest.New(t, "/home/user")
	ctx := context.Background()
	m, err := d.Create(ctx, remote.CreateRequest{Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(c remote.Command) (string, string, int) {
		t.Helper()
		p, err := m.Start(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		done := make(chan struct{})
		go func() { io.Copy(&errOut, p.Stderr()); close(done) }()
		io.Copy(&out, p.Stdout())
		<-done
		code, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := run(remote.Command{Args: []string{"sh", "-c", `pwd; echo "$X" >&2; exit 3`}, Env: map[string]string{"X": "x y"}}); out != "/home/user\n" || errOut != "x y\n" || code != 3 {
		t.Fatalf("got %q %q %d", out, errOut, code)
	}
	if err := m.Upload(ctx, "f.txt", strings.NewReader("content")); err != nil {
		t.Fatal(err)
	}
	rc, err := m.Download(ctx, "/home/user/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "content" {
		t.Fatalf("downloaded %q", data)
	}
	p, err := m.Start(ctx, remote.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	start := time.Now()
	p.Kill()
	if code, _ := p.Wait(); code != 137 || time.Since(start) > 20*time.Second {
		t.Fatalf("killed: exit %d after %v", code, time.Since(start))
	}
	found, err := d.List(ctx, map[string]string{"k": "v"})
	if err != nil || len(found) != 1 || found[0].ID != m.ID() {
		t.Fatalf("List: %v %v", found, err)
	}
	if err := m.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if left := d.Left(t); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}
