package temporaltest

import (
	"net"
	"testing"
)

// TestPortTakenBeforeTheServerBinds: a port that was free when chosen
// and taken before the server bound it (held here by a listener) does
// not fail the start: the server is started again on other ports.
func TestPortTakenBeforeTheServerBinds(t *testing.T) {
	if _, err := Binary(); err != nil {
		t.Skip(err.Error())
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	choosePorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if err == nil && calls == 1 {
			ports[3] = taken.Addr().(*net.TCPAddr).Port // the history service's gRPC port
		}
		return ports, err
	}
	t.Cleanup(func() { choosePorts = freePorts })
	s := Start(t)
	if calls != 2 {
		t.Errorf("ports chosen %d times, want 2 (the taken port, then others)", calls)
	}
	c := s.Dial(t)
	if _, err := c.CheckHealth(t.Context(), nil); err != nil {
		t.Errorf("the server started on other ports does not answer: %v", err)
	}
}
