package stdlib

import "testing"

func TestTextModule(t *testing.T) {
	runAsserts(t, `
load("assert.star", "assert")
load("@std/text", "dedent", "indent", "wrap", "lines")

# dedent
assert.eq(dedent("""
    steps:
      - build
      - test
    """), "steps:\n  - build\n  - test")
assert.eq(dedent(s = "  a\n    b\n"), "a\n  b")
assert.eq(dedent(""), "")
assert.eq(dedent("\t x\n\t  y"), "x\n y")
assert.eq(dedent("\ta\n    b"), "\ta\n    b")
assert.eq(dedent("  a\r\n\r\n  b\r\n"), "a\n\nb")

# indent
assert.eq(indent("a\nb\n", "> "), "> a\n> b\n")
assert.eq(indent("a\n\n  \nb", "  "), "  a\n\n  \n  b")
assert.eq(indent("", "# "), "")
assert.eq(indent("x", ""), "x")
assert.eq(indent("a\r\n\r\nb", "-"), "-a\r\n\r\n-b")
assert.eq(indent(prefix = "\t", s = "  x"), "\t  x")

# wrap
assert.eq(wrap("the quick brown fox jumps over the lazy dog", 10),
          "the quick\nbrown fox\njumps over\nthe lazy\ndog")
assert.eq(wrap("one two", 7), "one two")
assert.eq(wrap("one two", 6), "one\ntwo")
assert.eq(wrap("a supercalifragilistic word", 5), "a\nsupercalifragilistic\nword")
assert.eq(wrap("  first   paragraph\n  continues here\n\n\n\nsecond\n", 80),
          "first paragraph continues here\n\nsecond")
assert.eq(wrap("", 10), "")
assert.eq(wrap(" \n\t\n", 10), "")
assert.eq(wrap("ééé ééé", 7), "ééé ééé")
assert.eq(wrap("ééé ééé", 6), "ééé\nééé")
assert.eq(wrap("a b c", 1), "a\nb\nc")
assert.eq(wrap("a\r\n\r\nb\r\n", 10), "a\n\nb")

# lines
assert.eq(lines(""), [])
assert.eq(lines("a"), ["a"])
assert.eq(lines("a\nb\n"), ["a", "b"])
assert.eq(lines("a\n\nb"), ["a", "", "b"])
assert.eq(lines("\n"), [""])
assert.eq(lines("\n\n"), ["", ""])
assert.eq(lines("a\r\nb\r\n"), ["a", "b"])
assert.eq(lines("a\rb"), ["a\rb"])
assert.eq(lines("a\r"), ["a\r"])
l = lines("x\ny")
l.append("z")  # the result is a new, mutable list
assert.eq(l, ["x", "y", "z"])
`)
}

func TestTextErrors(t *testing.T) {
	checkErrors(t, `load("@std/text", "dedent", "indent", "wrap", "lines")`, []errorCase{
		{`dedent(1)`, `dedent: for parameter s: got int, want string`},
		{`dedent()`, `dedent: missing argument for s`},
		{`dedent("a", "b")`, `dedent: got 2 arguments, want at most 1`},
		{`indent("a")`, `indent: missing argument for prefix`},
		{`indent("a", None)`, `indent: for parameter prefix: got NoneType, want string`},
		{`indent("a", width = 3)`, `indent: unexpected keyword argument "width"`},
		{`wrap("a", 0)`, `wrap: width must be at least 1, got 0`},
		{`wrap("a", -3)`, `wrap: width must be at least 1, got -3`},
		{`wrap("a", "10")`, `wrap: for parameter width: got string, want int`},
		{`wrap("a")`, `wrap: missing argument for width`},
		{`lines(["a"])`, `lines: for parameter s: got list, want string`},
	})
}
