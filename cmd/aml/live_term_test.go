package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestLiveViewTermDumb: on a terminal whose TERM is "dumb", aml run draws
// no live view and writes no escape sequences; on another terminal the
// view is allowed.
func TestLiveViewTermDumb(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: cannot open a pseudo-terminal on this machine (%v)", err)
	}
	defer ptmx.Close()
	env := func(term string) func(string) string {
		return func(k string) string {
			if k == "TERM" {
				return term
			}
			return ""
		}
	}
	if !wantLiveView(tty, env("xterm-256color")) {
		t.Error("no live view on an xterm")
	}
	if wantLiveView(tty, env("dumb")) {
		t.Error("live view on TERM=dumb")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if wantLiveView(pw, env("xterm")) {
		t.Error("live view on a pipe")
	}

	// The whole command on the terminal, with TERM=dumb: a slow agent that
	// a live view would draw, and no escape sequence reaches the terminal.
	t.Setenv("TERM", "dumb")
	t.Setenv("NO_COLOR", "")
	var received syncBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&received, ptmx)
	}()
	wf := filepath.Join(t.TempDir(), "slow.star")
	src := `
def _slow(req):
    return "done"

def main():
    return agent("work", provider = deterministic_agent(respond = _slow))
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	if code := Main([]string{"run", wf}, nil, &stdout, tty); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	tty.Close()
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out reading the pseudo-terminal")
	}
	if stdout.String() != "done\n" {
		t.Errorf("stdout = %q", stdout.String())
	}
	out := received.String()
	if !strings.Contains(out, "starting run") {
		t.Errorf("no lifecycle line on the terminal: %q", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("escape sequences on a TERM=dumb terminal: %q", out)
	}
}
