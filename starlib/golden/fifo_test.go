//go:build unix

package golden

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFIFOTestSkipped: a FIFO named *_test.star is not a test: aml test
// runs the real ones instead of waiting on it.
func TestFIFOTestSkipped(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"real_test.star": "def main():\n    return \"ok\"\n"})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe_test.star"), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	var out bytes.Buffer
	sum, err := Run(Options{Paths: []string{dir}, Update: true, Out: &out, Parallel: 1})
	if err != nil || sum.Passed != 1 || sum.Failed != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, out.String())
	}
}
