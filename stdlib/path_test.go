package stdlib

import (
	"path"
	"testing"
)

func TestPathModule(t *testing.T) {
	runAsserts(t, `
load("assert.star", "assert")
load("@std/path", "path")

assert.eq(type(path), "module")
assert.eq(str(path), '<module "path">')

# join
assert.eq(path.join("a", "b", "c.txt"), "a/b/c.txt")
assert.eq(path.join("a/", "/b/", "c/"), "a/b/c")
assert.eq(path.join("/a", "../b"), "/b")
assert.eq(path.join("a", "", "b"), "a/b")
assert.eq(path.join("a", "/b"), "a/b")
assert.eq(path.join(), "")
assert.eq(path.join(""), "")
assert.eq(path.join("", ""), "")
assert.eq(path.join("a\\b", "c"), "a\\b/c")

# base
assert.eq(path.base("a/b/c.txt"), "c.txt")
assert.eq(path.base("a/b/"), "b")
assert.eq(path.base(""), ".")
assert.eq(path.base("///"), "/")
assert.eq(path.base("c"), "c")

# dir
assert.eq(path.dir("a/b/c"), "a/b")
assert.eq(path.dir("c"), ".")
assert.eq(path.dir("/c"), "/")
assert.eq(path.dir("a//b/./c"), "a/b")
assert.eq(path.dir(""), ".")

# ext
assert.eq(path.ext("a/b.tar.gz"), ".gz")
assert.eq(path.ext("a/b"), "")
assert.eq(path.ext("a.d/b"), "")
assert.eq(path.ext("file."), ".")
assert.eq(path.ext("a/b.txt/"), "")
assert.eq(path.ext(".bashrc"), ".bashrc")

# stem
assert.eq(path.stem("a/b.tar.gz"), "b.tar")
assert.eq(path.stem("a/b"), "b")
assert.eq(path.stem("a/b.txt/"), "b")
assert.eq(path.stem(".bashrc"), "")
for p in ["a/b.tar.gz", "x", ".bashrc", "", "/", "a/b.", "dir/", "a/b.txt/", "."]:
    assert.eq(path.stem(p) + path.ext(path.base(p)), path.base(p))

# clean
assert.eq(path.clean("a//b/./c/../d/"), "a/b/d")
assert.eq(path.clean("/../a"), "/a")
assert.eq(path.clean("../../a"), "../../a")
assert.eq(path.clean(""), ".")
assert.eq(path.clean("/"), "/")

# split
assert.eq(path.split("a/b/c.txt"), ("a/b/", "c.txt"))
assert.eq(path.split("c.txt"), ("", "c.txt"))
assert.eq(path.split("a/b/"), ("a/b/", ""))
assert.eq(path.split("/"), ("/", ""))
assert.eq(type(path.split("a/b")), "tuple")
for q in ["a/b/c", "x", "/", "", "a//b"]:
    d, f = path.split(q)
    assert.eq(d + f, q)

# is_abs
assert.true(path.is_abs("/a"))
assert.true(path.is_abs("/"))
assert.true(not path.is_abs("a/b"))
assert.true(not path.is_abs(""))
assert.true(not path.is_abs("./a"))

# rel
assert.eq(path.rel("a/b", "a/b/c/d"), "c/d")
assert.eq(path.rel("a/b", "a/c"), "../c")
assert.eq(path.rel("/a/b/c", "/a/x"), "../../x")
assert.eq(path.rel("a", "a"), ".")
assert.eq(path.rel("a/./b/", "a/b"), ".")
assert.eq(path.rel("a/b", "a"), "..")
assert.eq(path.rel("", "a/b"), "a/b")
assert.eq(path.rel(".", "a"), "a")
assert.eq(path.rel("/", "/a/b"), "a/b")
assert.eq(path.rel("../a", "../b"), "../b")
assert.eq(path.rel("a", "../b"), "../../b")
assert.eq(path.rel(target = "x/y", base = "x"), "y")
`)
}

func TestPathErrors(t *testing.T) {
	checkErrors(t, `load("@std/path", "path")`, []errorCase{
		{`path.join("a", 1)`, `path.join: for parameter 2: got int, want string`},
		{`path.join(None)`, `path.join: for parameter 1: got NoneType, want string`},
		{`path.join(a = "b")`, `path.join: unexpected keyword argument "a"`},
		{`path.base(1)`, `path.base: for parameter p: got int, want string`},
		{`path.dir()`, `path.dir: missing argument for p`},
		{`path.ext(["a"])`, `path.ext: for parameter p: got list, want string`},
		{`path.stem(True)`, `path.stem: for parameter p: got bool, want string`},
		{`path.clean("a", "b")`, `path.clean: got 2 arguments, want at most 1`},
		{`path.split(None)`, `path.split: for parameter p: got NoneType, want string`},
		{`path.is_abs(1.5)`, `path.is_abs: for parameter p: got float, want string`},
		{`path.rel("a")`, `path.rel: missing argument for target`},
		{`path.rel("a", 2)`, `path.rel: for parameter target: got int, want string`},
		{`path.rel("/a", "b")`, `path.rel: cannot make "b" relative to "/a"`},
		{`path.rel("a", "/b")`, `path.rel: cannot make "/b" relative to "a"`},
		{`path.rel("..", "a")`, `path.rel: cannot make "a" relative to ".."`},
		{`path.rel("../x", "a")`, `path.rel: cannot make "a" relative to "../x"`},
		{`path.nope("a")`, `module has no .nope field or method`},
	})
}

// TestRelPathRoundTrip checks that whenever relPath succeeds, joining the
// result to the base yields the target.
func TestRelPathRoundTrip(t *testing.T) {
	paths := []string{"", ".", "..", "../..", "a", "a/b", "a/b/c", "a/c", "b", "../a", "../b/c",
		"/", "/a", "/a/b", "/b/c", "a/../..", "./a/./b/"}
	for _, base := range paths {
		for _, targ := range paths {
			rel, ok := relPath(base, targ)
			if !ok {
				if path.IsAbs(base) == path.IsAbs(targ) && !startsWithDotDot(path.Clean(base)) {
					t.Errorf("relPath(%q, %q) failed unexpectedly", base, targ)
				}
				continue
			}
			if path.IsAbs(rel) {
				t.Errorf("relPath(%q, %q) = %q is absolute", base, targ, rel)
			}
			if got, want := path.Join(base, rel), path.Clean(targ); got != want && !(got == "" && want == ".") {
				t.Errorf("relPath(%q, %q) = %q, but joined to the base it gives %q, want %q", base, targ, rel, got, want)
			}
		}
	}
}

func startsWithDotDot(p string) bool {
	return p == ".." || len(p) >= 3 && p[:3] == "../"
}
