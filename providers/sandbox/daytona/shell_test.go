package daytona

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// hostile are arguments a shell would take apart, expand or run.
var hostile = []string{
	"",
	" ",
	"two words",
	"it's",
	"'",
	"''",
	`'\''`,
	`"double"`,
	`$(touch /tmp/aml-pwned)`,
	"`touch /tmp/aml-pwned`",
	"$HOME",
	"${HOME:-x}",
	"a\nb",
	"\n",
	"trailing\\",
	`back\slash`,
	"tab\there",
	"*",
	"~",
	"-n",
	"--",
	"; rm -rf /",
	"a|b&c>d<e",
	"#comment",
	"!bang",
	"ünïcödé ✓",
	"\x01\x01\x01label",
	"\x1b[31mred",
}

// TestQuoteRoundTrip gives each hostile argument, quoted, to the host's
// sh and checks it comes back unchanged.
func TestQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	for _, a := range hostile {
		out, err := exec.Command(sh, "-c", `printf '%s' `+quote(a)).Output()
		if err != nil {
			t.Fatalf("sh -c printf %s: %v", quote(a), err)
		}
		if string(out) != a {
			t.Errorf("quote(%q) came back as %q", a, out)
		}
	}
}

// TestScriptRefuses covers what a session command cannot carry.
func TestScriptRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  remote.Command
		want string
	}{
		{"empty", remote.Command{}, "empty command"},
		{"nul argument", remote.Command{Args: []string{"echo", "a\x00b"}}, "NUL"},
		{"bad env name", remote.Command{Args: []string{"env"}, Env: map[string]string{"A=B": "c"}}, "invalid"},
		{"nul env value", remote.Command{Args: []string{"env"}, Env: map[string]string{"A": "\x00"}}, "invalid"},
		{"env with = command", remote.Command{Args: []string{"a=b"}, Env: map[string]string{"MY-VAR": "c"}}, "contains ="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := script(tc.cmd, "/home", "mark")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("script: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestScriptRunsOnHost runs the scripts with the host's sh, as the
// daemon would (with its input a FIFO that stays open): argv, directory,
// environment, status, the mark, and standard input fed as lines of
// base64.
func TestScriptRunsOnHost(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	for _, tool := range []string{"base64", "mkfifo", "mktemp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on this host", tool)
		}
	}
	dir := t.TempDir()
	args := append(append([]string{"sh", "-c", `printf '%s|' "$PWD" "$V" "$W" "$@"; exit 7`, "sh"}, hostile...), "\xff\xfe\n", "a\x80'b")
	text, err := script(remote.Command{Args: args, Env: map[string]string{"V": "it's $(x)", "W": "\xc3("}}, dir, "MARK")
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(text) {
		t.Errorf("the script is not valid UTF-8: %q", text)
	}
	cmd := exec.Command(sh, "-c", text)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("run: %v (stderr %q), want status 7", err, stderr.String())
	}
	want := dir + "|it's $(x)|\xc3(|" + strings.Join(hostile, "|") + "|\xff\xfe\n|a\x80'b|" + "MARK\n"
	if stdout.String() != want {
		t.Errorf("stdout %q\nwant   %q", stdout.String(), want)
	}
	if stderr.String() != "MARK\n" {
		t.Errorf("stderr %q", stderr.String())
	}

	text, err = script(remote.Command{Args: []string{"cat"}, Stdin: true}, dir, "MARK")
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(sh, "-c", text)
	// "aGVsbG8K" is "hello\n"; "AAEC" the bytes 0, 1, 2.
	cmd.Stdin = strings.NewReader("aGVsbG8K\nAAEC\n.\nnot read\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if string(out) != "hello\n\x00\x01\x02MARK\n" {
		t.Errorf("stdout %q", out)
	}
}
