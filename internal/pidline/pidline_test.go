package pidline_test

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/pidline"
)

// TestWriter: the first line is taken off whatever the writes' sizes,
// the rest passes on byte for byte, and a first line that is not the
// wrapper's loses nothing.
func TestWriter(t *testing.T) {
	for _, c := range []struct {
		in     string
		pid    int64
		out    string
		noLine bool
	}{
		{"1234\nerr\n", 1234, "err\n", false},
		{"1234\n", 1234, "", false},
		{"1\nx", 0, "x", false},
		{strings.Repeat("9", 30) + "\nrest", 0, strings.Repeat("9", 30) + "\nrest", true},
	} {
		for size := 1; size <= len(c.in); size++ {
			var out strings.Builder
			var line []byte
			called := 0
			w := &pidline.Writer{Dst: &out, Set: func(l []byte) { line = l; called++ }}
			for i := 0; i < len(c.in); i += size {
				b := c.in[i:min(i+size, len(c.in))]
				if n, err := w.Write([]byte(b)); err != nil || n != len(b) {
					t.Fatalf("Write(%q) = %d, %v", b, n, err)
				}
			}
			if called != 1 || pidline.Parse(line) != c.pid || out.String() != c.out || (line == nil) != c.noLine {
				t.Errorf("%q in writes of %d: pid %d (called %d, line %q), out %q; want %d, %q", c.in, size, pidline.Parse(line), called, line, out.String(), c.pid, c.out)
			}
		}
	}
}
