package tunnel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/tunnel"
)

// TestTunnel: an HTTP server on a host socket answers clients that
// connect to the socket of the same name in the guest directory, many
// at once, and the guest end stops when the host end goes away.
func TestTunnel(t *testing.T) {
	base, err := os.MkdirTemp("", "tun")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	host, guest := filepath.Join(base, "h"), filepath.Join(base, "g")
	if err := os.Mkdir(host, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(host, "bridge.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%d", r.URL.Path, len(body))
	})}
	go srv.Serve(l)
	defer srv.Close()

	toGuestR, toGuestW := io.Pipe()
	fromGuestR, fromGuestW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guestDone := make(chan error, 1)
	go func() { guestDone <- tunnel.Guest(ctx, guest, toGuestR, fromGuestW) }()
	hostDone := make(chan error, 1)
	go func() { hostDone <- tunnel.Host(ctx, host, 10*time.Millisecond, toGuestW, fromGuestR) }()

	sock := filepath.Join(guest, "bridge.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the guest never listened on bridge.sock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}, DisableKeepAlives: true}}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Repeat("x", i*10000)
			resp, err := client.Post(fmt.Sprintf("http://aml/p%d", i), "text/plain", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("/p%d:%d", i, len(body)); string(got) != want {
				errs <- fmt.Errorf("got %q, want %q", got, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The host end goes away: the guest end returns.
	toGuestW.Close()
	select {
	case err := <-guestDone:
		if err != nil {
			t.Errorf("guest end: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the guest end did not stop when the host went away")
	}
	fromGuestW.Close()
	if err := <-hostDone; err != nil {
		t.Errorf("host end: %v", err)
	}
}
