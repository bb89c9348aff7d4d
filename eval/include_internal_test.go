package eval

import "testing"

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
