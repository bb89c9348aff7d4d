package eval

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRelativeSlash(t *testing.T) {
	for _, c := range []struct{ base, target, want string }{
		{".", "docs/big.md", "docs/big.md"},
		{"docs", "docs/big.md", "big.md"},
		{"docs/sub", "docs/big.md", "../big.md"},
		{"a/b/c", "x/y.md", "../../../x/y.md"},
		{"repo/src", "repo/notes/big.txt", "../notes/big.txt"},
		{"docs", "docs", "."},
		{"doc", "docs/big.md", "../docs/big.md"},
	} {
		if got := relativeSlash(c.base, c.target); got != c.want {
			t.Errorf("relativeSlash(%q, %q) = %q, want %q", c.base, c.target, got, c.want)
		}
	}
}

func TestCopyText(t *testing.T) {
	text := "héllo wörld\n日本語のテキスト\nlast line without newline ✓"
	var out bytes.Buffer
	// One byte at a time: every multibyte rune is split across reads.
	lines, err := copyText(context.Background(), &out, iotest.OneByteReader(strings.NewReader(text)))
	if err != nil || lines != 3 || out.String() != text {
		t.Fatalf("lines %d, err %v, copied %q", lines, err, out.String())
	}
	for _, c := range []struct {
		in, want string
	}{
		{"ok\x00bad", "NUL byte at offset 2"},
		{"ok\xffbad", "invalid byte at offset 2"},
		{"cut \xe6\x97", "invalid byte at offset 4"},
	} {
		_, err := copyText(context.Background(), io.Discard, iotest.OneByteReader(strings.NewReader(c.in)))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errNotText) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
	if n, err := copyText(context.Background(), io.Discard, strings.NewReader("")); err != nil || n != 0 {
		t.Errorf("empty: %d, %v", n, err)
	}
}
