//go:build linux

package cli

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestReleaseExample runs examples/release.star as its header says: aml
// run --journal suspends at the approval with exit code 4, and aml
// resume --answer publishes without drafting again.
func TestReleaseExample(t *testing.T) {
	bin := buildAMLRace(t, false)
	// The journal key, out of the user's config directory.
	t.Setenv("AML_JOURNAL_KEY_FILE", filepath.Join(t.TempDir(), "journal.key"))
	wf, err := filepath.Abs("../../examples/release.star")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return stdout.String(), stderr.String(), code
	}
	_, stderr, code := run("run", "--journal", "runs", wf)
	if code != exitSuspended {
		t.Fatalf("aml run --journal exited %d, want 4:\n%s", code, stderr)
	}
	m := regexp.MustCompile(`continue with: aml resume (\S+) --journal runs --answer publish=true`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no resume command in:\n%s", stderr)
	}
	if !regexp.MustCompile(`(?m)^  publish \(asked at .*release.star:23:19\): Publish these release notes\?$`).MatchString(stderr) {
		t.Fatalf("the question is not printed:\n%s", stderr)
	}
	stdout, stderr, code := run("resume", m[1], "--journal", "runs", "--answer", "publish=true", "--trace")
	if code != 0 {
		t.Fatalf("aml resume exited %d:\n%s", code, stderr)
	}
	want := "Published:\n- retry uploads on timeouts (drafted)\n- drop the unused cache (drafted)\n"
	if stdout != want {
		t.Fatalf("aml resume printed %q, want %q", stdout, want)
	}
	// Both drafts were served from the journal.
	if n := len(regexp.MustCompile(`Agent .*replayed=true`).FindAllString(stderr, -1)); n != 2 {
		t.Fatalf("%d replayed agents in the trace, want 2:\n%s", n, stderr)
	}
}
