package kubernetes_test

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/kubetest"
	"github.com/aml-go/aml/providers/sandbox/kubernetes"
	"github.com/aml-go/aml/providers/sandbox/remote"
)

// TestClusterInputArrivesWhole: input written in pieces, with pauses
// between them, reaches an upload and a command that writes nothing to
// its output until the end, byte for byte. (The container runtime ends
// the input of an exec whose first process replaced itself and said
// nothing: the provider's wrapper stays, and this test holds it to it.)
func TestClusterInputArrivesWhole(t *testing.T) {
	c := kubetest.Open(t)
	ns := c.Namespace(t)
	s := service(t, c, kubernetes.Options{Namespace: ns})
	ctx := context.Background()
	m, err := s.Create(ctx, remote.CreateRequest{Labels: map[string]string{remote.LabelOwner: "aml-1-2-3"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(ctx)
	pieces := func(w io.WriteCloser, n int) {
		data := bytes.Repeat([]byte("0123456789"), n/10)
		for i, part := range [][]byte{data[:n/3], data[n/3 : 2*n/3], data[2*n/3:]} {
			if i > 0 {
				time.Sleep(200 * time.Millisecond) // a pause between pieces is what lost them
			}
			if _, err := w.Write(part); err != nil {
				t.Error(err)
			}
		}
		w.Close()
	}
	run := func(args ...string) string {
		t.Helper()
		p, err := m.Start(ctx, remote.Command{Args: args})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		out, _ := io.ReadAll(p.Stdout())
		if code, err := p.Wait(); err != nil || code != 0 {
			t.Fatalf("%q: %d %v", args, code, err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, n := range []int{30, 30000, 3000000} {
		pr, pw := io.Pipe()
		go pieces(pw, n)
		if err := m.Upload(ctx, "/tmp/up", pr); err != nil {
			t.Fatal(err)
		}
		if got := run("wc", "-c", "/tmp/up"); got != strconv.Itoa(n)+" /tmp/up" {
			t.Errorf("upload of %d bytes in pieces: %q", n, got)
		}
		p, err := m.Start(ctx, remote.Command{Args: []string{"sh", "-c", `cat > /tmp/cmd`}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
		pieces(p.Stdin(), n)
		if code, err := p.Wait(); err != nil || code != 0 {
			t.Fatalf("cat: %d %v", code, err)
		}
		if got := run("wc", "-c", "/tmp/cmd"); got != strconv.Itoa(n)+" /tmp/cmd" {
			t.Errorf("a command's input of %d bytes in pieces: %q", n, got)
		}
	}
}
