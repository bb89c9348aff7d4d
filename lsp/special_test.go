//go:build unix

package lsp

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpecialFiles: a FIFO named *.star in the workspace root, and a
// load() of it or of a device, neither block the server nor exhaust it:
// the root is indexed, the load gets a diagnostic saying what the file
// is, hover answers, and the server ends on exit.
func TestSpecialFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{"lib.star": "def helper():\n    return 1\n"})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.star"), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	c := startClient(t, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "main.star"), "load(\"pipe.star\", \"x\")\nload(\"/dev/zero\", \"y\")\nload(\"lib.star\", \"helper\")\n\ndef main():\n    return helper()\n")
	var msgs []string
	for _, d := range c.diagnostics(u, 1) {
		msgs = append(msgs, d.Message)
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"pipe.star is not a regular file", "/dev/zero is not a regular file"} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
	var h any
	c.mustCall("textDocument/hover", map[string]any{"textDocument": map[string]any{"uri": u}, "position": map[string]any{"line": 5, "character": 12}}, &h)
	if h == nil {
		t.Error("no hover of a loaded function beside loads of special files")
	}
	c.shutdown()
}
