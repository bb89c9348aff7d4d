package cli

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/aml-go/aml/internal/liveview"
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
	if !liveview.Want(tty, env("xterm-256color")) {
		t.Error("no live view on an xterm")
	}
	if liveview.Want(tty, env("dumb")) {
		t.Error("live view on TERM=dumb")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if liveview.Want(pw, env("xterm")) {
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

// TestLiveViewNoColor runs aml run on a pseudo-terminal with
// TERM=xterm-256color: the live view draws the run's tree (a script
// that runs long enough for a few frames), with coloured status marks
// unless NO_COLOR is set to a non-empty value, in which case nothing on
// the terminal carries an SGR sequence, only the redraw's cursor
// movement.
func TestLiveViewNoColor(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("skipping: no sh on this machine (%v)", err)
	}
	dir := t.TempDir()
	wf := filepath.Join(dir, "slow.star")
	// The script runs until the test has seen the live view draw it.
	src := `
def main():
    return script("while [ ! -f drawn ]; do sleep 0.02; done; rm drawn; echo done", shell = "sh")
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, noColor := range []string{"1", ""} {
		t.Run("NO_COLOR="+noColor, func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("skipping: cannot open a pseudo-terminal on this machine (%v)", err)
			}
			defer ptmx.Close()
			if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
				t.Fatalf("Setsize: %v", err)
			}
			t.Setenv("TERM", "xterm-256color")
			t.Setenv("NO_COLOR", noColor)
			t.Setenv("COLORTERM", "")
			t.Setenv("CLICOLOR_FORCE", "")
			var received syncBuffer
			read := make(chan struct{})
			go func() {
				defer close(read)
				_, _ = io.Copy(&received, ptmx)
			}()
			// Once the script's line is on the terminal, let it end.
			go func() {
				deadline := time.Now().Add(30 * time.Second)
				for !strings.Contains(sgrRE.ReplaceAllString(received.String(), ""), "script  host") && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				os.WriteFile(filepath.Join(dir, "drawn"), nil, 0o644)
			}()
			var stdout strings.Builder
			code := Main([]string{"run", wf}, nil, &stdout, tty)
			tty.Close()
			select {
			case <-read:
			case <-time.After(30 * time.Second):
				t.Fatal("timed out reading the pseudo-terminal")
			}
			if code != exitOK || stdout.String() != "done\n" {
				t.Fatalf("exit %d, stdout %q", code, stdout.String())
			}
			out := received.String()
			plain := sgrRE.ReplaceAllString(out, "")
			for _, want := range []string{"starting run", "script  host", "\x1b[2K", "\x1b[1A"} {
				if !strings.Contains(plain, want) {
					t.Errorf("terminal output lacks %q: %q", want, out)
				}
			}
			colored := regexp.MustCompile(regexp.QuoteMeta(sgrCyan) + "[" + strings.Join(liveSpinner, "") + "]" + regexp.QuoteMeta(sgrReset))
			if noColor != "" {
				if sgrRE.MatchString(out) {
					t.Errorf("SGR sequences with NO_COLOR=%s: %q", noColor, out)
				}
			} else if !colored.MatchString(out) {
				t.Errorf("no coloured spinner without NO_COLOR: %q", out)
			}
		})
	}
}

// TestLiveViewNotTerminal: with stderr a pipe, aml run draws no live
// view and writes no escape sequence, even on TERM=xterm-256color with
// colours allowed; the plain lifecycle lines remain.
func TestLiveViewNotTerminal(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("skipping: no sh on this machine (%v)", err)
	}
	wf := filepath.Join(t.TempDir(), "slow.star")
	if err := os.WriteFile(wf, []byte("def main():\n    return script(\"sleep 0.3; echo done\", shell = \"sh\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("NO_COLOR", "")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var received syncBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&received, pr)
	}()
	var stdout strings.Builder
	code := Main([]string{"run", wf}, nil, &stdout, pw)
	pw.Close()
	<-read
	if code != exitOK || stdout.String() != "done\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
	out := received.String()
	if !strings.Contains(out, "starting run") || !strings.Contains(out, "finished run") {
		t.Errorf("no lifecycle lines: %q", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("escape sequences on a pipe: %q", out)
	}
}
